"""OpenAI Chat Completions streaming (and OpenAI-compatible gateways).

Provider document: OpenAI API reference, "The chat completion chunk object":
``choices[i].delta.tool_calls[j]`` carries ``index``, ``id``, ``type`` and
``function.{name, arguments}``; ``arguments`` arrives as string fragments; the stream
ends with ``finish_reason`` on each choice and ``data: [DONE]``. The ``finish_reason``
decides how the stream ends (:mod:`.ends`): ``length`` is truncated, ``content_filter``
an error, and then nothing commits.

Keying: a call is ``(choice index, tool_calls[].index, generation)``. A different
non-empty ``id`` at an index already bound starts a new generation (some gateways put
parallel calls at one index). An entry without ``index`` binds by its ``id``, else to the
single call of that choice; with several calls that is ambiguous and fails the stream
rather than guessing.

``arguments`` given as a JSON value (an object, number...) instead of a string is judged as
its JSON text (quirk ``arguments_as_json_value``), after a strict re-check of the chunk
that carried it (:func:`.base.check_strict`: the chunk's parse keeps the last of duplicate
keys).
"""

from __future__ import annotations

from typing import Any

from toollatch.core import jsontext
from toollatch.wire.capture import DONE, ProviderEvent
from toollatch.core.model import ArgsFragment, CallIdentity, CallKey, CallStart, Op, Quirk, StreamError, StreamTruncated
from toollatch.dialects.base import check_strict, provider_error
from toollatch.dialects.ends import end_ops


#: Top-level keys of a plain chunk. A chunk with no other key (``error``,
#: ``prompt_filter_results``, a gateway's extras) and no ``usage`` takes the one-step path
#: of :meth:`OpenAIChatAdapter.feed`; any other goes the general way, to the same ops.
_PLAIN_CHUNK = frozenset(
    {"id", "object", "created", "model", "choices", "system_fingerprint", "usage", "service_tier", "obfuscation", "provider"}
)
#: Keys of a plain ``choices[]`` element (no ``content_filter_results`` or ``_offsets``).
_PLAIN_CHOICE = frozenset({"index", "delta", "finish_reason", "logprobs", "native_finish_reason"})


#: The quirk of a ``role`` repeated in a later chunk (some gateways send it in every chunk):
#: one op shared by every such chunk (ops are never mutated).
_ROLE_REPEATED = Quirk("role_repeated")


class _Choice:
    """One choice's calls; every lookup is a dict lookup, so n calls cost O(n)."""

    __slots__ = ("bound", "next_index", "by_id", "ids", "keys", "fragments", "whole_in_start", "single", "finished", "reason", "role_seen")

    def __init__(self) -> None:
        self.bound: dict[int, CallKey] = {}  # tool_calls index -> newest key there
        self.next_index = 0  # one past the highest tool_calls index bound
        self.by_id: dict[str, CallKey] = {}
        self.ids: dict[CallKey, str] = {}
        self.keys: dict[CallKey, None] = {}  # every call started, in order
        # fragments per call (counts only, never text); exact for the calls of whole_in_start
        self.fragments: dict[CallKey, int] = {}
        self.whole_in_start: set[CallKey] = set()  # start entry carried arguments
        self.single = 0  # calls of whole_in_start with one fragment so far (kept as they grow: read at the end)
        self.finished = False
        self.reason: str | None = None  # the last finish_reason given
        self.role_seen = False


class OpenAIChatAdapter:
    """Translates ``chat.completion.chunk`` objects into ops."""

    __slots__ = ("_choices", "_ended")

    name = "openai-chat"

    def __init__(self) -> None:
        self._choices: dict[int, _Choice] = {}
        self._ended = False

    def feed(self, event: ProviderEvent) -> list[Op]:
        data = event.data
        if data.__class__ is dict and data.keys() <= _PLAIN_CHUNK and not data.get("usage"):
            # the common chunk: one choice, no error, no usage, no filter results, no extras
            choices = data.get("choices")
            if choices.__class__ is list and len(choices) == 1 and (choice := choices[0]).__class__ is dict:
                # an open choice, no finish_reason: text, one more fragment, a call's start...
                if (
                    choice.keys() <= _PLAIN_CHOICE
                    and not choice.get("finish_reason")
                    and type(ci := choice.get("index", 0)) is int
                    and (delta := choice.get("delta")).__class__ is dict
                ):
                    state = self._choices.get(ci)
                    if state is None:  # its first chunk (as _choice makes it)
                        state = self._choices[ci] = _Choice()
                    if not state.finished:
                        entries = delta.get("tool_calls")
                        if entries is None:
                            if "role" not in delta:
                                return []  # text only (content, reasoning...): nothing for the assembler
                        elif (ops := self._fragment(state, delta, entries)) is not None:
                            return ops
                        # a call's start, a role: the delta as _choice reads it for an open choice
                        ops = []
                        self._delta(ci, state, delta, ops, event)
                        return ops
                ops = []
                self._choice(choice, ops, event)
                return ops
        ops = []
        if data == DONE:
            if not self._ended:
                ops.extend(self._end("[DONE]"))
            return ops
        if not isinstance(data, dict):
            return [Quirk("non_object_chunk")]
        if isinstance(data.get("error"), (dict, str)):
            self._ended = True
            return [provider_error(data["error"])]
        if "prompt_filter_results" in data:
            ops.append(Quirk("content_filter_chunk"))
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            ops.append(Quirk("empty_choices"))
            return ops  # metadata: usage, prompt filter results, provider extras
        if data.get("usage") and any(isinstance(c, dict) and c.get("delta") for c in choices):
            ops.append(Quirk("usage_on_delta_chunk"))  # usage never ends anything
        for choice in choices:
            if isinstance(choice, dict):
                self._choice(choice, ops, event)
        return ops

    def _fragment(self, state: _Choice, delta: dict[str, Any], entries: Any) -> list[Op] | None:
        """The ops of a chunk that brings one more argument fragment for a bound index of
        the open choice ``state`` (``delta``: its delta, ``entries`` its ``tool_calls``,
        not None); text and a repeated ``role`` may stand beside it. None: not such a
        chunk, nothing done (the general way reads it)."""
        # one more fragment: {"index": i, "function": {"arguments": "..."}} at a bound index
        if entries.__class__ is not list or len(entries) != 1 or (entry := entries[0]).__class__ is not dict or "id" in entry:
            return None
        index = entry.get("index")
        fn = entry.get("function")
        if type(index) is not int or fn.__class__ is not dict or len(fn) != 1:
            return None
        key = state.bound.get(index)
        args = fn.get("arguments")
        if key is None or args.__class__ is not str:
            return None
        ops: list[Op] = []
        if len(delta) > 1 and delta.get("role"):  # other delta keys (text) are not the adapter's
            # the delta's role repeated beside a fragment (some gateways send it in every
            # chunk): the quirk goes before the fragment, as the general way orders them
            if state.role_seen:
                ops.append(_ROLE_REPEATED)
            state.role_seen = True
        if args:
            if key in state.whole_in_start:  # counted only where the count is read: see _end
                state.fragments[key] += 1
                state.single -= state.fragments[key] == 2
            ops.append(ArgsFragment(key, args))
        return ops

    def _choice(self, choice: dict[str, Any], ops: list[Op], event: ProviderEvent) -> bool:
        """Apply one ``choices[]`` element; True if it carried a ``finish_reason``."""
        ci = choice.get("index", 0)
        if type(ci) is not int:
            ci = 0
        if "content_filter_results" in choice or "content_filter_offsets" in choice:
            ops.append(Quirk("content_filter_chunk"))
        delta = choice.get("delta")
        if delta.__class__ is dict:
            state = self._choices.get(ci)
            if state is None:
                state = self._choices[ci] = _Choice()
            entries = delta.get("tool_calls")
            if entries and state.finished:
                ops.append(Quirk("tool_call_after_finish_reason"))
                state.finished = False  # the choice is open again until its next finish_reason
            if len(delta) == 1 and entries.__class__ is list and len(entries) == 1 and self._continuation(state, entries[0], ops):
                pass  # the common chunk: one more fragment for a bound index
            else:
                self._delta(ci, state, delta, ops, event)
        reason = choice.get("finish_reason")
        if not reason:
            return False
        state = self._choices.get(ci)
        if state is None:
            state = self._choices[ci] = _Choice()
        if state.finished:
            ops.append(Quirk("finish_reason_repeated"))
        if reason == "stop" and state.keys:
            ops.append(Quirk("finish_reason_stop_on_tool_turn"))
        state.finished = True
        if isinstance(reason, str):
            state.reason = reason
        return True

    def _continuation(self, state: _Choice, entry: Any, ops: list[Op]) -> bool:
        """Fast path: ``{"index": i, "function": {"arguments": "..."}}`` at a bound index."""
        if entry.__class__ is not dict or "id" in entry:
            return False
        index = entry.get("index")
        fn = entry.get("function")
        if type(index) is not int or fn.__class__ is not dict or len(fn) != 1:
            return False
        key = state.bound.get(index)
        args = fn.get("arguments")
        if key is None or args.__class__ is not str:
            return False
        if args:
            if key in state.whole_in_start:  # counted only where the count is read: see _end
                state.fragments[key] += 1
                state.single -= state.fragments[key] == 2
            ops.append(ArgsFragment(key, args))
        return True

    def _delta(self, ci: int, state: _Choice, delta: dict[str, Any], ops: list[Op], event: ProviderEvent) -> None:
        if delta.get("role"):
            if state.role_seen:
                ops.append(_ROLE_REPEATED)
            state.role_seen = True
        entries = delta.get("tool_calls")
        if isinstance(entries, list):
            if len(entries) > 1:
                indexes = [e.get("index") for e in entries if isinstance(e, dict) and isinstance(e.get("index"), int)]
                if len(indexes) != len(set(indexes)):
                    ops.append(Quirk("two_entries_for_one_index_in_chunk"))
            for entry in entries:
                if isinstance(entry, dict):
                    self._entry(ci, state, entry, ops, event)

    def _end(self, detail: str) -> list[Op]:
        self._ended = True
        ops: list[Op] = []
        whole = 0
        reasons: list[str] = []
        for state in self._choices.values():
            whole += state.single
            if state.reason:
                reasons.append(state.reason)
        if not whole:
            return end_ops("finish_reason", reasons, detail)
        ops.append(Quirk("whole_call_in_one_delta", whole))  # one op for them all (a stream of 100,000 calls: not 100,000 ops)
        ops.extend(end_ops("finish_reason", reasons, detail))
        return ops

    def close(self) -> list[Op]:
        """End of input: normal if every choice seen has its ``finish_reason``.

        ``finish_reason`` alone does not end the stream while input continues: more choices
        or a late tool call may still come (some gateways send them before ``[DONE]``); the
        stream ends at ``[DONE]`` or, for recordings without it, at the end of input.
        """
        if self._ended:
            return []
        if self._choices:
            for choice in self._choices.values():
                if not choice.finished:
                    break
            else:  # every choice seen has its finish_reason
                return self._end("finish_reason")
        return [StreamTruncated("input ended before finish_reason or [DONE]")]

    def _entry(self, ci: int, state: _Choice, entry: dict[str, Any], ops: list[Op], event: ProviderEvent) -> None:
        call_id = call_id if isinstance(call_id := entry.get("id"), str) else None
        fn = fn if isinstance(fn := entry.get("function"), dict) else {}
        name = name if isinstance(name := fn.get("name"), str) else None
        args = fn.get("arguments")
        if call_id == "":
            ops.append(Quirk("empty_id_on_continuation"))
        if name == "":
            ops.append(Quirk("empty_name_on_continuation"))
        key = self._bind(ci, state, entry.get("index"), call_id or None, ops)
        if key is None:
            return
        starting = key not in state.keys
        if starting:
            state.keys[key] = None
            if call_id:
                state.by_id[call_id] = key
                state.ids[key] = call_id
            ops.append(CallStart(key, call_id or None, name or None))
        elif call_id or name:
            if call_id and key not in state.ids:
                state.by_id[call_id] = key
                state.ids[key] = call_id
            ops.append(CallIdentity(key, call_id or None, name or None))
        if args is not None and not isinstance(args, str):
            # an object, array, number or boolean where text belongs: judged as that JSON text
            ops.append(Quirk("arguments_as_json_value"))
            args = jsontext.dumps(args)  # any depth: the latch judges it
            check_strict(key, event, ops)  # the event's parse may have hidden a duplicate key
        if isinstance(args, str) and args:
            if key not in state.fragments:
                state.fragments[key] = 0
                if starting:
                    state.whole_in_start.add(key)
            count = state.fragments[key] = state.fragments[key] + 1
            if key in state.whole_in_start:
                state.single += 1 if count == 1 else -(count == 2)
            ops.append(ArgsFragment(key, args))

    def _bind(self, ci: int, state: _Choice, index: Any, call_id: str | None, ops: list[Op]) -> CallKey | None:
        if isinstance(index, int) and not isinstance(index, bool):
            key = state.bound.get(index)
            if key is None:
                if index != len(state.bound):
                    ops.append(Quirk("sparse_index"))
                key = _bind_index(state, (ci, index, 0))
            elif call_id and state.ids.get(key) not in (None, call_id):
                known = state.by_id.get(call_id)
                if known is not None and known[1] == index:
                    ops.append(Quirk("ids_interleaved_at_one_index"))
                    return known  # an earlier call at this index, resumed: the id decides
                ops.append(Quirk("same_index_new_id"))
                key = _bind_index(state, (ci, index, key[2] + 1))  # the bound key is the newest generation
            return key
        ops.append(Quirk("missing_index"))
        if call_id:
            key = state.by_id.get(call_id)
            if key is None:
                key = _bind_index(state, (ci, state.next_index, 0))
            return key
        if len(state.keys) == 1:
            return next(iter(state.keys))
        if not state.keys:
            return _bind_index(state, (ci, 0, 0))
        self._ended = True
        ops.append(StreamError(f"choice {ci}: tool_calls entry without index or id while {len(state.keys)} calls are open"))
        return None


def _bind_index(state: _Choice, key: CallKey) -> CallKey:
    """Bind ``key`` (``(choice, index, generation)``) as the newest call at its index."""
    state.bound[key[1]] = key
    if key[1] >= state.next_index:
        state.next_index = key[1] + 1
    return key
