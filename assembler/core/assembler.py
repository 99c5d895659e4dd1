"""The provider-independent assembler: ops in, assembly events and verdicts out.

One :class:`Assembler` handles one response stream. It keeps, per call key, an
append-only list of fragments (joined once, at finalization) and a
:class:`~toollatch.core.state.CallStateMachine`. It never learns which provider a key
came from.

The completion latch (DESIGN.md): a call commits only when the stream ended normally
(:class:`~toollatch.core.model.StreamEnd`), ``call_id`` and ``name`` are present, the name is
registered (when a registry is given), the whole text is strict JSON, an object, and
passes the tool's schema. The stream's end and the latch's verdict on each call are in
:mod:`toollatch.core.stream_end`; a call's start and identity (tool_call_id, name, a
reused position) in :mod:`toollatch.core.identity`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from toollatch.core.config import DEFAULT_CONFIG, AssembleConfig
from toollatch.observe.metrics import Metrics
from toollatch.core.model import (
    ArgsFinal,
    ArgsFragment,
    ArgsNotStrict,
    BlockStop,
    CallIdentity,
    CallKey,
    CallsLeftOut,
    CallOutcome,
    CallStart,
    CallTruncated,
    Cancel,
    CommittedCall,
    Op,
    Quirk,
    Reason,
    StreamEnd,
    StreamEndKind,
    StreamError,
    StreamResult,
    StreamStart,
    StreamTruncated,
    Transition,
    OPEN,
    ARGS_COMPLETE,
    COMMITTED,
    TERMINAL_STATES,
)
from toollatch.core import identity, stream_end
from toollatch.core.calls import CallRecord, RunBudget, append_varint, owed_results
from toollatch.core.openorder import AwaitingCount
from toollatch.redaction.redact import AssemblyEvent, CallView, EventKind, assembly_event
from toollatch.core.registry import ToolRegistry
from toollatch.core.state import ARGS_DONE, FAIL, CallInput

#: Builds a :class:`Transition` from a tuple of its fields without its Python-level ``__new__``.
_transition = tuple.__new__

Clock = Callable[[], float]


class Assembler:
    """Assembles the tool calls of one stream.

    :meth:`apply` takes one op and returns the assembly events it caused, in order.
    ``clock`` returns seconds (monotonic); event times are relative to construction.
    Ops after the stream ended are ignored and counted as quirk ``op_after_stream_end``.
    """

    __slots__ = (
        "_alias", "_answered_ids", "_awaiting", "_calls", "_clock", "_committed_ids", "_end", "_end_detail",
        "_ended_at", "_holders", "_in_flight", "_left_out", "_progressed", "_quirks", "_reused", "_run_ids", "_seq",
        "_t0", "began", "budget", "config", "dialect", "emit_events", "ended", "metrics", "progress_events",
        "provider_message", "registry", "reveal", "stream_index",
    )

    def __init__(
        self,
        dialect: str,
        *,
        config: AssembleConfig | None = None,
        registry: ToolRegistry | None = None,
        clock: Clock = time.monotonic,
        stream_index: int = 0,
        reveal: bool = False,
        budget: RunBudget | None = None,
        metrics: Metrics | None = None,
        progress_events: bool = True,
        emit_events: bool = True,
        committed_ids: set[str] | None = None,
        answered_ids: set[str] | None = None,
        coalesce_progress: bool = False,
    ) -> None:
        self.dialect = dialect
        self.config = config or DEFAULT_CONFIG
        self.registry = registry
        self.stream_index = stream_index
        self.reveal = reveal
        self.budget = budget or RunBudget(self.config.max_tool_calls_per_run)
        self.metrics = metrics
        #: Emit a ``fragment`` event per appended fragment (the dashboard's byte bars);
        #: batch users such as ``toollatch assemble`` turn it off.
        self.progress_events = progress_events and emit_events
        #: Emit assembly events at all; batch users that only read :meth:`result` turn it off.
        self.emit_events = emit_events
        #: With ``coalesce_progress``, calls that took fragments since the last
        #: :meth:`take_progress` (first touched first); their ``fragment`` events wait for it.
        self._progressed: dict[CallKey, CallRecord] | None = {} if coalesce_progress and self.progress_events else None
        self._ended_at: float | None = None  # clock time of the normal end, for to_commit_seconds
        self._clock = clock
        self._t0 = clock()
        self._seq = 0
        self._calls: dict[CallKey, CallRecord] = {}
        self._in_flight = 0  # calls not yet in a terminal state
        # which of them opened before a given call (stream_end.latches_now): made at its first use
        self._awaiting: AwaitingCount | None = None
        # tool_call_ids of the client calls committed in this stream (they answer their id),
        # and in every stream of the input: ``committed_ids``, shared by a Pipeline's
        # streams (an id there never commits again)
        self._committed_ids: set[str] = set()
        self._run_ids = self._committed_ids if committed_ids is None else committed_ids
        # tool_call_ids that error results of the earlier streams of the input answer
        # (``answered_ids``, shared by a Pipeline's streams); this stream's join at its end
        self._answered_ids: set[str] = set() if answered_ids is None else answered_ids
        # how many client calls of the stream carry each tool_call_id (identity.hold)
        self._holders: dict[str, int] = {}
        # calls a reader left out: key -> (tool_call_id, client call?) (identity.left_out)
        self._left_out: dict[CallKey, tuple[str | None, bool]] | None = None
        # A provider key reused by a *different* call: later ops for it go to the new record.
        self._alias: dict[CallKey, CallKey] = {}
        self._reused: dict[CallKey, int] = {}  # provider key -> next suffix to try for a new call there
        self._end: StreamEndKind | None = None
        self._end_detail: str | None = None
        self._quirks: dict[str, int] = {}
        self.began = False
        #: True once the stream ended (any way): later ops are ignored.
        self.ended = False
        #: The free text of the provider error that ended the stream (untrusted: it may
        #: quote argument text); never in a reason or event unless ``reveal``.
        self.provider_message: str | None = None

    # ------------------------------------------------------------------ queries

    @property
    def end(self) -> StreamEndKind | None:
        return self._end

    def views(self) -> list[CallView]:
        """Redacted views of every call, in provider order."""
        return [c.view() for c in self._ordered()]

    def committed(self, key: CallKey) -> CommittedCall | None:
        """The committed call at ``key``, or None if it has not (yet) passed the latch."""
        call = self._calls.get(key)
        if call is None or call.machine.state is not COMMITTED:
            return None
        assert call.call_id is not None and call.name is not None
        return CommittedCall(call.key, call.call_id, call.name, call.arguments, call.executor)

    def outcome(self, key: CallKey) -> CallOutcome | None:
        """The current record of call ``key`` (arguments only once COMMITTED), or None if
        there is no such call: one call's :meth:`result` entry, without building them all."""
        call = self._calls.get(key)
        return call.outcome() if call is not None else None

    @property
    def quirks(self) -> dict[str, int]:
        """Quirks counted so far, by name (a copy): :meth:`result`'s, without the calls."""
        return dict(self._quirks)

    def result(self) -> StreamResult:
        """The stream's calls and the results owed: one error result per non-committed client call."""
        calls = list(map(CallRecord.outcome, self._ordered()))
        results = owed_results(calls, self._committed_ids)
        return StreamResult(self.dialect, self._end, self._end_detail, calls, results, dict(self._quirks))

    def check_idle(self) -> list[AssemblyEvent]:
        """Fail OPEN calls that received nothing for ``assemble_idle_timeout_s`` seconds.

        Call this periodically on live or paced streams; time comes from the clock given
        at construction, so tests can drive it.
        """
        out: list[AssemblyEvent] = []
        if self._end is not None:
            return out
        now, limit = self._now(), self.config.assemble_idle_timeout_s
        for call in self._ordered():
            if call.machine.state is OPEN and now - call.last_activity >= limit:
                self._fail(call, Reason.IDLE_TIMEOUT.with_detail(f"no fragment for {limit:g} s"), out)
        return out

    # ------------------------------------------------------------------ ops

    def apply(self, op: Op) -> list[AssemblyEvent]:
        """Apply one op; return the events it caused (possibly none).

        Raises :class:`TypeError` for anything that is not one of the op types of
        :mod:`toollatch.core.model` (:data:`~toollatch.core.model.Op`), before changing any state."""
        out: list[AssemblyEvent] = []
        kind = type(op)
        if kind is ArgsFragment and self.began and self._end is None:  # the hot path
            self._fragment(op, out)  # type: ignore[arg-type]
            return out
        if kind is Quirk:  # _quirk, inline: some gateways cause one per chunk
            name = op.name  # type: ignore[union-attr]
            seen = self._quirks.get(name, 0)
            self._quirks[name] = seen + op.count  # type: ignore[union-attr]
            if not seen and self.emit_events:
                self._emit(out, "quirk", detail=name)
            return out
        if kind is CallsLeftOut:  # no record and no state: counted ids only, until the end
            if self._end is None:
                identity.left_out(self, op, out)  # type: ignore[arg-type]
            return out
        if kind not in _HANDLERS and kind is not StreamStart:
            raise TypeError(f"Assembler.apply takes an op (toollatch.core.model.Op), not {kind.__qualname__}")
        if not self.began:
            self.began = True
            if self.emit_events:
                self._emit(out, "stream_start")
        if kind is StreamStart:
            return out
        if self._end is not None:
            if kind is not Cancel:
                self._quirk("op_after_stream_end", out)
            return out
        _HANDLERS[kind](self, op, out)
        return out

    def _not_strict(self, op: ArgsNotStrict, out: list[AssemblyEvent]) -> None:
        call = self._calls.get(self._alias.get(op.key, op.key))
        if call is not None and call.not_strict is None:
            call.not_strict = op.problem  # judged at the latch: invalid_json

    def _block_stop(self, op: BlockStop, out: list[AssemblyEvent]) -> None:
        call = self._calls.get(self._alias.get(op.key, op.key))
        if call is not None and call.machine.state is OPEN:
            self._move(call, ARGS_DONE, out)
            if call.executor == "client" and self.config.pipelined(call.name) and stream_end.latches_now(self, call):
                # Pipelined commit: the block stopped and its key accepts no more
                # fragments; only tools the configuration names may skip the stream end.
                stream_end.latch(self, call, out)

    def _call_truncated(self, op: CallTruncated, out: list[AssemblyEvent]) -> None:
        call = self._calls.get(self._alias.get(op.key, op.key))
        if call is not None and call.machine.state not in TERMINAL_STATES:
            call.diagnosis = call.cut_off("truncated")
            self._fail(call, Reason.STREAM_TRUNCATED.with_detail(op.detail), out)

    def _fragment(self, op: ArgsFragment, out: list[AssemblyEvent]) -> None:
        call = self._calls.get(self._alias.get(op.key, op.key) if self._alias else op.key)
        if call is None:
            self._quirk("fragment_before_call_start", out)
            identity.start(self, CallStart(op.key), out)
            call = self._calls[op.key]
        call.last_activity = self._clock() - self._t0
        if call.fragments == 0 and call.whole_arguments:
            call.bytes = 0  # streamed text replaces input that came whole with the start
        data = op.text.encode("utf-8", "surrogatepass")
        call.bytes += len(data)
        call.fragments += 1
        state = call.machine.state
        if state is OPEN and call.buffer is not None:
            if call.bytes > self.config.max_tool_argument_bytes:
                self._overflow(call, out)
            else:
                call.buffer += data
                n = len(data)
                if n < 0x80:
                    call.lengths.append(n)  # type: ignore[union-attr]
                else:
                    append_varint(call.lengths, n)  # type: ignore[arg-type]
                if self.progress_events:
                    self._progress(call, out)
        elif state is ARGS_COMPLETE:
            # The provider said the block was over; more text means we cannot trust either part.
            self._fail(call, Reason.STREAM_ERROR.with_detail("argument fragment after the block stopped"), out)
        else:
            # After our own limits failed the call, more text is expected, not a provider fault.
            own_limit = (call.reason or "").startswith(
                (Reason.ARGUMENTS_EXCEED_MAX_BYTES.value, Reason.TOO_MANY_TOOL_CALLS.value)
            )
            if not own_limit:
                self._quirk("fragment_after_call_ended", out)
            if self.progress_events:
                self._progress(call, out)

    def _final(self, op: ArgsFinal, out: list[AssemblyEvent]) -> None:
        """The provider's finalized text replaces the call's fragments (one buffer swap)."""
        call = self._calls.get(self._alias.get(op.key, op.key))
        if call is None:
            self._fragment(ArgsFragment(op.key, op.text), out)
            return
        state = call.machine.state
        if state is not OPEN or call.buffer is None:
            self._fragment(ArgsFragment(op.key, op.text), out)  # after the stop or the end of the call: as any fragment
            return
        data = op.text.encode("utf-8", "surrogatepass")
        call.last_activity = self._now()
        call.bytes = len(data)
        call.fragments += 1
        if call.bytes > self.config.max_tool_argument_bytes:
            self._overflow(call, out)
            return
        call.buffer = bytearray(data)
        call.lengths = bytearray()
        append_varint(call.lengths, len(data))
        if self.progress_events:
            self._progress(call, out)

    # ------------------------------------------------------------------ helpers

    def _overflow(self, call: CallRecord, out: list[AssemblyEvent]) -> None:
        if self.metrics is not None:
            self.metrics.call_overflow(self.dialect, call.name)
        call.repaired = self.config.on_args_overflow == "drop_with_protocol_repair"
        limit = self.config.max_tool_argument_bytes
        self._fail(call, Reason.ARGUMENTS_EXCEED_MAX_BYTES.with_detail(f"more than {limit} bytes"), out)

    def _fail(self, call: CallRecord, reason: str, out: list[AssemblyEvent]) -> None:
        call.reason = reason
        call.buffer = call.lengths = None  # release the buffer
        self._move(call, FAIL, out)

    def _move(self, call: CallRecord, event: CallInput, out: list[AssemblyEvent]) -> None:
        state = call.machine.apply(event)
        if state in TERMINAL_STATES:
            self._in_flight -= 1
            if self._awaiting is not None:
                self._awaiting.settle(call.order)
        call.transitions.append(_transition(Transition, (state, self._clock() - self._t0)))
        if self.emit_events:
            self._emit(out, "state", call)

    def _set_end(self, end: StreamEndKind, detail: str | None, out: list[AssemblyEvent]) -> None:
        stream_end.settle_ids(self)
        self._end, self._end_detail = end, detail
        self.ended = True
        self._left_out = None  # no latch is left to count them for
        if self.emit_events:
            self._emit(out, "stream_end", end=end, detail=detail)

    def _quirk(self, name: str, out: list[AssemblyEvent], count: int = 1) -> None:
        seen = self._quirks.get(name, 0)
        self._quirks[name] = seen + count
        if not seen and self.emit_events:
            self._emit(out, "quirk", detail=name)

    def take_progress(self) -> list[AssemblyEvent]:
        """With ``coalesce_progress``: one ``fragment`` event per call that took fragments
        since the last call and had no other event since (that event showed its counts
        already), in the order they were first touched; ``[]`` otherwise. A dashboard that
        shows progress a few times a second calls it after each batch of ops instead of
        receiving an event per fragment."""
        if not self._progressed:
            return []
        calls = list(self._progressed.values())
        self._progressed.clear()
        out: list[AssemblyEvent] = []
        for call in calls:
            self._emit(out, "fragment", call)
        return out

    def _progress(self, call: CallRecord, out: list[AssemblyEvent]) -> None:
        """``call`` took a fragment: its ``fragment`` event now, or at :meth:`take_progress`."""
        if self._progressed is None:
            self._emit(out, "fragment", call)
        else:
            self._progressed[call.key] = call

    def _ordered(self) -> list[CallRecord]:
        """Calls in ``finalize_order``: provider index (key order) or arrival."""
        calls = self._calls
        if len(calls) < 2 or self.config.finalize_order == "arrival":
            return list(calls.values())
        return [calls[k] for k in sorted(calls)]

    def _now(self) -> float:
        return self._clock() - self._t0

    def _emit(
        self,
        out: list[AssemblyEvent],
        kind: EventKind,
        call: CallRecord | None = None,
        *,
        end: StreamEndKind | None = None,
        detail: str | None = None,
    ) -> None:
        if not self.emit_events:
            return
        self._seq += 1
        if self._progressed and call is not None:
            self._progressed.pop(call.key, None)  # this event shows the counts
        view = call.view() if call is not None else None
        out.append(assembly_event(self._seq, self._now(), kind, self.stream_index, view, end, detail))


#: The handler of each op type once the stream has begun and not ended (see :meth:`Assembler.apply`).
_HANDLERS: dict[type, Callable[[Assembler, Any, list[AssemblyEvent]], None]] = {
    CallStart: identity.start,
    CallIdentity: identity.identity,
    ArgsFragment: Assembler._fragment,
    ArgsFinal: Assembler._final,
    ArgsNotStrict: Assembler._not_strict,
    BlockStop: Assembler._block_stop,
    CallTruncated: Assembler._call_truncated,
    StreamEnd: stream_end.finish_complete,
    StreamTruncated: stream_end.finish_truncated,
    StreamError: stream_end.finish_error,
    Cancel: stream_end.finish_cancelled,
}

