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

from dataclasses import dataclass, replace
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


__all__ = ["AssemblyEvent", "CallView", "CallState", "EventKind", "hide_open_progress", "hide_progress"]
