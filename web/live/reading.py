"""A finished live session's recording, read through once to decide what is kept.

Saving a recording reads the stream the session assembled (``stream_data``) exactly once
(:class:`RecordingReading`, driving one :class:`toollatch.redaction.export.CaptureReading`):
its bytes are decoded once and each provider event is read once, which answers three
questions together:

* may it be downloaded as received (:func:`download_as_received`: every place of argument
  text in it must be text a call took, and every call committed);
* is a forwarded credential echoed in the stream's joined text (:func:`echoed_in_texts`):
  an upstream can echo the API key it was sent split over several chunks (four
  ``delta.content`` pieces, a call's argument fragments), so that no single event, and no
  run of the raw bytes, holds it whole. The text is joined the way a reader would see it —
  each string field's pieces in order (assistant text, reasoning, every provider field),
  also item by item (two choices' or content blocks' pieces can interleave), inside a
  Bedrock InvokeModel chunk's base64-encoded event too, and each call's argument text as
  the assembler took it — and every forwarded value is
  looked for there, in its JSON-escaped and ``\\u``-escaped forms too (the joined text is
  also read with JSON escapes undone, once and twice: argument text is JSON inside a JSON
  event);
* when either answer says the bytes may not be kept, the redacted reproducer
  (:func:`toollatch.redaction.export.redact_capture` of the stream, judged by the session's
  tools and settings), made from the events already decoded. Its masked events are
  searched as they are written: a reproducer keeps a committed call's object keys, tool
  names and ids, so one that still holds a forwarded value, or any piece of one
  :data:`~toollatch.web.live.credentials.MIN_SECRET_BYTES` characters long, is made again
  with every scalar masked, and if even that holds one, none is kept (:func:`reproducer_without`
  gives the same for the reproducer export).

:func:`read_in_steps` does that work :data:`CHECK_STEP_EVENTS` provider events at a time,
each step in a worker thread, one step after another: the event loop never runs the work
itself, since one provider event can be tens of MiB (a whole tool call's arguments in one
delta, a non-streaming body) and reading it through takes seconds. A step holds the
interpreter for at most ``sys.getswitchinterval()`` at a time while the loop waits for it.
:func:`read_recording` gives the same answer in one go (blocking).
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

from toollatch.core.model import CallState
from toollatch.redaction.export import CaptureReading
from toollatch.wire.capture import CaptureError
from toollatch.wire.retell import untold_arguments

from toollatch.web.live.credentials import MIN_SECRET_BYTES, scrub_bytes
from toollatch.web.live.echo_search import gather_leaves, search_stream, echoed_in_texts, unescape  # noqa: F401  (unescape: re-exported)
from toollatch.web.live.offload import in_child
from toollatch.web.live.session import LiveSession

#: Quirks that mean the assembler left argument text aside (after a stream's end, after a
#: call's end, deltas a differing final text replaced, a later final text unlike the first,
#: a delta after the final text): such a recording holds text no call committed.
TEXT_LEFT_ASIDE = frozenset({
    "op_after_stream_end", "chunk_after_stream_end", "fragment_after_call_ended",
    "done_arguments_differ", "final_arguments_differ", "delta_after_done",
})
#: Provider events :func:`read_in_steps` reads between two yields to the event loop
#: (about half a millisecond of work for chunks of a few hundred bytes).
CHECK_STEP_EVENTS = 16
#: Bytes of stream above which :func:`read_in_steps` reads a recording in a child process.
CHILD_READ_BYTES = 4 * 1024 * 1024
#: What the reader cannot read through: such a recording is never kept as received.
READ_FAULTS = (CaptureError, ValueError, RecursionError)


@dataclass(frozen=True)
class Reading:
    """What one reading of a recording decided.

    ``as_received``: the bytes may be downloaded as received (:func:`download_as_received`);
    ``echoed``: a forwarded credential is in the stream's joined text (or the session saw
    one in an event); ``reproducer``: the redacted reproducer the recording keeps instead of
    the bytes (``b""`` when it cannot be made), None when the bytes are kept."""

    as_received: bool
    echoed: bool
    reproducer: bytes | None


class RecordingReading:
    """One reading of a finished ``session``'s recording (see the module); ``secrets``: the
    forwarded credential values to look for (:func:`~toollatch.web.live.credentials.secret_values`).

    :meth:`steps` does the work, yielding after each provider event (and each event of the
    reproducer); :attr:`reading` is the answer once it is read through. Never raises for a
    recording that cannot be read: it is then not kept as received, is said to hold a
    credential when one is looked for, and keeps an empty reproducer."""

    def __init__(self, session: LiveSession, secrets: list[str], *, reproduce: bool = True) -> None:
        self._session = session
        self._wanted = [s for s in secrets if len(s.encode("utf-8", "ignore")) >= MIN_SECRET_BYTES]
        self._reproduce = reproduce  # False: the reproducer is not wanted (nor made)
        self.reading: Reading | None = None

    def job(self) -> ReadingJob | None:
        """What is left to read, as plain data (:class:`ReadingJob`, for :func:`read_job`
        anywhere, a child process too); None when the answer needs no reading (then it is
        :attr:`reading`)."""
        session = self._session
        decided = _decided_without_reading(session)
        look = bool(self._wanted) and not session.echoed_secret
        if decided is not None and not look and (decided or not self._reproduce):
            self.reading = Reading(decided, session.echoed_secret, None)
            return None
        src = session.live_source
        return ReadingJob(src.stream_data, src.name, session.pipeline.dialect, self._wanted, self._reproduce, decided, session.echoed_secret, look)

    def steps(self) -> Iterator[None]:
        job = self.job()
        if job is not None:
            pipeline = self._session.pipeline
            self.reading = yield from read_job(job, pipeline.registry, pipeline.config)


@dataclass(frozen=True)
class ReadingJob:
    """One recording's reading as plain data: the stream's bytes, its name and dialect,
    the credential values a reproducer must not hold (``wanted``; ``look``: whether the
    stream is searched for them too),
    whether a reproducer is wanted, the answer the session already gives without reading
    (``decided``, None if none) and whether it saw a credential echoed (``echoed``)."""

    data: bytes
    name: str
    dialect: str | None
    wanted: list[str]
    reproduce: bool
    decided: bool | None
    echoed: bool
    look: bool


def read_job(job: ReadingJob, registry: Any, config: Any) -> Generator[None, None, Reading]:
    """The :class:`Reading` of ``job`` (yielding after each provider event, and each event
    of the reproducer); ``registry`` and ``config``: what the stream was judged by."""
    reading = CaptureReading(job.data, job.name, job.dialect)
    try:
        found = yield from search_stream(reading, job.wanted if job.look else [], keep=job.reproduce)
    except READ_FAULTS:  # cannot be read through: never as received, nor any reproducer of it
        return Reading(False, job.echoed or job.look, b"" if job.reproduce else None)
    as_received = job.decided if job.decided is not None else not reading.stray
    echoed = job.echoed or found
    reproducer = None
    if job.reproduce and (echoed or not as_received):
        try:
            reproducer = yield from _reproducer(reading, job.wanted, registry, config)
        except READ_FAULTS:
            reproducer = b""
    return Reading(as_received, echoed, reproducer)


def read_job_whole(job: ReadingJob, tools: Any, config: Any) -> Reading:
    """:func:`read_job` read through at once, the registry made from the request's
    ``tools`` (:func:`~toollatch.web.live.source.usable_registry`): for a child process."""
    from toollatch.web.live.source import usable_registry

    work = read_job(job, usable_registry(tools) if tools else None, config)
    while True:
        try:
            next(work)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def reproducer_without(data: bytes, name: str, dialect: str | None, secrets: list[str], *, registry: Any = None, config: Any = None) -> bytes:
    """The redacted reproducer of ``data`` (:func:`toollatch.redaction.export.redact_capture`
    with ``registry`` and ``config``) that holds no value of ``secrets`` (forwarded
    credentials), whole or in pieces over its events: made again with every call's scalars
    masked when it would, ``b""`` when even that holds one. Raises ``CaptureError`` or
    ``ValueError`` (naming ``name``) when the stream cannot be read or redacted."""
    wanted = [s for s in secrets if len(s.encode("utf-8", "ignore")) >= MIN_SECRET_BYTES]
    reading = CaptureReading(data, name, dialect)
    try:
        for _ in reading.read():
            pass
        work = _reproducer(reading, wanted, registry, config)
        while True:
            next(work)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    except RecursionError:
        raise ValueError(f"{name}: an event nests too deep to redact") from None


def _reproducer(reading: CaptureReading, secrets: list[str], registry: Any, config: Any) -> Generator[None, None, bytes]:
    """The redacted reproducer of the events ``reading`` decoded (yielding after each); one
    that still holds a value of ``secrets``, or any piece :data:`MIN_SECRET_BYTES` characters
    long of one (:data:`PIECED_SECRET_CHARS` or longer), in its joined text (a committed call keeps its object keys, a tool name
    or an id is kept: an echo split over them stays there) is made again with every call's
    scalars masked, and if it still holds one, none is kept (``b""``). A value kept whole is replaced (:func:`~toollatch.web.live.credentials.scrub_bytes`).
    The masked events are searched as they are written: the reproducer is not decoded again.
    Raises what :meth:`CaptureReading.lines` raises."""
    for committed in (None, set()):
        lines: list[str] = []
        fields: dict[tuple[Any, ...], list[str]] = {}  # of the masked events, as written (a credential kept whole replaced)
        seen = (lambda event: gather_leaves(event, fields, secrets)) if secrets else None
        for line in reading.lines(committed, registry=registry, config=config, seen=seen):
            lines.append(line)
            yield None
        made = CaptureReading.reproducer(lines)
        if not secrets:
            return made
        if not echoed_in_texts((("".join(pieces)) for pieces in fields.values()), _pieces(secrets)):
            return scrub_bytes(made, secrets)[0]
    return b""


#: A forwarded value at least this many characters long is a key or token (not a user name
#: or a short query value that other text can share a piece with): its pieces are looked for.
PIECED_SECRET_CHARS = 2 * MIN_SECRET_BYTES


def _pieces(secrets: list[str]) -> list[str]:
    """Every piece of :data:`MIN_SECRET_BYTES` characters of each of ``secrets`` at least
    :data:`PIECED_SECRET_CHARS` long; a shorter one whole."""
    size = MIN_SECRET_BYTES
    return sorted({s[i : i + size] for s in secrets if len(s) >= PIECED_SECRET_CHARS for i in range(len(s) - size + 1)} | {s for s in secrets if len(s) < PIECED_SECRET_CHARS})


def read_recording(session: LiveSession, secrets: list[str]) -> Reading:
    """:class:`RecordingReading` of ``session`` read through in one go (blocking: on the
    event loop, use :func:`read_in_steps`)."""
    reader = RecordingReading(session, secrets)
    for _ in reader.steps():
        pass
    assert reader.reading is not None
    return reader.reading


async def read_in_steps(session: LiveSession, secrets: list[str], step: int = CHECK_STEP_EVENTS) -> Reading:
    """:func:`read_recording`, ``step`` provider events at a time, each step in a worker
    thread (never on the event loop); a stream over :data:`CHILD_READ_BYTES` is read in a
    child process instead (:func:`~toollatch.web.live.offload.in_child`: a worker thread
    still shares the GIL, and one event of megabytes is parsed, masked and written in
    single C calls that hold it). Same answer."""
    reader = RecordingReading(session, secrets)
    job = await asyncio.to_thread(reader.job)
    if job is None:
        assert reader.reading is not None
        return reader.reading
    pipeline = session.pipeline
    if len(job.data) > CHILD_READ_BYTES:
        read = await in_child(read_job_whole, job, session.live_source.tools, pipeline.config)
        if read is not None:
            return read
    work = read_job(job, pipeline.registry, pipeline.config)
    while (read := await asyncio.to_thread(_advance, work, step)) is None:
        pass
    return read


def _advance(work: Generator[None, None, Reading], step: int) -> Reading | None:
    """Run ``step`` steps of ``work``; its answer once it is done, else None."""
    try:
        for _ in range(step):
            next(work)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    return None


def download_as_received(session: LiveSession) -> bool:
    """Whether the recording may be downloaded as received: only when it holds no argument
    text of a call that did not commit (the rule *Reveal text* follows). That is, the stream
    ended normally, every call committed, no quirk says text was left aside
    (:data:`TEXT_LEFT_ASIDE`) and every place of argument text in the recording is text a
    call took before its stream's end (:func:`toollatch.redaction.export.stray_argument_text`: not a
    call after ``[DONE]``, nor a place no adapter reads; for a non-streaming body, nor a
    call its re-told stream leaves out, :func:`toollatch.wire.retell.untold_arguments`); or the
    upstream answered an HTTP error whose body (not a stream) was never assembled. Otherwise
    the download is the redacted reproducer (:func:`toollatch.web.live.recordings.redacted_recording`).
    Reads the whole recording in one go (:func:`read_recording`, no reproducer made)."""
    reader = RecordingReading(session, [], reproduce=False)
    for _ in reader.steps():
        pass
    assert reader.reading is not None
    return reader.reading.as_received


def _decided_without_reading(session: LiveSession) -> bool | None:
    """The answer of :func:`download_as_received` when it does not depend on reading the stream through, else None."""
    src = session.live_source
    if session.end_kind != "complete":
        return session.end_kind == "error" and session.upstream_error and session.position == 0 and "event-stream" not in (src.content_type or "")
    results = session.pipeline.results()
    if not all(c.state is CallState.COMMITTED for r in results for c in r.calls):
        return False
    if any(q in TEXT_LEFT_ASIDE for r in results for q in r.quirks):
        return False
    try:
        if src.json_body and untold_arguments(session.pipeline.dialect or src.dialect, src.data):
            return False  # argument text the re-told stream leaves out: no call took it
    except READ_FAULTS:
        return False
    return None
