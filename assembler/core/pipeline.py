"""Provider events → dialect adapter → ops → one assembler per stream.

:class:`Pipeline` is what the CLI and the dashboard drive: feed it provider events one at
a time, then :meth:`Pipeline.close` at end of input (or :meth:`Pipeline.cancel` on a user
stop). The dialect is detected from the first events unless given.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from toollatch.core.assembler import Assembler, Clock
from toollatch.core.calls import RunBudget
from toollatch.wire.capture import CaptureError, ProviderEvent
from toollatch.core.config import DEFAULT_CONFIG, AssembleConfig
from toollatch.dialects import ADAPTERS, DialectAdapter, detect, make_adapter
from toollatch.observe.metrics import Metrics
from toollatch.core.model import CallKey, Cancel, CommittedCall, Op, Quirk, StreamError, StreamResult, StreamStart, StreamTruncated
from toollatch.redaction.redact import AssemblyEvent
from toollatch.core.registry import ToolRegistry

#: Events read without learning the dialect before giving up.
DETECTION_WINDOW = 64

#: What a dialect adapter may raise on an event of a shape it does not expect (RecursionError:
#: a value nested deeper than a recursive step can go): the stream fails at a named place.
ADAPTER_FAULTS = (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError)


def framing_ops(framing: tuple[str, ...]) -> list[Op]:
    """The :class:`~toollatch.core.model.Quirk` ops of an event's framing notes: one per
    entry, except that a leading run of ``comment_line`` entries (one per SSE comment line:
    :func:`toollatch.wire.capture.sse_framing` puts them first) becomes one op counting
    them, found with two C-level scans: an event after millions of keep-alive comments costs
    a few milliseconds, not an op per comment."""
    repeated = framing.count("comment_line") if len(framing) > 2 else 0
    if repeated > 1 and "comment_line" not in framing[repeated:]:  # every one in the leading run
        return [Quirk("comment_line", repeated), *(Quirk(name) for name in framing[repeated:])]
    return [Quirk(name) for name in framing]


class Pipeline:
    """Assembles every stream of one input.

    ``progress_events=False`` skips the per-fragment ``fragment`` events (the dashboard's
    byte bars); ``coalesce_progress=True`` holds them back until :meth:`take_progress`, which
    gives one per call that took fragments meanwhile; ``emit_events=False`` skips assembly
    events altogether, for batch users such as ``toollatch assemble`` that only read :meth:`results`.

    Raises :class:`~toollatch.wire.capture.CaptureError` (from :meth:`feed` or :meth:`close`)
    when the dialect cannot be recognised or is not supported; the message names the input.
    """

    __slots__ = (
        "_adapter", "_answered_ids", "_clock", "_closed", "_committed_ids", "_dialect", "_hot", "_pending", "_streams",
        "budget", "coalesce_progress", "config", "emit_events", "metrics", "name", "progress_events", "registry",
        "reveal",
    )

    def __init__(
        self,
        dialect: str | None = None,
        *,
        config: AssembleConfig | None = None,
        registry: ToolRegistry | None = None,
        clock: Clock = time.monotonic,
        reveal: bool = False,
        name: str = "<input>",
        metrics: Metrics | None = None,
        budget: RunBudget | None = None,
        progress_events: bool = True,
        emit_events: bool = True,
        coalesce_progress: bool = False,
    ) -> None:
        self.config = config or DEFAULT_CONFIG
        self.registry = registry
        self.metrics = metrics
        self.progress_events = progress_events
        self.emit_events = emit_events
        self.coalesce_progress = coalesce_progress
        #: ``max_tool_calls_per_run`` counts across every stream (turn) of this input;
        #: pass one budget to several pipelines to count across a longer session.
        self.budget = budget or RunBudget(self.config.max_tool_calls_per_run)
        self.reveal = reveal
        self.name = name
        self._clock = clock
        self._adapter: DialectAdapter | None = None
        self._dialect: str | None = None
        self._pending: list[ProviderEvent] = []
        self._streams: list[Assembler] = []
        # tool_call_ids committed in any stream of this input: a message restarted in the
        # same input cannot commit (and run) one id a second time
        self._committed_ids: set[str] = set()
        self._answered_ids: set[str] = set()  # tool_call_ids the error results of ended streams answer
        self._closed = False
        #: the current stream while the dialect is known and input is open: feed's hot path
        self._hot: Assembler | None = None
        if dialect is not None:
            self._use(dialect)

    @property
    def dialect(self) -> str | None:
        return self._dialect

    @property
    def ended(self) -> bool:
        """True once closed or cancelled: further events are ignored."""
        return self._closed

    @property
    def streams(self) -> list[Assembler]:
        return list(self._streams)

    @property
    def committed_ids(self) -> frozenset[str]:
        """The tool_call_ids of the client calls committed in any stream of this input;
        each commits at most once across the streams."""
        return frozenset(self._committed_ids)

    def feed(self, event: ProviderEvent) -> list[AssemblyEvent]:
        """Apply one provider event; return the assembly events it caused."""
        stream = self._hot
        if stream is not None and event.error is None and not event.framing:
            # the hot path: a plain event of a known dialect, in a stream already begun
            try:
                ops = self._adapter.feed(event)  # type: ignore[union-attr]
            except ADAPTER_FAULTS as exc:
                return self._apply_all([self._uninterpretable(event, exc)])
            if not ops:  # text, keep-alives...: nothing for the assembler
                return []
            if len(ops) == 1 and type(ops[0]) is not StreamStart:
                return stream.apply(ops[0])
            return self._apply_all(ops)
        if self._closed:
            return []
        if self._adapter is None:
            if event.error is not None:
                # A payload that cannot be read (a gateway's keep-alive comment wrapped as
                # ``data:``): held until the dialect is known, then the stream ends in error
                # there, so the input still gets its verdicts.
                self._pending.append(event)
                if len(self._pending) >= DETECTION_WINDOW:
                    raise CaptureError(self._first_error() or f"{self.name}: no known provider stream in the first {DETECTION_WINDOW} events")
                return []
            if event.data is None and event.framing:  # cut before any event told the dialect
                raise CaptureError(f"{self.name}:{event.line} (byte {event.offset}): the input ends inside this event, before any provider stream was recognised")
            found = detect(event)
            if found is not None and not self._pending and not event.framing:
                # the first event tells the dialect, nothing held before it: read as any later one
                self._use(found)
                return Pipeline.feed(self, event)  # this method's own hot path, whatever a subclass does
            self._pending.append(event)
            if found is None:
                if len(self._pending) >= DETECTION_WINDOW:
                    raise CaptureError(f"{self.name}: no known provider stream in the first {DETECTION_WINDOW} events")
                return []
            self._use(found)
            return self._apply_all(self._held_ops())
        return self._feed_known(event)

    def _held_ops(self) -> list[Op]:
        """The ops of the events held until one told the dialect (now in use), in order."""
        pending, self._pending = self._pending, []
        ops: list[Op] = []
        unreadable: int | None = None  # where the first unreadable event's ops begin
        for ev in pending:
            if ev.error is not None and unreadable is None:
                unreadable = len(ops)
            ops += self._ops(ev)
        if unreadable is not None:
            start = next((i for i, op in enumerate(ops) if type(op) is StreamStart), None)
            if start is not None and start > unreadable:
                # An unreadable event before the stream's start event (``message_start``...)
                # fails that stream, in every dialect, not an empty one before it.
                ops.insert(unreadable, ops.pop(start))
        return ops

    def ops_of(self, event: ProviderEvent) -> list[Op] | None:
        """The ops a plain ``event`` of the known dialect means, in a stream already begun,
        to be applied with :meth:`apply_ops` (in order, in as many parts as the caller likes:
        :meth:`feed` of the event is the same as applying them all at once). None for any
        other event (dialect not yet known, unreadable, framing, input closed): give it to
        :meth:`feed`. The first event that tells the dialect is taken here too (the dialect
        is then set). Lets a caller that must not hold its thread for long split an event
        of many calls."""
        if event.error is not None or event.data is None:
            return None
        if self._hot is None:  # the first event, telling the dialect (else: feed's own path)
            if self._adapter is not None or self._pending or self._closed or (found := detect(event)) not in ADAPTERS:
                return None
            self._use(found)
            return self._ops(event)
        if event.framing:
            return self._ops(event)
        try:
            return self._adapter.feed(event)  # type: ignore[union-attr]
        except ADAPTER_FAULTS as exc:
            return [self._uninterpretable(event, exc)]

    def adapter_state(self) -> tuple[str | None, DialectAdapter | None, tuple[ProviderEvent, ...] | None]:
        """``(dialect, adapter, held)`` for reading one event's ops elsewhere (a worker
        thread: :func:`toollatch.core.large.read_large_event`): the dialect and adapter in
        use, None for both before the dialect is known; ``held``: the events held until
        one tells the dialect (None once input is closed)."""
        return self._dialect, self._adapter, None if self._closed else tuple(self._pending)

    def held_ops(self, dialect: str, held: list[ProviderEvent], adapter: DialectAdapter | None = None) -> tuple[DialectAdapter, list[Op]]:
        """The adapter of ``dialect`` (``adapter``, or a new one) after the events ``held``,
        and their ops, as :meth:`feed` makes them (framing notes, adapter faults, an
        unreadable event before the stream's start), on a pipeline made for it (a worker
        thread's: :func:`toollatch.core.large.read_large_event`)."""
        self._pending = list(held)
        self._use(dialect)
        if adapter is not None:
            self._adapter = adapter
        assert self._adapter is not None
        return self._adapter, self._held_ops()

    def adopt(self, dialect: str, adapter: DialectAdapter) -> None:
        """Use ``adapter`` of ``dialect``: one made and fed the events held so far and the one
        that told the dialect elsewhere (:meth:`held_ops`); their ops are then applied with
        :meth:`apply_ops`."""
        if self._adapter is None:
            self._use(dialect)
            self._adapter = adapter
            self._pending = []

    def apply_ops(self, ops: list[Op]) -> list[AssemblyEvent]:
        """Apply ops from :meth:`ops_of`, in order; return the assembly events they caused."""
        return self._apply_all(ops) if ops else []

    def close(self) -> list[AssemblyEvent]:
        """End of input: a stream that did not end normally becomes truncated."""
        if self._closed:
            return []
        if self._adapter is None:
            raise CaptureError(self._first_error() or f"{self.name}: no known provider stream found")
        current = self._streams[-1] if self._streams else self._current()
        out: list[AssemblyEvent] = []
        if not current.ended:  # an adapter's own end-of-input verdict, unless the stream already ended
            out = self._apply_all(self._adapter.close())
        for stream in self._streams:
            if not stream.ended:
                out.extend(self._end_every_stream(StreamTruncated("input ended")))
                break
        self._closed, self._hot = True, None
        return out

    def cancel(self, detail: str = "user stop") -> list[AssemblyEvent]:
        """User stop: the open calls of every stream not yet ended become CANCELLED."""
        if self._closed:
            return []
        self._closed, self._hot = True, None
        if self._adapter is None and not self._streams:
            return []
        return self._end_every_stream(Cancel(detail))  # a known dialect always has a stream

    def check_idle(self) -> list[AssemblyEvent]:
        """Apply the idle timeout to the current stream (see :meth:`Assembler.check_idle`)."""
        if self._closed or not self._streams:
            return []
        return self._streams[-1].check_idle()

    def take_progress(self) -> list[AssemblyEvent]:
        """With ``coalesce_progress``: the ``fragment`` events held back since the last call,
        one per call that took fragments and had no other event since, stream by stream
        (:meth:`Assembler.take_progress`); ``[]`` otherwise."""
        if not self.coalesce_progress:
            return []
        out: list[AssemblyEvent] = []
        for stream in self._streams:
            out += stream.take_progress()
        return out

    def results(self) -> list[StreamResult]:
        """Each stream's :class:`~toollatch.core.model.StreamResult`, in input order."""
        return list(map(Assembler.result, self._streams))

    def committed(self, stream: int, key: CallKey) -> CommittedCall | None:
        """The committed call ``key`` of stream ``stream``, or None before/without commit."""
        if 0 <= stream < len(self._streams):
            return self._streams[stream].committed(key)
        return None

    # ------------------------------------------------------------------ internals

    def _first_error(self) -> str | None:
        """The fault of the first unreadable event held before any dialect was recognised."""
        return next((ev.error for ev in self._pending if ev.error is not None), None)

    def _use(self, dialect: str) -> None:
        if dialect not in ADAPTERS:
            raise CaptureError(f"{self.name}: {dialect} stream recognised, but that dialect is not supported")
        self._adapter = make_adapter(dialect)
        self._dialect = dialect
        if not self._streams:
            self._new_stream()  # so that the next event takes the hot path

    def _feed_known(self, event: ProviderEvent) -> list[AssemblyEvent]:
        return self._apply_all(self._ops(event))

    def _ops(self, event: ProviderEvent) -> list[Op]:
        """The ops ``event`` means: its framing quirks, then the adapter's ops (or the
        stream error of an unreadable or uninterpretable event)."""
        assert self._adapter is not None
        framing: list[Op] = framing_ops(event.framing) if event.framing else []
        if event.error is not None:
            return [*framing, StreamError(event.error)]
        if event.data is None:  # a framing note only (truncated_frame): nothing for the adapter
            return framing
        try:
            ops = self._adapter.feed(event)
        except ADAPTER_FAULTS as exc:
            ops = [self._uninterpretable(event, exc)]
        return framing + ops if framing else ops

    def _uninterpretable(self, event: ProviderEvent, exc: Exception) -> StreamError:
        # A provider event of a shape the adapter does not expect (or a value nested too
        # deep to re-encode): fail the stream at a named place instead of crashing. The exception text is not shown: it could
        # quote event content.
        where = f"{self.name}:{event.line} (byte {event.offset})"
        why = "nested too deep" if isinstance(exc, RecursionError) else type(exc).__name__
        return StreamError(f"{where}: cannot interpret {self._dialect} event ({why})")

    def _apply_all(self, ops: list[Op]) -> list[AssemblyEvent]:
        streams = self._streams
        if len(ops) == 1 and type(ops[0]) is not StreamStart and streams:  # most events make one op
            return streams[-1].apply(ops[0])
        out: list[AssemblyEvent] = []
        for op in ops:
            if type(op) is not StreamStart and streams:  # the common op: to the current stream
                out += streams[-1].apply(op)
                continue
            if type(op) is StreamStart and streams and streams[-1].began:
                previous = streams[-1]
                if not previous.ended:
                    # A stream begun without its own start event (a call before
                    # message_start, an item before response.created): the adapter saw no
                    # start, so it sent no truncation; the stream still ends, every call
                    # in it gets its verdict.
                    out += previous.apply(StreamTruncated("a new stream started before this one ended"))
                self._new_stream()
            current = self._streams[-1] if self._streams else self._current()
            out += current.apply(op)
        return out

    def _end_every_stream(self, op: StreamTruncated | Cancel) -> list[AssemblyEvent]:
        """Apply ``op`` to every stream that has not ended, oldest first: no call is left
        without a verdict, whichever stream it arrived in."""
        out: list[AssemblyEvent] = []
        for stream in self._streams:
            if not stream.ended:
                out += stream.apply(op)
        return out

    def _current(self) -> Assembler:
        if not self._streams:
            self._new_stream()
        return self._streams[-1]

    def _new_stream(self) -> None:
        assert self._dialect is not None
        stream = Assembler(
            self._dialect,
            config=self.config,
            registry=self.registry,
            clock=self._clock,
            stream_index=len(self._streams),
            reveal=self.reveal,
            budget=self.budget,
            metrics=self.metrics,
            progress_events=self.progress_events,
            emit_events=self.emit_events,
            committed_ids=self._committed_ids,
            answered_ids=self._answered_ids,
            coalesce_progress=self.coalesce_progress,
        )
        self._streams.append(stream)
        if not self._closed:
            self._hot = stream


def assemble_events(events: Iterable[ProviderEvent], **kwargs: object) -> list[StreamResult]:
    """Convenience: run ``events`` through a :class:`Pipeline` and return its results."""
    pipeline = Pipeline(**kwargs)  # type: ignore[arg-type]
    for event in events:
        pipeline.feed(event)
    pipeline.close()
    return pipeline.results()
