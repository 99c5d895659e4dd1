"""The redaction boundary: the only view of a call the web layer may see before commit.

:class:`CallView` and :class:`AssemblyEvent` deliberately have **no field that can carry
argument text**: tool name, ``call_id``, state, byte and fragment counts, reason code and
timestamps only. Committed arguments are fetched separately, and only after the latch
(:meth:`assembler.assembler.Assembler.committed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .model import CallKey, CallState, Executor, StreamEndKind, Transition

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


__all__ = ["AssemblyEvent", "CallView", "CallState", "EventKind"]
