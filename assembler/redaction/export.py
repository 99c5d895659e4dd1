"""Redacted reproducers: the same stream, with every secret-bearing string replaced.

:func:`redact_capture` rewrites a capture event by event. The event structure, the event
types, the order, ids and tool names stay; so do the *argument fragments' boundaries and
UTF-8 byte lengths*: inside argument text every string value is replaced by ``x``
characters of the same byte length, whether the text arrives as a string or as a JSON
value (:mod:`.masker` lists every place). A committed call keeps its object keys, numbers
and literals (the text stays exactly as valid as it was), and the string values its own
tool's schema publishes (``enum`` members, ``const``: :mod:`.published`; the reader of a
reproducer has the tools file); a call that did not commit keeps
none of them: every scalar of its text is masked, keeping token classes and where it
breaks (:mod:`.scalarmask`). Which calls committed is found by assembling the capture first
(with the caller's tools and settings) or given by the caller. A provider error's free
text (its ``message``) is masked; its type and code stay. Text deltas (assistant text,
reasoning, signatures) become ``x`` runs of the same byte length. A re-import therefore
gives the same verdicts, ``bytes`` and ``fragments`` per call. HTTP heads (``curl -i``) and
comment lines are dropped; an event whose ``data`` is not JSON is written as
:data:`UNREADABLE`, still not JSON, so the re-import fails the stream at the same event. SSE input is written back as SSE; JSON Lines and binary event
streams as JSON Lines.

A stream no dialect adapter reads (no event of a known dialect, or none of the dialect
given) has no known places, and no call of it committed: every scalar of every event is
masked (object keys, numbers and literals too; the shape and byte lengths stay).

:func:`stray_argument_text` tells whether an input holds argument text that no call took
before its stream's end (a call after ``[DONE]``, a ``.done`` text that differs, a place no
adapter reads): such an input is never "argument text of committed calls only".

Limits: a committed string a tool's schema constrains otherwise (``pattern``, ``format``,
``minLength`` with multi-byte characters...) is masked, and its placeholder may be judged
differently (a Gemini ``partialArgs`` string is kept when its joined pieces are one of
them: :class:`~.published.StringPieces`); a schema check of a failed call's masked keys differs; such verdicts can differ after redaction. An event
whose text repeats an object key loses the repetition (events are written back from
their parsed value).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from toollatch.wire.capture import DONE, CaptureError, ProviderEvent, iter_capture
from toollatch.dialects import ADAPTERS, detect, make_adapter
from toollatch.redaction.masker import DialectMasker
from toollatch.core.model import CallKey, CallState, Op, StreamError, StreamResult
from toollatch.core.pipeline import ADAPTER_FAULTS, Pipeline
from toollatch.redaction.published import kept_pieces
from toollatch.core.config import AssembleConfig
from toollatch.core.registry import ToolRegistry
from toollatch.redaction.redactor import mask_arguments, mask_json_text, mask_value, placeholder
from toollatch.redaction.scalarmask import CallRef, MaskPlan, assembler_key, mask_scalars_value
from toollatch.redaction.written import UNREADABLE, is_binary, written

Json = Any

#: Where :func:`stray_argument_text` reports a stream that no dialect adapter reads.
UNREAD_STREAM = "no dialect adapter reads this stream: every key and value is masked"


def redact_events(events: Iterable[ProviderEvent], dialect: str | None = None) -> list[ProviderEvent]:
    """Masked copies of ``events`` (an unreadable event with ``error`` :data:`UNREADABLE`); ``dialect``: the
    dialect to read them as (detected from the events when None)."""
    events = list(events)
    redactor = EventRedactor(dialect, plan=mask_plan(events, dialect))
    out = [masked for event in events for masked in redactor.feed(event)]
    return out + redactor.finish()[0]


Committed = set[tuple[int, CallKey]]


def committed_calls(results: Iterable[StreamResult]) -> Committed:
    """``(stream index, key)`` of every COMMITTED call of ``results`` (a pipeline's)."""
    return {(i, c.key) for i, result in enumerate(results) for c in result.calls if c.state is CallState.COMMITTED}


def mask_plan(events: Iterable[ProviderEvent], dialect: str | None = None, committed: Committed | None = None) -> MaskPlan:
    """What the redactor masks of each call of ``events``: every scalar of a call that did
    not commit (``committed``: the input's committed calls, as :func:`committed_calls` gives
    them; None: found by assembling ``events`` with the default settings, no tools)."""
    return _plan_of(events, dialect, committed)


def _plan_of(
    events: Iterable[ProviderEvent],
    dialect: str | None,
    committed: Committed | None,
    registry: ToolRegistry | None = None,
    config: AssembleConfig | None = None,
) -> MaskPlan:
    planner = _Planner(dialect, committed, registry, config)
    for event in events:
        planner.feed(event)
    return planner.finish()


class _Planner:
    """:func:`mask_plan` one event at a time (a server reads a recording between other work)."""

    def __init__(
        self,
        dialect: str | None,
        committed: Committed | None,
        registry: ToolRegistry | None,
        config: AssembleConfig | None,
        recorder: EventRedactor | None = None,
    ) -> None:
        #: ``recorder``: a recording redactor already fed (and finished) with the events; only the assembly is fed then
        self._own = recorder is None
        self._recorder = recorder if recorder is not None else EventRedactor(dialect, keep=False, record=True)
        self._committed = committed
        self._registry = registry
        self._pipeline: Pipeline | None = None
        if committed is None:
            self._pipeline = Pipeline(dialect, config=config, registry=registry, emit_events=False, progress_events=False)

    @property
    def assembles(self) -> bool:
        """Whether the events are assembled to find which calls committed (none were given)."""
        return self._pipeline is not None

    def feed(self, event: ProviderEvent) -> None:
        if self._own:
            self._recorder.feed(event)
        if self._pipeline is not None:
            try:
                self._pipeline.feed(event)
            except CaptureError:  # no dialect reads it: no call commits
                self._pipeline, self._committed = None, set()

    def finish(self) -> MaskPlan:
        if self._own:
            self._recorder.finish()
        committed, some_failed = self._committed, self._committed is not None  # given verdicts: a call without text may have failed
        names = {assembler_key(call): name for call, name in self._recorder.names.items()}
        if self._pipeline is not None:
            try:
                self._pipeline.close()
                results = self._pipeline.results()
                committed = committed_calls(results)
                some_failed = any(c.state is not CallState.COMMITTED for r in results for c in r.calls)
                names = {(i, c.key): c.name for i, r in enumerate(results) for c in r.calls if c.name is not None}
            except CaptureError:
                committed = set()
        committed = committed or set()
        published: dict[tuple[int, CallKey], frozenset[str]] = {}
        by_name: dict[str, frozenset[str]] = {}
        if self._registry is not None:  # what each committed call's tool schema publishes
            for call in committed:
                name = names.get(call)
                if name is not None and (strings := self._registry.published(name)):
                    published[call] = by_name[name] = strings
        plan = MaskPlan(self._recorder.texts, committed, published, by_name, self._recorder.finals)
        if by_name and (strings := self._recorder.piece_strings):
            plan.kept_pieces = kept_pieces(strings, by_name)
        plan.any_failed = plan.any_failed or some_failed
        return plan


def stray_argument_text(events: Iterable[ProviderEvent], dialect: str | None = None) -> list[str]:
    """Where ``events`` hold argument text that no call took before its stream's end: a
    fragment or call after the stream ended, a repeated text (a Responses ``.done``, a
    whole ``response.output``) that differs from every call's text, argument text in a
    place no adapter reads, an event that cannot be read, a shape the dialect never has,
    or a stream no adapter reads (:data:`UNREAD_STREAM`). Each entry names the line and
    what was found, never text. Empty: every argument text the input holds is text a call
    took (whether those calls committed is the caller's to check)."""
    redactor = EventRedactor(dialect, keep=False)
    for event in events:
        redactor.feed(event)
    return redactor.finish()[1]


def reading_dialect(events: list[ProviderEvent], dialect: str | None) -> str | None:
    """The dialect whose adapter reads ``events``: ``dialect`` if some event is of it, else
    (none given) the first detected; None when no supported adapter reads them."""
    for event in events:
        if (found := _dialect_of(event, dialect)) is not None:
            return found if found in ADAPTERS else None
    return None


def _dialect_of(event: ProviderEvent, dialect: str | None) -> str | None:
    """The dialect ``event`` is of, if it decides how the input is read (``dialect``, when given, only)."""
    if event.error is None and (found := detect(event)) is not None and (dialect is None or found == dialect):
        return found
    return None


class EventRedactor:
    """:func:`redact_events` and :func:`stray_argument_text` one event at a time, so a long
    input can be read in steps (a server reads a recording between other work).

    ``feed(event)`` returns the masked copies it can release: events are held back until
    one tells which dialect reads the input (:func:`reading_dialect`, usually the first).
    ``finish()`` returns the events still held and where argument text is stray; the
    result is the same as reading the whole list at once. ``keep=False``: only the stray
    places are wanted, no masked copy is kept (``feed`` and ``finish`` return none), and
    nothing is masked (``values``: mask all the same, the same ledger).
    """

    def __init__(
        self, dialect: str | None = None, *, keep: bool = True, plan: MaskPlan | None = None, record: bool = False, values: bool | None = None
    ) -> None:
        self._wanted = dialect
        self._keep = keep
        self._values = keep if values is None else values
        self._plan = plan
        self._record = record
        self._held: list[ProviderEvent] = []  # until the reading dialect is known
        self._decided = False  # an event told the dialect (None: no adapter reads it)
        self._masker: DialectMasker | None = None
        self._adapter: Any = None

    def feed(self, event: ProviderEvent) -> list[ProviderEvent]:
        """Masked copies of ``event`` and of any events held before it (an unreadable one as
        an event with ``error`` :data:`UNREADABLE`, written as that text)."""
        if self._masker is not None:
            masked = self._mask(event)
            return [] if masked is None else [masked]
        if self._keep or not self._decided:
            self._held.append(event)
        if self._decided:  # the input is read by no adapter: every scalar of it is masked at the end
            return []
        found = _dialect_of(event, self._wanted)
        if found is None:
            return []
        self._decided = True
        if found not in ADAPTERS:
            return []
        self._adapter, self._masker = make_adapter(found), DialectMasker(found, self._plan, record=self._record, values=self._values)
        held, self._held = self._held, []
        return [masked for e in held if (masked := self._mask(e)) is not None]

    @property
    def piece_strings(self) -> list[tuple[str | None, list[str]]]:
        """With ``record``: the Gemini ``stringValue`` strings (:class:`~.published.StringPieces`)."""
        return (self._masker.pieces.strings or []) if self._masker is not None else []

    @property
    def names(self) -> dict[CallRef, str]:
        """Every call's tool name as the ledger followed it; empty when no adapter reads the input."""
        return self._masker.ledger.names if self._masker is not None else {}

    @property
    def finals(self) -> set[CallRef]:
        """With ``record``: the calls whose whole text is a final text (see :class:`~.redactor.Ledger`)."""
        return self._masker.ledger.finals if self._masker is not None else set()

    @property
    def texts(self) -> dict[CallRef, tuple[list[str], str | None]]:
        """With ``record``: every call's argument text as the assembler takes it (see
        :class:`~.redactor.Ledger`); empty when no adapter reads the input."""
        return (self._masker.ledger.texts or {}) if self._masker is not None else {}

    def finish(self) -> tuple[list[ProviderEvent], list[str]]:
        """``(events still held, masked; where argument text is stray)``."""
        if self._masker is None:  # nothing tells where argument text is (no call committed): every scalar goes
            held, self._held = self._held, []
            masked = [e._replace(data=e.data if e.data == DONE else mask_scalars_value(e.data), raw=None) for e in held if e.error is None]
            return (masked if self._keep else []), [UNREAD_STREAM]
        return [], self._masker.ledger.finish()

    def _mask(self, event: ProviderEvent) -> ProviderEvent | None:
        masker = self._masker
        assert masker is not None
        if event.error is not None:  # kept as an unreadable placeholder: the pipeline fails the stream there
            masker.ledger.apply([StreamError("unreadable event")])
            masker.ledger.ignored(f"line {event.line}", "an event that cannot be read")
            return event._replace(data=None, raw=None, error=UNREADABLE) if self._keep else None
        try:
            ops: list[Op] = self._adapter.feed(event)
        except ADAPTER_FAULTS:
            ops = [StreamError("uninterpretable event")]  # as the pipeline does
        try:
            data = masker.mask(event, ops)
        except ADAPTER_FAULTS:  # a shape the dialect never has
            data = mask_value(event.data)  # every string masked: nothing of it is kept
            masker.ledger.ignored(f"line {event.line}", "a shape the dialect never has")
        return event._replace(data=data, raw=None) if self._keep else None  # the original text is not redacted


def redact_capture(
    data: bytes,
    name: str = "<input>",
    dialect: str | None = None,
    committed: Committed | None = None,
    *,
    registry: ToolRegistry | None = None,
    config: AssembleConfig | None = None,
) -> bytes:
    """A redacted reproducer of a capture: SSE stays SSE, anything else becomes JSON Lines.

    ``committed``: the ``(stream, key)`` of the calls that committed (a session's verdicts,
    :func:`committed_calls`); None: found by assembling ``data`` with ``config`` (default
    settings when None) and ``registry`` (the tools the stream was judged by).
    Every scalar of a call that did not commit is masked (:mod:`.scalarmask`). The capture
    is decoded once (:class:`CaptureReading`; its events are kept while the reproducer is made).

    Raises ``ValueError`` when an event cannot be redacted (e.g. a Bedrock ``chunk.bytes``
    that is not JSON), naming ``name``; events of any nesting depth the capture reader
    accepts are redacted.
    """
    try:
        reading = CaptureReading(data, name, dialect)
        for _ in reading.read():
            pass
        return reading.reproducer(reading.lines(committed, registry=registry, config=config))
    except RecursionError:  # a path not made iterative yet: a clear error, never a traceback
        raise ValueError(f"{name}: an event nests too deep to redact") from None


#: Bytes of a capture :class:`CaptureReading` hands the capture reader at a time.
READ_PIECE_BYTES = 4096


class CaptureReading:
    """One decoding of a capture, from which everything redaction needs is made.

    :meth:`read` decodes ``data`` (:data:`READ_PIECE_BYTES` at a time) and reads each
    provider event once through a recording :class:`EventRedactor`: afterwards
    :attr:`stray` says where argument text is stray (:func:`stray_argument_text`),
    :attr:`recorder` holds each call's argument text, and :attr:`events` the decoded events.
    :meth:`lines` then makes the reproducer's text from those events (never decoding the
    bytes again): which calls committed is found by assembling them once (unless given), then
    each event is masked. Both are generators, so a server can do the work in steps between
    other work; reading them through gives exactly :func:`redact_capture`. They raise what
    the capture reader and the redactor raise (``CaptureError``, ``ValueError``, ``RecursionError``).
    Memory: the decoded events are kept until the reading is dropped.
    """

    def __init__(self, data: bytes, name: str = "<input>", dialect: str | None = None) -> None:
        head = data.lstrip(b"\xef\xbb\xbf \t\r\n")
        self.as_sse = not head.startswith(b"{") and not is_binary(head)
        self.name, self.dialect = name, dialect
        self.events: list[ProviderEvent] = []
        self.recorder = EventRedactor(dialect, keep=False, record=True)
        #: where argument text is stray, once :meth:`read` is read through (None before)
        self.stray: list[str] | None = None
        self._data = data
        self._kept = False

    def read(self, *, keep: bool = True) -> Iterator[ProviderEvent]:
        """Decode the capture and record each event; yields each event once recorded.
        ``keep=False``: the events are not kept (no reproducer is wanted)."""
        data, self._data = self._data, b""
        self._kept = keep
        for event in iter_capture(_pieces(data), self.name):
            self.recorder.feed(event)
            if keep:
                self.events.append(event)
            yield event
        self.stray = self.recorder.finish()[1]

    def lines(
        self,
        committed: Committed | None = None,
        *,
        registry: ToolRegistry | None = None,
        config: AssembleConfig | None = None,
        seen: Callable[[ProviderEvent], None] | None = None,
    ) -> Iterator[str]:
        """The reproducer's text, one provider event's lines at a time (an empty string for
        each event assembled to find which calls committed), from the events :meth:`read`
        decoded; ``committed``, ``registry``, ``config`` as for :func:`redact_capture`;
        ``seen`` is called with each masked event as it is written."""
        assert self.stray is not None and self._kept, "read() the events first"
        planner = _Planner(self.dialect, committed, registry, config, recorder=self.recorder)
        if planner.assembles:
            for event in self.events:
                planner.feed(event)
                yield ""
        redactor = EventRedactor(self.dialect, plan=planner.finish())
        for event in [*self.events, None]:
            masked = redactor.feed(event) if event is not None else redactor.finish()[0]
            if seen is not None:
                for one in masked:
                    seen(one)
            yield "".join(written(one, self.as_sse) for one in masked)

    @staticmethod
    def reproducer(lines: Iterable[str]) -> bytes:
        """The reproducer's bytes from the text :meth:`lines` gives."""
        return "".join(lines).encode("utf-8", "surrogatepass")


def _pieces(data: bytes) -> Iterator[bytes]:
    return (data[i : i + READ_PIECE_BYTES] for i in range(0, len(data), READ_PIECE_BYTES))


__all__ = [
    "UNREADABLE",
    "UNREAD_STREAM",
    "CaptureReading",
    "EventRedactor",
    "committed_calls",
    "mask_plan",
    "mask_arguments",
    "mask_json_text",
    "mask_value",
    "placeholder",
    "reading_dialect",
    "redact_capture",
    "redact_events",
    "stray_argument_text",
]
