"""Two assembled inputs side by side: per-call verdicts, bytes, fragments and quirks.

Typical use: the same request sent through two gateways. Streams are paired by position,
and calls within a stream by provider order (a gateway may renumber indexes, so keys are
not compared). A field differs when its values differ; a call present on one side only
is a difference of every field. Nothing here carries argument text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toollatch.core.model import CallOutcome, StreamResult

#: Per-call fields compared, in display order.
CALL_FIELDS = ("name", "call_id", "verdict", "reason", "bytes", "fragments", "executor")


def call_row(call: CallOutcome | None) -> dict[str, Any] | None:
    """The compared fields of one call (``verdict`` is the state, ``reason`` its code)."""
    if call is None:
        return None
    return {
        "name": call.name,
        "call_id": call.call_id,
        "verdict": call.state.value,
        "reason": (call.reason or "").split(":", 1)[0] or None,
        "bytes": call.bytes,
        "fragments": call.fragments,
        "executor": call.executor,
    }


@dataclass
class CallPair:
    """The n-th call of a stream on both sides; ``differs`` names the fields that differ."""

    index: int
    a: dict[str, Any] | None
    b: dict[str, Any] | None
    differs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "a": self.a, "b": self.b, "differs": self.differs}


@dataclass
class StreamPair:
    """The n-th stream on both sides."""

    index: int
    a_end: str | None
    b_end: str | None
    calls: list[CallPair]
    quirks: list[dict[str, Any]]  # {"quirk", "a", "b", "differs"}

    @property
    def end_differs(self) -> bool:
        return self.a_end != self.b_end

    @property
    def differences(self) -> int:
        return sum(1 for c in self.calls if c.differs) + sum(1 for q in self.quirks if q["differs"]) + int(self.end_differs)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "end": {"a": self.a_end, "b": self.b_end, "differs": self.end_differs},
            "calls": [c.to_json() for c in self.calls],
            "quirks": self.quirks,
            "differences": self.differences,
        }


def compare(a: list[StreamResult], b: list[StreamResult]) -> list[StreamPair]:
    """Pair the streams and calls of two inputs and mark what differs."""
    pairs: list[StreamPair] = []
    for i in range(max(len(a), len(b))):
        sa = a[i] if i < len(a) else None
        sb = b[i] if i < len(b) else None
        calls_a = sa.calls if sa else []
        calls_b = sb.calls if sb else []
        calls: list[CallPair] = []
        for n in range(max(len(calls_a), len(calls_b))):
            ra = call_row(calls_a[n] if n < len(calls_a) else None)
            rb = call_row(calls_b[n] if n < len(calls_b) else None)
            if ra is None or rb is None:
                differs = list(CALL_FIELDS)
            else:
                differs = [f for f in CALL_FIELDS if ra[f] != rb[f]]
            calls.append(CallPair(n, ra, rb, differs))
        qa = sa.quirks if sa else {}
        qb = sb.quirks if sb else {}
        quirks = [
            {"quirk": q, "a": qa.get(q, 0), "b": qb.get(q, 0), "differs": qa.get(q, 0) != qb.get(q, 0)}
            for q in dict.fromkeys([*qa, *qb])
        ]
        pairs.append(StreamPair(i, sa.end if sa else None, sb.end if sb else None, calls, quirks))
    return pairs


def summary(pairs: list[StreamPair]) -> dict[str, Any]:
    """Counts for the page head: streams, calls, and how many of each differ."""
    calls = [c for p in pairs for c in p.calls]
    return {
        "streams": len(pairs),
        "calls": len(calls),
        "calls_differing": sum(1 for c in calls if c.differs),
        "differences": sum(p.differences for p in pairs),
        "identical": all(p.differences == 0 for p in pairs),
    }
