"""Leaving calls out of a stream's ops: the first ``keep`` new calls followed, the rest counted.

A reader that must stay responsive (the dashboard: :class:`toollatch.core.large.CappedPipeline`)
follows the first calls of an input one by one and leaves the others out.
:func:`cap_new_calls` cuts one event's ops so; what it leaves out still counts where a
call followed could be judged by it: the tool_call_ids of calls left out
(:class:`~toollatch.core.model.CallsLeftOut` ops, counted by
:func:`toollatch.core.identity.left_out`), and a call left out that starts where a call
followed is (which fails that call). A differential test holds every call followed to the
verdict the library gives it with every call there (``tests/test_capcalls.py``).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from toollatch.core.model import ArgsFragment, CallIdentity, CallKey, CallsLeftOut, CallStart, Cancel, Op, Quirk, StreamEnd, StreamError, StreamStart, StreamTruncated

__all__ = ["TOLD_PER_OP", "Capped", "KeyIds", "KnownKeys", "cap_new_calls", "key_ids"]

#: Identity ops of calls left out per :class:`~toollatch.core.model.CallsLeftOut` op: one
#: such op costs the assembler about as much as this many ops of a call followed, so a
#: part of an event applied between two yields of the event loop stays as short.
TOLD_PER_OP = 32

#: Ops that open a call at a key that has none (the assembler's ``start``); any other op
#: there (a block stop, a truncation) changes nothing and is no call.
_OPENERS = (CallStart, CallIdentity, ArgsFragment)
#: Ops that end a stream: the assembler ignores every op after one (quirk ``op_after_stream_end``).
_ENDS = (StreamEnd, StreamError, StreamTruncated, Cancel)


@dataclass(slots=True)
class Capped:
    """What :func:`cap_new_calls` kept and left out."""

    #: the ops kept, in order, with :class:`~toollatch.core.model.CallsLeftOut` ops in place
    ops: list[Op]
    #: keys of the calls left out in the stream the ops end in (their later ops are left out too)
    left_out: set[CallKey]
    #: calls left out, in every stream the ops touch
    untold: int
    #: the ops begin another stream (a :class:`~toollatch.core.model.StreamStart` after the
    #: current stream began): ``left_out`` is that stream's, not the current one's
    new_stream: bool


def cap_new_calls(
    ops: list[Op], known: Container[CallKey], keep: int, earlier: Container[CallKey] = frozenset(), began: bool = True, ended: bool = False
) -> Capped:
    """``ops`` (one event's, in order) with the ops of every call past the first ``keep``
    new ones left out. A call is new when its key is not in ``known`` (the keys the current
    stream already has: :class:`KnownKeys`, :class:`KeyIds`) and its op opens one
    (a start, an identity, a fragment: a block stop at a key without a call is no call);
    ops of a key in ``earlier`` (calls left out before) are left out too, and not counted
    again. A :class:`~toollatch.core.model.CallStart` with another tool_call_id at a key
    that has a call (the assembler's restart: another call, the first one fails) is new
    too; known keys' ids are read from ``known`` where it has a ``call_id(key)`` method.
    A :class:`~toollatch.core.model.StreamStart` after the stream began (``began``: the
    current stream had an op) begins another stream, with no keys known or left out; ops
    after a stream's end (``ended``: the current stream's) until then open no call (the
    assembler ignores them) and are kept. Ops without a key (stream start, end, quirks)
    are always kept, in order.

    The :class:`~toollatch.core.model.CallStart` ops of the calls left out, and their
    :class:`~toollatch.core.model.CallIdentity` ops that name an id, are kept as
    :class:`~toollatch.core.model.CallsLeftOut` ops where they were (a call left out that
    a fragment opened is told as a start without id or name, as the assembler opens it),
    so the assembler counts their tool_call_ids as the library's reader does (a call
    followed that shares its id with one left out fails alike). O(len(ops))."""
    kept: list[Op] = []
    opened: set[CallKey] = set()
    new_calls = untold = 0
    new_stream = False
    ids: dict[CallKey, str | None] = {}  # tool_call_id of each key these ops touched, as the ops set it
    known_id = getattr(known, "call_id", None)
    left_out: set[CallKey] = set()
    told: list[CallStart | CallIdentity] = []  # identity ops of calls left out, since the last op kept
    for op in ops:
        kind = type(op)
        key = getattr(op, "key", None)
        if key is not None and not ended:
            call_id = getattr(op, "call_id", None) if kind is CallStart or kind is CallIdentity else None
            if key in left_out or key in earlier:
                leave = True
                if kind is CallStart or call_id:
                    told.append(op)  # type: ignore[arg-type]
            else:
                new = key not in opened and key not in known and kind in _OPENERS
                if not new and call_id and (key in opened or key in known):
                    current = ids[key] if key in ids else (known_id(key) if known_id is not None else None)
                    if kind is CallStart and current is not None:
                        new = current != call_id  # another id: a restart, another call
                    elif current is None or op.final:  # type: ignore[union-attr]
                        ids[key] = call_id  # the id the call now has (a repeated start fills it too)
                leave = new and new_calls >= keep
                if leave:  # a call left out: told as the assembler would open it
                    left_out.add(key)
                    untold += 1
                    told.append(op if kind is not ArgsFragment else CallStart(key))  # type: ignore[arg-type]
                elif new:
                    opened.add(key)
                    new_calls += 1
                    ids[key] = call_id
            if leave:
                continue
        elif kind is StreamStart:
            if began:  # another stream (Pipeline._apply_all): its keys are its own
                known, known_id, earlier = (), None, frozenset()
                opened, ids, left_out = set(), {}, set()
                new_stream, ended = True, False
        elif kind in _ENDS:
            ended = True
        if kind is not Quirk:
            began = True  # as the assembler counts it
        if told:
            _tell(kept, told)
        kept.append(op)
    if told:
        _tell(kept, told)
    return Capped(kept, left_out, untold, new_stream)


def _tell(kept: list[Op], told: list[CallStart | CallIdentity]) -> None:
    """Append to ``kept`` the identity ops ``told`` of calls left out, in
    :class:`~toollatch.core.model.CallsLeftOut` ops of at most :data:`TOLD_PER_OP`; empty ``told``."""
    kept.extend(CallsLeftOut(tuple(told[i : i + TOLD_PER_OP])) for i in range(0, len(told), TOLD_PER_OP))
    told.clear()


class KnownKeys:
    """The keys a stream (an :class:`~toollatch.core.assembler.Assembler`) named its calls by,
    with the tool_call_id of the call at each, looked up in place (no copy per event)."""

    __slots__ = ("_calls", "_alias")

    def __init__(self, stream: Any) -> None:
        self._calls, self._alias = stream._calls, stream._alias

    def __contains__(self, key: object) -> bool:
        return key in self._calls or key in self._alias

    def call_id(self, key: CallKey) -> str | None:
        """The tool_call_id of the call at ``key`` now (None: none yet, or no call)."""
        call = self._calls.get(self._alias.get(key, key))
        return None if call is None else call.call_id


class KeyIds(dict[CallKey, "str | None"]):
    """A copy of the keys a stream's ops named its calls by, each with the tool_call_id of
    the call there (for :func:`cap_new_calls` in a worker thread: it tells a restart)."""

    def call_id(self, key: CallKey) -> str | None:
        return self.get(key)


def key_ids(stream: Any) -> KeyIds:
    """:class:`KeyIds` of ``stream`` (an :class:`~toollatch.core.assembler.Assembler`, or
    None: no keys), aliases included; O(calls)."""
    ids = KeyIds()
    if stream is not None:
        calls = stream._calls
        ids.update((key, call.call_id) for key, call in calls.items())
        ids.update((key, calls[target].call_id) for key, target in stream._alias.items())
    return ids
