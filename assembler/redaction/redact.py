"""The redaction boundary: the only view of a call the web layer may see before commit.

:class:`CallView` and :class:`AssemblyEvent` deliberately have **no field that can carry
argument text**: tool name, ``call_id``, state, byte and fragment counts, reason code and
timestamps only. Committed arguments are fetched separately, and only after the latch
(:meth:`toollatch.core.assembler.Assembler.committed`).

With ``ui_forward_partial_args: false`` even the counts of a call that has no verdict yet
are withheld: :func:`hide_progress` and :func:`hide_open_progress` give the views and
results a UI may show then (name, id, state; ``bytes`` and ``fragments`` 0 until the call
is COMMITTED, FAILED or CANCELLED).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from toollatch.core.model import CallKey, CallState, Executor, StreamEndKind, StreamResult, Transition

EventKind = Literal["stream_start", "call_opened", "identity", "fragment", "state", "stream_end", "quirk"]


@dataclass(frozen=True, slots=True)
class CallView:
    """Redacted snapshot of one call.

    ``bytes`` is UTF-8 bytes of argument text received so far, ``fragments`` the number
    of fragments; ``reason`` is a reason code with a detail that never quotes argument
    text; ``transitions`` times are seconds since the stream started.
    """

    key: CallKey
    call_id: str | None
    name: str | None
    state: CallState
    reason: str | None
    bytes: int
    fragments: int
    executor: Executor
    transitions: tuple[Transition, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "key": list(self.key),
            "call_id": self.call_id,
            "name": self.name,
            "state": self.state.value,
            "reason": self.reason,
            "bytes": self.bytes,
            "fragments": self.fragments,
            "executor": self.executor,
            "transitions": [{"state": t.state.value, "t": round(t.t, 6)} for t in self.transitions],
        }


@dataclass(frozen=True, slots=True)
class AssemblyEvent:
    """One thing that happened in the assembler, in order.

    ``seq`` increases by one per event within a stream; ``t`` is seconds since that
    stream started (from the assembler's clock). ``call`` is set for call events,
    ``end`` for ``stream_end``; ``detail`` is a reason or quirk name, never argument text.
    """

    seq: int
    t: float
    kind: EventKind
    stream: int
    call: CallView | None = None
    end: StreamEndKind | None = None
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "t": round(self.t, 6),
            "kind": self.kind,
            "stream": self.stream,
            "call": self.call.to_json() if self.call else None,
            "end": self.end,
            "detail": self.detail,
        }


# Positional builders of the two records made at each progress fold of the dashboard (one
# per call per render): each field stored through its slot, without the per-field check of
# a frozen dataclass's __init__ (half its cost); the same object as the class's own call.
(_view_key, _view_call_id, _view_name, _view_state, _view_reason, _view_bytes, _view_fragments, _view_executor,
 _view_transitions) = (CallView.__dict__[f.name].__set__ for f in fields(CallView))
(_event_seq, _event_t, _event_kind, _event_stream, _event_call, _event_end, _event_detail) = (
    AssemblyEvent.__dict__[f.name].__set__ for f in fields(AssemblyEvent)
)
_new = object.__new__


def call_view(
    key: CallKey, call_id: str | None, name: str | None, state: CallState, reason: str | None, size: int,
    fragments: int, executor: Executor, transitions: tuple[Transition, ...],
) -> CallView:
    """``CallView(key, call_id, name, state, reason, size, fragments, executor, transitions)``,
    built faster (``size``: the ``bytes`` field)."""
    view = _new(CallView)
    _view_key(view, key)
    _view_call_id(view, call_id)
    _view_name(view, name)
    _view_state(view, state)
    _view_reason(view, reason)
    _view_bytes(view, size)
    _view_fragments(view, fragments)
    _view_executor(view, executor)
    _view_transitions(view, transitions)
    return view


def assembly_event(
    seq: int, t: float, kind: EventKind, stream: int, call: CallView | None, end: StreamEndKind | None, detail: str | None
) -> AssemblyEvent:
    """``AssemblyEvent(seq, t, kind, stream, call, end, detail)``, built faster."""
    event = _new(AssemblyEvent)
    _event_seq(event, seq)
    _event_t(event, t)
    _event_kind(event, kind)
    _event_stream(event, stream)
    _event_call(event, call)
    _event_end(event, end)
    _event_detail(event, detail)
    return event


def hide_progress(view: CallView) -> CallView:
    """``view`` with ``bytes`` and ``fragments`` 0 unless the call has its verdict (a
    terminal state); a view that shows no progress is returned as is."""
    if view.state.terminal or (view.bytes == 0 and view.fragments == 0):
        return view
    return replace(view, bytes=0, fragments=0)


def hide_open_progress(result: StreamResult) -> StreamResult:
    """``result`` with the ``bytes`` and ``fragments`` of every call that has no verdict yet
    set to 0 (a copy; calls with a verdict are kept as they are)."""
    calls = [c if c.state.terminal else replace(c, bytes=0, fragments=0) for c in result.calls]
    return replace(result, calls=calls)


__all__ = ["AssemblyEvent", "CallView", "CallState", "EventKind", "assembly_event", "call_view", "hide_open_progress", "hide_progress"]
