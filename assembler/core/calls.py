"""One call's assembly record, and the run budget shared by the streams of a run.

The record holds the call's append-only UTF-8 buffer (amortized O(1) per fragment,
decoded once at the latch) and the varint-encoded byte length of each fragment, so a
diagnosis can name the fragment where the text broke without keeping the fragments.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toollatch.core.jsonprefix import diagnose
from toollatch.core.model import COMMITTED, TERMINAL_STATES, CallKey, CallOutcome, Executor, ToolResult, Transition
from toollatch.redaction.redact import CallView, call_view
from toollatch.core.state import CallStateMachine


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
    session. Shared by every :class:`Assembler` of a :class:`~toollatch.core.pipeline.Pipeline`."""

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


@dataclass(slots=True, init=False)
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
    repaired: bool = False  # dropped from history (drop_with_protocol_repair, or a repeated tool_call_id)
    not_strict: str | None = None  # an event that carried its arguments was not strict JSON
    not_unicode: tuple[str, ...] = ()  # call_id / name held a lone surrogate (kept escaped)
    item: str | None = None  # the provider's kind of call (CallStart.item)
    order: int = 0  # calls opened before it in its stream (its slot in openorder.AwaitingCount)

    def __init__(
        self, key: CallKey, call_id: str | None, name: str | None, executor: Executor, whole_arguments: str | None
    ) -> None:
        # written out: the generated one calls a factory per default container (one record per call)
        self.key, self.call_id, self.name, self.executor, self.whole_arguments = key, call_id, name, executor, whole_arguments
        self.machine = CallStateMachine()
        self.buffer, self.lengths = bytearray(), bytearray()
        self.diagnosis = self.reason = self.arguments = self.not_strict = self.item = None
        self.bytes = self.fragments = self.order = 0
        self.transitions = []
        self.last_activity = 0.0
        self.repaired = False
        self.not_unicode = ()

    def view(self) -> CallView:
        # positional, in CallView's field order (made per progress event on the dashboard)
        return call_view(
            self.key,
            self.call_id,
            self.name,
            self.machine.state,
            self.reason,
            self.bytes,
            self.fragments,
            self.executor,
            tuple(self.transitions),
        )

    def outcome(self) -> CallOutcome:
        """The call's final record; ``arguments`` only when COMMITTED."""
        state = self.machine.state
        # positional, in CallOutcome's field order (keywords cost three times as much)
        return CallOutcome(
            self.key,
            self.call_id,
            self.name,
            state,
            self.reason,
            self.bytes,
            self.fragments,
            self.executor,
            self.arguments if state is COMMITTED else None,  # arguments
            list(self.transitions),  # transitions
            self.repaired,
            self.diagnosis,
            self.item,
        )

    def invalid_json_diagnosis(self, text: str, reason: str) -> dict[str, Any] | None:
        """Where the joined ``text`` stopped being JSON: the fragment, byte and expected token
        (see :func:`~toollatch.core.jsonprefix.diagnose`); for text whose grammar holds but which
        strictness refused (duplicate key, non-finite number...), ``{"kind": "semantic"}``
        with the problem named by ``reason``."""
        if self.fragments and self.lengths is not None:
            found = diagnose(split_fragments(text, self.lengths))
        elif not self.fragments:
            found = diagnose([text])
        else:
            return self.diagnosis
        if found is not None and found["kind"] == "complete":
            return {"kind": "semantic", "problem": reason.partition(": ")[2] or "not strict JSON"}
        return found

    def cut_off(self, end: str) -> dict[str, Any]:
        """Where the call's text stood when the stream ended ``end``: bytes, and the prefix state."""
        where: dict[str, Any] = {"kind": "cut_off", "stream_end": end, "bytes": self.bytes, "fragments": self.fragments}
        if self.buffer is not None and self.lengths is not None and self.fragments:
            where["text"] = diagnose(split_fragments(self.buffer.decode("utf-8", "surrogatepass"), self.lengths))
        return where


def owed_results(calls: list[CallOutcome], committed_ids: set[str]) -> list[ToolResult]:
    """One error result per tool_call_id of a client call that ended without committing and
    was not dropped by a protocol repair; an id a committed call holds is answered by its
    execution, and an id several records carried is answered once."""
    results: list[ToolResult] = []
    answered = set(committed_ids)
    for c in calls:
        if c.executor != "client" or c.state is COMMITTED or c.state not in TERMINAL_STATES or c.repaired:
            continue
        if c.call_id is not None and c.call_id in answered:
            continue
        if c.call_id is not None:
            answered.add(c.call_id)
        results.append(ToolResult(c.call_id, True, c.reason or c.state.value))
    return results


def keep_one_record_per_id(records: Iterable[CallRecord], *, by_key: bool) -> None:
    """The finalized message holds each tool_call_id once, with one result.

    Where several client calls (``records``, in arrival order) carried one id, the record
    kept is the committed one if any, else the first in finalize order (the lowest key
    when ``by_key``, else the first to arrive); every other record becomes a protocol
    repair (``repaired``: dropped from the finalized message, owing no result). The id is
    answered once: by the committed call's execution, or by the kept record's error
    result. O(n): one dict lookup per record.
    """
    kept: dict[str, CallRecord] = {}
    for call in records:
        if call.executor != "client" or call.call_id is None or call.repaired:
            continue
        first = kept.get(call.call_id)
        if first is None:
            kept[call.call_id] = call
            continue
        committed, first_committed = call.machine.state is COMMITTED, first.machine.state is COMMITTED
        if (committed and not first_committed) or (committed == first_committed and by_key and call.key < first.key):
            first.repaired, kept[call.call_id] = True, call
        else:
            call.repaired = True
