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
from dataclasses import dataclass, field
from typing import Any
from toollatch.core.model import CallIdentity, CallKey, CallsLeftOut, CallStart, Op
from toollatch.core.pipeline import Pipeline
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


def cap_new_calls(
    ops: list[Op], known: Container[CallKey], keep: int, earlier: Container[CallKey] = frozenset()
) -> tuple[list[Op], set[CallKey]]:
    """``ops`` with the ops of every call past the first ``keep`` new ones left out:
    ``(kept ops, keys left out)``. A call is new when its key is not in ``known`` (the
    keys the stream already has: :meth:`~toollatch.core.pipeline.Pipeline.call_keys`);
    ops of a key in ``earlier`` (calls left out before) are left out too, and not counted
    again. Ops without a key (stream start, end, quirks) are always kept, in order. The
    :class:`~toollatch.core.model.CallStart` ops of the calls left out, and their
    :class:`~toollatch.core.model.CallIdentity` ops that name an id, are kept as
    :class:`~toollatch.core.model.CallsLeftOut` ops where they were, so the assembler
    counts their tool_call_ids as the library's reader does (a call followed that shares
    its id with one left out fails alike).

    A :class:`~toollatch.core.model.CallStart` with another tool_call_id at a key that
    has a call (the assembler's restart: another call, the first one fails) is a new call
    too: past ``keep``, it and the later ops of its key are left out. Known keys' ids are
    read from ``known`` where it has a ``call_id(key)`` method (:class:`_KnownKeys`)."""
    kept: list[Op] = []
    opened: set[CallKey] = set()
    new_calls = 0
    ids: dict[CallKey, str | None] = {}  # tool_call_id of each key these ops touched, as the ops set it
    known_id = getattr(known, "call_id", None)
    left_out: set[CallKey] = set()
    told: list[CallStart | CallIdentity] = []  # identity ops of calls left out, since the last op kept
    for op in ops:
        key = getattr(op, "key", None)
        if key is not None:
            kind = type(op)
            call_id = getattr(op, "call_id", None) if kind is CallStart or kind is CallIdentity else None
            if key in left_out or key in earlier:
                new = leave = True
            else:
                new = key not in opened and key not in known
                if not new and call_id:
                    current = ids[key] if key in ids else (known_id(key) if known_id is not None else None)
                    if kind is CallStart and current is not None:
                        new = current != call_id  # another id: a restart, another call
                    elif current is None or op.final:  # type: ignore[union-attr]
                        ids[key] = call_id  # the id the call now has (a repeated start fills it too)
                leave = new and new_calls >= keep
            if leave:  # a call left out
                if key not in earlier:
                    left_out.add(key)
                if kind is CallStart or call_id:
                    told.append(op)  # type: ignore[arg-type]
                continue
            if new:
                opened.add(key)
                new_calls += 1
                ids[key] = call_id
        if told:
            _tell(kept, told)
        kept.append(op)
    if told:
        _tell(kept, told)
    return kept, left_out


#: Identity ops of calls left out per :class:`~toollatch.core.model.CallsLeftOut` op: one
#: such op costs the assembler about as much as this many ops of a call followed, so a
#: part of an event applied between two yields of the event loop stays as short.
TOLD_PER_OP = 32


def _tell(kept: list[Op], told: list[CallStart | CallIdentity]) -> None:
    """Append to ``kept`` the identity ops ``told`` of calls left out, in
    :class:`~toollatch.core.model.CallsLeftOut` ops of at most :data:`TOLD_PER_OP`; empty ``told``."""
    kept.extend(CallsLeftOut(tuple(told[i : i + TOLD_PER_OP])) for i in range(0, len(told), TOLD_PER_OP))
    told.clear()


@dataclass
class LargeEvent:
    """What :func:`read_large_event` read. ``ops`` is None when the event is for
    :meth:`~toollatch.core.pipeline.Pipeline.feed` as it is (``event``: parsed; an
    unreadable payload, or an event the pipeline's ``ops_of`` would not take); else the
    event's ops, of at most ``keep`` new calls, with ``left_out`` the keys of the calls left
    out. ``adopt``: the dialect and adapter the input's first event told, to hand to
    :meth:`~toollatch.core.pipeline.Pipeline.adopt` before the ops are applied."""

    event: ProviderEvent
    ops: list[Op] | None = None
    left_out: set[CallKey] = field(default_factory=set)
    adopt: tuple[str, DialectAdapter] | None = None
    #: the input's adapter after this event (a copy of the one given, fed it): the read
    #: never changes the pipeline's own, so a read thrown away leaves no trace
    adapter: DialectAdapter | None = None


def read_large_event(
    event: ProviderEvent,
    state: tuple[str | None, DialectAdapter | None, tuple[ProviderEvent, ...] | None],
    known: Container[CallKey],
    keep: int,
    name: str,
    earlier: Container[CallKey] = frozenset(),
) -> LargeEvent:
    """Read one deferred ``event`` of an input whose pipeline is in ``state``
    (:meth:`~toollatch.core.pipeline.Pipeline.adapter_state`, taken when the event was
    reached) into its ops, keeping the first ``keep`` calls it opens (:func:`cap_new_calls`
    against ``known`` and ``earlier``). Meant for a worker thread while nothing else feeds that pipeline:
    it feeds the pipeline's adapter (or a new one, for the first event), never the pipeline
    itself (:meth:`~toollatch.core.pipeline.Pipeline.held_ops` on one made for it: framing
    notes and adapter faults as the pipeline makes them)."""
    with collector_paused():  # a million objects built and let go: walked in small steps, never all at once
        return _read(event, state, known, keep, name, earlier)


def _read(
    event: ProviderEvent,
    state: tuple[str | None, DialectAdapter | None, tuple[ProviderEvent, ...] | None],
    known: Container[CallKey],
    keep: int,
    name: str,
    earlier: Container[CallKey],
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
    kept, left_out = cap_new_calls(ops, known, keep, earlier)
    return LargeEvent(parsed._replace(data=None), kept, left_out, adopt, adapter if adopt is None else None)


class KeyIds(dict[CallKey, "str | None"]):
    """A copy of the keys a stream's ops named its calls by, each with the tool_call_id of
    the call there (for :func:`cap_new_calls` in a worker thread: it tells a restart)."""

    def call_id(self, key: CallKey) -> str | None:
        return self.get(key)


def key_ids(pipeline: Pipeline) -> KeyIds:
    """:class:`KeyIds` of ``pipeline``'s current stream (aliases included); O(calls)."""
    ids = KeyIds()
    if pipeline._streams:
        stream = pipeline._streams[-1]
        calls = stream._calls
        ids.update((key, call.call_id) for key, call in calls.items())
        ids.update((key, calls[target].call_id) for key, target in stream._alias.items())
    return ids


def read_now(pipeline: Pipeline, event: ProviderEvent, keep: int, earlier: Container[CallKey] = frozenset()) -> LargeEvent:
    """:func:`read_large_event` of ``event`` for ``pipeline`` in its present state, on the
    calling thread (an adapter to adopt is left to the caller:
    :meth:`CappedPipeline.take`)."""
    return read_large_event(event, pipeline.adapter_state(), key_ids(pipeline), keep, pipeline.name, earlier)


def reader(pipeline: CappedPipeline, event: ProviderEvent) -> Callable[[], LargeEvent]:
    """:func:`read_large_event` of ``event`` for ``pipeline`` as it stands now (its state,
    known calls, room and calls left out taken at once), to run later in a worker thread
    while nothing feeds ``pipeline``; apply the answer with :meth:`CappedPipeline.take`."""
    args = (event, pipeline.adapter_state(), key_ids(pipeline), pipeline.room(), pipeline.name, frozenset(pipeline.earlier()))
    return lambda: read_large_event(*args)


#: Calls of one input (a session) the dashboard follows one by one: the first ones (~1,000 cards).
CALLS_FOLLOWED = 1000


def is_large(event: ProviderEvent) -> bool:
    """``event``'s payload is over :data:`LARGE_PAYLOAD_CHARS` characters (or left unparsed)."""
    return event.data is UNPARSED or (event.raw is not None and len(event.raw) > LARGE_PAYLOAD_CHARS)


class _KnownKeys:
    """The keys a stream's ops named its calls by, looked up in place (no copy per event)."""

    __slots__ = ("_calls", "_alias")

    def __init__(self, stream: Any) -> None:
        self._calls, self._alias = stream._calls, stream._alias

    def __contains__(self, key: object) -> bool:
        return key in self._calls or key in self._alias

    def call_id(self, key: CallKey) -> str | None:
        """The tool_call_id of the call at ``key`` now (None: none yet, or no call)."""
        call = self._calls.get(self._alias.get(key, key))
        return None if call is None else call.call_id


class CappedPipeline(Pipeline):
    """A :class:`~toollatch.core.pipeline.Pipeline` that follows the first ``keep`` calls
    of its input: the ops of the calls opened past them are left out (whether they come in
    one event of 100,000 calls, in 100,000 events or in 1,000 streams), the calls counted in
    :attr:`untold`, and their later ops dropped too (keys are a stream's own: a later
    stream may use them again). A large event (:func:`is_large`) is read
    through :func:`read_large_event` (the same ops, capped alike). The dashboard assembles a
    stream so, and every pass it makes again over the same bytes (timing, triage, dry runs)
    too, so they all tell the same calls. Other arguments as the pipeline's."""

    def __init__(self, *args: Any, keep: int = CALLS_FOLLOWED, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keep = keep
        #: keys of the current stream's calls left out (their later ops are dropped)
        self.left_out: set[CallKey] = set()
        self._left_in: object = None  # the stream those keys belong to
        self._before = 0  # calls of the streams before that one
        self._untold = 0  # calls left out, every stream

    @property
    def untold(self) -> int:
        """How many calls were left out (every stream of the input)."""
        return self._untold

    def room(self) -> int:
        """New calls the input may still open (in its current stream)."""
        self.earlier()  # counts the calls of the streams before the current one
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
        if read.ops is None:
            return super().feed(read.event)
        self._leave_out(read.left_out)
        return self.apply_ops(read.ops)

    def ops_of(self, event: ProviderEvent) -> list[Op] | None:
        """The pipeline's ops of ``event``, without those of the calls left out."""
        ops = super().ops_of(event)
        if not ops or (not self.left_out and len(ops) <= self.room()):  # each op opens one call at most
            return ops
        kept, left_out = cap_new_calls(ops, _KnownKeys(self._streams[-1]) if self._streams else (), self.room(), self.earlier())
        self._leave_out(left_out)
        return kept

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
            self.left_out, self._left_in = set(), current
            self._before = sum(len(stream._calls) for stream in self._streams[:-1])
        return self.left_out

    def _leave_out(self, keys: set[CallKey]) -> None:
        if keys:
            self.earlier().update(keys)
            self._untold += len(keys)
