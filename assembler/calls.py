"""One call's assembly record, and the run budget shared by the streams of a run.

The record holds the call's append-only UTF-8 buffer (amortized O(1) per fragment,
decoded once at the latch) and the varint-encoded byte length of each fragment, so a
diagnosis can name the fragment where the text broke without keeping the fragments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .model import CallKey, Executor, Transition
from .redact import CallView
from .state import CallStateMachine


def append_varint(out: bytearray, n: int) -> None:
    """Append ``n`` (a byte length) as a little-endian base-128 varint."""
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def split_fragments(text: str, lengths: bytearray) -> list[str]:
    """The fragments again: ``text`` cut at the recorded UTF-8 byte ``lengths``."""
    data = text.encode("utf-8", "surrogatepass")
    pieces: list[str] = []
    pos = shift = n = 0
    for byte in lengths:
        n |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            continue
        pieces.append(data[pos : pos + n].decode("utf-8", "surrogatepass"))
        pos, shift, n = pos + n, 0, 0
    return pieces


class RunBudget:
    """``max_tool_calls_per_run``: committed calls counted across the streams (turns) of one
    session. Shared by every :class:`Assembler` of a :class:`~assembler.pipeline.Pipeline`."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.committed = 0
        self.executed = 0

    def take(self) -> bool:
        """Count one more committed call; False (and nothing counted) when over the limit."""
        if self.limit is not None and self.committed >= self.limit:
            return False
        self.committed += 1
        return True

    def take_execution(self) -> bool:
        """Re-check at enqueue time: count one more executed call, False when over the limit."""
        if self.limit is not None and self.executed >= self.limit:
            return False
        self.executed += 1
        return True


@dataclass(slots=True)
class CallRecord:
    """Everything the assembler keeps about one call; only :meth:`view` leaves it before commit."""

    key: CallKey
    call_id: str | None
    name: str | None
    executor: Executor
    whole_arguments: str | None
    machine: CallStateMachine = field(default_factory=CallStateMachine)
    # Append-only UTF-8 buffer: amortized O(1) per fragment, decoded once at the latch,
    # about one byte of memory per argument byte. None once released.
    buffer: bytearray | None = field(default_factory=bytearray)
    # Byte length of each fragment, varint-encoded (one byte per fragment under 128 bytes),
    # so a diagnosis can name the fragment where the text broke.
    lengths: bytearray | None = field(default_factory=bytearray)
    diagnosis: dict[str, Any] | None = None
    bytes: int = 0
    fragments: int = 0
    reason: str | None = None
    arguments: Any = None
    transitions: list[Transition] = field(default_factory=list)
    last_activity: float = 0.0  # seconds since stream start: call start or last fragment
    repaired: bool = False  # dropped from history by drop_with_protocol_repair
    not_strict: str | None = None  # an event that carried its arguments was not strict JSON

    def view(self) -> CallView:
        return CallView(
            key=self.key,
            call_id=self.call_id,
            name=self.name,
            state=self.machine.state,
            reason=self.reason,
            bytes=self.bytes,
            fragments=self.fragments,
            executor=self.executor,
            transitions=tuple(self.transitions),
        )
