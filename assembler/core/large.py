"""One provider event too large to read in one go on a thread that must stay responsive.

An SSE event's payload can be megabytes of JSON: an OpenAI Chat chunk holding 100,000
``tool_calls`` entries is one ~10 MB event. ``json.loads`` of it is one C call that holds
the GIL for a quarter of a second, and its ops (two per call) are seconds of assembly and
hundreds of megabytes of call records. A reader that must keep its event loop responsive
(the dashboard) has its decoder leave such a payload unparsed
(``PushDecoder(defer_over=...)``: :data:`~toollatch.wire.capture.UNPARSED`) and reads it
here, in a worker thread:

- :func:`read_unparsed` parses the payload as the decoder would have: a payload this large
  with the standard library's pure-Python scanner (the same values and errors as
  ``json.loads``, its reference implementation, but as Python code, so the thread gives
  the GIL up every few milliseconds instead of holding it for the whole parse);
- :func:`read_large_event` turns the event into its ops with the input's own dialect
  adapter (or, for an input's first event, the adapter its payload tells), and
  :func:`cap_new_calls` keeps the ops of the first ``keep`` calls the event *opens*; the
  calls past them are left out, by key. Ops of calls the stream already has are always
  kept, so no call that is shown loses a fragment.

The library's own readers (``assemble``, :func:`toollatch.latch`) never defer: they read
every call. A reader that leaves calls out says so (the dashboard names how many in a
notice, as it does for a non-streaming body: :func:`toollatch.wire.retell.retell_capped`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Any
from toollatch.core.capcalls import TOLD_PER_OP, Capped, KnownKeys, cap_new_calls, key_ids
from toollatch.core.model import CallKey, Op
from toollatch.core.pipeline import ADAPTER_FAULTS, Pipeline
from toollatch.dialects import ADAPTERS, DialectAdapter, detect, make_adapter
from toollatch.redaction.redact import AssemblyEvent
from toollatch.wire.capture import FRAME_PAYLOAD, UNPARSED, ProviderEvent, _parse_payload, frame_event
from toollatch.wire.collector import collector_paused
from toollatch.wire.envelope import LARGE_PAYLOAD_CHARS
from toollatch.wire.jsonarray import ARRAY_ELEMENT, element_event  # the dashboard's decoders leave payloads over it for read_large_event

__all__ = ["CALLS_FOLLOWED", "LARGE_PAYLOAD_CHARS", "TOLD_PER_OP", "CappedPipeline", "LargeEvent", "cap_new_calls", "is_large", "read_large_event", "read_now", "read_unparsed", "reader"]


def read_unparsed(event: ProviderEvent, name: str) -> ProviderEvent:
    """``event`` (``data`` :data:`~toollatch.wire.capture.UNPARSED`, payload text in
    ``raw``) parsed: the event the decoder would have made had it parsed the payload
    itself, with the same value, or the same ``error`` when the payload is not JSON.
    ``name`` names the input in that error. A payload of this size is parsed by the
    pure-Python scanner (:func:`toollatch.wire.envelope.parse_envelope`), so a worker thread
    reading it gives the GIL up every few milliseconds. Any other event is returned as it is."""
    if event.data is not UNPARSED or event.raw is None:
        return event
    if event.event == ARRAY_ELEMENT:  # an element of a JSON array stream
        return element_event(_parse_payload(event.raw, None, name, event.line, event.offset))
    if event.event is not None and event.event.startswith(FRAME_PAYLOAD):  # an AWS event-stream frame's payload
        return frame_event(event.event[len(FRAME_PAYLOAD) :], event.raw, name, event.line, event.offset)
    return _parse_payload(event.raw, event.event, name, event.line, event.offset, event.framing)


@dataclass
class LargeEvent:
    """What :func:`read_large_event` read. ``ops`` is None when the event is for
    :meth:`~toollatch.core.pipeline.Pipeline.feed` as it is (``event``: parsed; an
    unreadable payload, or an event the pipeline's ``ops_of`` would not take); else the
    event's ops, of at most ``keep`` new calls, and ``capped`` what
    :func:`~toollatch.core.capcalls.cap_new_calls` left out. ``adopt``: the dialect and
    adapter the input's first event told, to hand to
    :meth:`~toollatch.core.pipeline.Pipeline.adopt` before the ops are applied."""

    event: ProviderEvent
    capped: Capped | None = None
    adopt: tuple[str, DialectAdapter] | None = None
    #: the input's adapter after this event (a copy of the one given, fed it): the read
    #: never changes the pipeline's own, so a read thrown away leaves no trace
    adapter: DialectAdapter | None = None

    @property
    def ops(self) -> list[Op] | None:
        return None if self.capped is None else self.capped.ops

    @property
    def left_out(self) -> set[CallKey]:
        """Keys of the calls left out (of the stream the ops end in)."""
        return set() if self.capped is None else self.capped.left_out


def read_large_event(
    event: ProviderEvent,
    state: tuple[str | None, DialectAdapter | None, tuple[ProviderEvent, ...] | None],
    known: Container[CallKey],
    keep: int,
    name: str,
    earlier: Container[CallKey] = frozenset(),
    began: bool = True,
    ended: bool = False,
) -> LargeEvent:
    """Read one deferred ``event`` of an input whose pipeline is in ``state``
    (:meth:`~toollatch.core.pipeline.Pipeline.adapter_state`, taken when the event was
    reached) into its ops, keeping the first ``keep`` calls it opens (:func:`cap_new_calls`
    against ``known``, ``earlier``, ``began`` and ``ended``). Meant for a worker thread while nothing else feeds that pipeline:
    it feeds the pipeline's adapter (or a new one, for the first event), never the pipeline
    itself (:meth:`~toollatch.core.pipeline.Pipeline.held_ops` on one made for it: framing
    notes and adapter faults as the pipeline makes them)."""
    with collector_paused():  # a million objects built and let go: walked in small steps, never all at once
        return _read(event, state, known, keep, name, earlier, began, ended)


def _read(
    event: ProviderEvent,
    state: tuple[str | None, DialectAdapter | None, tuple[ProviderEvent, ...] | None],
    known: Container[CallKey],
    keep: int,
    name: str,
    earlier: Container[CallKey],
    began: bool,
    ended: bool,
) -> LargeEvent:
    parsed = read_unparsed(event, name)
    if parsed.error is not None or parsed.data is None:
        return LargeEvent(parsed)
    dialect, adapter, held = state
    adopt = None
    if adapter is None:  # the input's first events: this one may tell the dialect
        dialect = detect(parsed) if held is not None else None
        if dialect not in ADAPTERS:
            return LargeEvent(parsed)  # held by the pipeline as it is (no adapter reads it yet)
        adapter, ops = Pipeline(name=name).held_ops(dialect, [*(held or ()), parsed])  # type: ignore[arg-type]
        adopt = (dialect, adapter)
    else:  # a copy: a read thrown away leaves the input's adapter as it was
        adapter, ops = Pipeline(name=name).held_ops(dialect, [parsed], copy.deepcopy(adapter))  # type: ignore[arg-type]
    capped = cap_new_calls(ops, known, keep, earlier, began, ended)
    return LargeEvent(parsed._replace(data=None), capped, adopt, adapter if adopt is None else None)


def _current(pipeline: Pipeline) -> tuple[Any, bool, bool]:
    """``(stream, began, ended)`` of ``pipeline``'s current stream (None, False, False: none yet)."""
    stream = pipeline._streams[-1] if pipeline._streams else None
    return (stream, stream.began, stream.ended) if stream is not None else (None, False, False)


def read_now(pipeline: Pipeline, event: ProviderEvent, keep: int, earlier: Container[CallKey] = frozenset()) -> LargeEvent:
    """:func:`read_large_event` of ``event`` for ``pipeline`` in its present state, on the
    calling thread (an adapter to adopt is left to the caller:
    :meth:`CappedPipeline.take`)."""
    stream, began, ended = _current(pipeline)
    return read_large_event(event, pipeline.adapter_state(), key_ids(stream), keep, pipeline.name, earlier, began, ended)


def reader(pipeline: CappedPipeline, event: ProviderEvent) -> Callable[[], LargeEvent]:
    """:func:`read_large_event` of ``event`` for ``pipeline`` as it stands now (its state,
    known calls, room and calls left out taken at once), to run later in a worker thread
    while nothing feeds ``pipeline``; apply the answer with :meth:`CappedPipeline.take`."""
    stream, began, ended = _current(pipeline)
    args = (event, pipeline.adapter_state(), key_ids(stream), pipeline.room(), pipeline.name, frozenset(pipeline.earlier()), began, ended)
    return lambda: read_large_event(*args)


#: Calls of one input (a session) the dashboard follows one by one: the first ones (~1,000 cards).
CALLS_FOLLOWED = 1000


def is_large(event: ProviderEvent) -> bool:
    """``event``'s payload is over :data:`LARGE_PAYLOAD_CHARS` characters (or left unparsed)."""
    return event.data is UNPARSED or (event.raw is not None and len(event.raw) > LARGE_PAYLOAD_CHARS)


class CappedPipeline(Pipeline):
    """A :class:`~toollatch.core.pipeline.Pipeline` that follows the first ``keep`` calls
    of its input: the ops of the calls opened past them are left out (whether they come in
    one event of 100,000 calls, in 100,000 events or in 1,000 streams), the calls counted in
    :attr:`untold`, and their later ops dropped too (keys are a stream's own: a later
    stream may use them again). A large event (:func:`is_large`) is read
    through :func:`read_large_event` (the same ops, capped alike). The dashboard assembles a
    stream so, and every pass it makes again over the same bytes (timing, triage, dry runs)
    too, so they all tell the same calls. Other arguments as the pipeline's."""

    __slots__ = ("_before", "_counted", "_left_in", "_next_left", "_untold", "keep", "left_out")

    def __init__(self, *args: Any, keep: int = CALLS_FOLLOWED, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keep = keep
        #: keys of the current stream's calls left out (their later ops are dropped)
        self.left_out: set[CallKey] = set()
        self._left_in: object = None  # the stream those keys belong to
        self._next_left: set[CallKey] | None = None  # those of the stream the ops applied next begin
        self._before = 0  # calls of the streams before that one
        self._counted = 0  # streams whose calls _before counts
        self._untold = 0  # calls left out, every stream

    @property
    def untold(self) -> int:
        """How many calls were left out (every stream of the input)."""
        return self._untold

    def room(self) -> int:
        """New calls the input may still open (in its current stream)."""
        self.earlier()  # counts the calls of the streams before the current one
        return self._room()

    def _room(self) -> int:
        """:meth:`room`, the streams before the current one counted (:meth:`earlier` called)."""
        streams = self._streams
        return self.keep - self._before - (len(streams[-1]._calls) if streams else 0)

    def feed(self, event: ProviderEvent) -> list[AssemblyEvent]:
        if is_large(event):
            return self.take(read_now(self, event, self.room(), self.earlier()))
        ops = self.ops_of(event)
        if ops is None:
            return super().feed(event)
        return self.apply_ops(ops)

    def take(self, read: LargeEvent) -> list[AssemblyEvent]:
        """Apply an event read by :func:`read_large_event` (its adapter adopted first)."""
        if read.adopt is not None:
            self.adopt(*read.adopt)
        elif read.adapter is not None and self._adapter is not None:
            self._adapter = read.adapter  # the copy the read fed
        if read.capped is None:
            return super().feed(read.event)
        self._leave_out(read.capped)
        return self.apply_ops(read.capped.ops)

    def ops_of(self, event: ProviderEvent) -> list[Op] | None:
        """The pipeline's ops of ``event``, without those of the calls left out."""
        hot = self._hot
        if hot is None or event.error is not None or event.data is None or event.framing:
            return self._capped(super().ops_of(event))
        # the common event (Pipeline.ops_of's own path, inline): a plain event of a stream
        # under way, no call left out of it and room for any call its ops open (one at most each)
        try:
            ops = self._adapter.feed(event)  # type: ignore[union-attr]
        except ADAPTER_FAULTS as exc:
            ops = [self._uninterpretable(event, exc)]
        if self._left_in is hot and not self.left_out and len(ops) <= self.keep - self._before - len(hot._calls):
            return ops
        return self._capped(ops)

    def _held_ops(self) -> list[Op]:
        """The held events' ops (those before and of the event that told the dialect), capped alike."""
        return self._capped(super()._held_ops()) or []

    def _capped(self, ops: list[Op] | None) -> list[Op] | None:
        if not ops or (not self.earlier() and len(ops) <= self._room()):  # each op opens one call at most
            return ops
        stream, began, ended = _current(self)
        capped = cap_new_calls(ops, KnownKeys(stream) if stream is not None else (), self.room(), self.earlier(), began, ended)
        self._leave_out(capped)
        return capped.ops

    def close(self) -> list[AssemblyEvent]:
        out = super().close()
        self._forget()
        return out

    def cancel(self, detail: str = "user stop") -> list[AssemblyEvent]:
        out = super().cancel(detail)
        self._forget()
        return out

    def _forget(self) -> None:
        """Input over: what followed the calls left out goes (the adapter knew every one of
        them), freed by reference counting, so no later collection has to walk it."""
        if self._untold:
            self.left_out = set()
            if self._adapter is not None:
                self._adapter = make_adapter(self._dialect) if self._dialect in ADAPTERS else None  # type: ignore[arg-type]

    def earlier(self) -> set[CallKey]:
        """The calls left out of the current stream (none once another stream began)."""
        current = self._streams[-1] if self._streams else None
        if self._left_in is not current:
            self.left_out, self._left_in = self._next_left or set(), current
            self._next_left = None
            ended = len(self._streams) - 1  # streams before the current one: they open no more calls
            self._before += sum(len(stream._calls) for stream in self._streams[self._counted : ended])
            self._counted = max(self._counted, ended)
        return self.left_out

    def _leave_out(self, capped: Capped) -> None:
        """Count the calls ``capped`` left out; its keys join those of the current stream,
        or of the stream its ops begin (the first, or another after a stream start)."""
        self._untold += capped.untold
        if capped.new_stream or not self._streams:
            self._next_left = capped.left_out
        elif capped.left_out:
            self.earlier().update(capped.left_out)
