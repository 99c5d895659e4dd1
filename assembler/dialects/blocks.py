"""Call keys for dialects whose fragments name only a block index.

Anthropic ``content_block_delta.index``, Bedrock ``contentBlockIndex`` and the Cohere
``tool-call-delta`` ``index`` say *where* a fragment goes, never *which call* it belongs
to. A well-behaved stream starts each index once; gateways that translate from other
APIs have been seen to start every block at the same index. So that two calls never share
one buffer:

* the first call started at index ``i`` is keyed ``(i,)``; a later call started at ``i``
  after the earlier one's block stop is keyed ``(i, n)`` (``n`` = 1, 2, ...; quirk
  ``block_index_reused``), and fragments and the block stop for ``i`` go to the newest;
* a call started at ``i`` while the earlier call there has no block stop yet makes the
  stream uninterpretable: from then on no fragment can be told to belong to one call or the
  other. The new call still gets its own key (so it is answered), and the adapter ends the
  stream with :class:`~toollatch.core.model.StreamError`, which fails every open call. A start
  repeating the open call's own non-empty id is the same call started twice (the key is
  returned again and the assembler records ``call_start_repeated``). A start after the
  block stop is a new call even with the same id; the latch then fails both (one
  ``tool_call_id`` for two calls).
"""

from __future__ import annotations

from toollatch.core.model import CallKey, Op, Quirk


class BlockKeys:
    """Index → call key for one stream; see the module docstring for the rules."""

    __slots__ = ("current", "next_index", "_open", "_ids", "_count")

    def __init__(self) -> None:
        #: index -> key of the newest call there; adapters read it directly on the hot path
        self.current: dict[int, CallKey] = {}
        #: one past the highest index a call started at (the next position, in O(1))
        self.next_index = 0
        self._open: set[CallKey] = set()  # started, no block stop yet
        self._ids: dict[CallKey, str | None] = {}
        self._count: dict[int, int] = {}  # calls started at each index

    def __contains__(self, index: object) -> bool:
        return index in self.current

    def start(self, index: int, call_id: str | None, ops: list[Op]) -> tuple[CallKey, bool]:
        """The key for a call started at ``index``, and whether it clashes with an open call.

        ``True`` means the index's earlier call had no block stop: the caller emits the
        :class:`~toollatch.core.model.CallStart` for the returned key, then a stream error.
        """
        key = self.current.get(index)
        if key is not None and key in self._open and call_id and self._ids.get(key) == call_id:
            return key, False  # the same call started twice
        clash = key is not None and key in self._open
        n = self._count.get(index, 0)
        self._count[index] = n + 1
        if n:
            ops.append(Quirk("block_index_reused"))
        key = (index,) if n == 0 else (index, n)
        self.current[index] = key
        if index >= self.next_index:
            self.next_index = index + 1
        self._open.add(key)
        self._ids[key] = call_id
        return key, clash

    def get(self, index: object) -> CallKey | None:
        """The key fragments at ``index`` belong to (the newest call there), or None."""
        return self.current.get(index) if type(index) is int else None

    def stop(self, index: object) -> CallKey | None:
        """The key a block stop at ``index`` closes, or None when no call is there."""
        key = self.get(index)
        if key is not None:
            self._open.discard(key)
        return key

    def release(self, index: int) -> None:
        """A non-tool block starts at ``index``: fragments there no longer go to a call.

        A call left there without a block stop receives nothing more; its text so far is
        judged at the stream end (a complete JSON text cannot have lost a tail).
        """
        self.current.pop(index, None)

    def is_open(self, key: CallKey) -> bool:
        """True while the call at ``key`` has had no block stop."""
        return key in self._open
