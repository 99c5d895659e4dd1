"""A finished live session's recording read through off the event loop, in steps.

Saving a recording reads it through: to know whether it may be downloaded as received
(every place of argument text in it must be text a call took), and, when a forwarded
credential was echoed in argument text, to make the redacted reproducer it keeps instead.
:func:`check_as_received` and :func:`redacted_in_steps` do that work
:data:`CHECK_STEP_EVENTS` provider events at a time, each step in a worker thread, one
step after another: the event loop never runs the work itself, since one provider event
can be tens of MiB (a whole tool call's arguments in one delta, a non-streaming body)
and reading it through takes seconds. A step holds the interpreter for at most
``sys.getswitchinterval()`` at a time while the loop waits for it. They give the answers
of the one-pass :func:`download_as_received` and :func:`toollatch.redaction.export.redact_capture`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from itertools import islice
from typing import Any

from toollatch.wire.capture import CaptureError, ProviderEvent, iter_capture
from toollatch.redaction.export import EventRedactor, redacted_lines
from toollatch.core.model import CallState
from toollatch.core.pipeline import Pipeline
from toollatch.wire.retell import untold_arguments

from toollatch.web.live.session import LiveSession

#: Quirks that mean the assembler left argument text aside (after a stream's end, after a
#: call's end, deltas a differing final text replaced, a later final text unlike the first,
#: a delta after the final text): such a recording holds text no call committed.
TEXT_LEFT_ASIDE = frozenset({
    "op_after_stream_end", "chunk_after_stream_end", "fragment_after_call_ended",
    "done_arguments_differ", "final_arguments_differ", "delta_after_done",
})
#: Provider events :func:`check_as_received` reads between two yields to the event loop
#: (about half a millisecond of work for chunks of a few hundred bytes).
CHECK_STEP_EVENTS = 16
#: Bytes of the recording handed to the capture reader at a time (it decodes a piece whole).
CHECK_PIECE_BYTES = 4096


def download_as_received(session: LiveSession) -> bool:
    """Whether the recording may be downloaded as received: only when it holds no argument
    text of a call that did not commit (the rule *Reveal text* follows). That is, the stream
    ended normally, every call committed, no quirk says text was left aside
    (:data:`TEXT_LEFT_ASIDE`) and every place of argument text in the recording is text a
    call took before its stream's end (:func:`toollatch.redaction.export.stray_argument_text`: not a
    call after ``[DONE]``, nor a place no adapter reads; for a non-streaming body, nor a
    call its re-told stream leaves out, :func:`toollatch.wire.retell.untold_arguments`); or the
    upstream answered an HTTP error whose body (not a stream) was never assembled. Otherwise
    the download is the redacted reproducer (:func:`toollatch.web.live.store.redacted_recording`).
    Reads the whole recording in one go: on the event loop, use :func:`check_as_received`."""
    decided = _decided_without_reading(session)
    if decided is not None:
        return decided
    try:
        redactor = EventRedactor(session.pipeline.dialect, keep=False)
        for event in _events(session):
            redactor.feed(event)
        return not redactor.finish()[1]
    except (CaptureError, ValueError, RecursionError):  # cannot be read through: never as received
        return False


async def check_as_received(session: LiveSession, step: int = CHECK_STEP_EVENTS) -> bool:
    """:func:`download_as_received`, reading the recording ``step`` provider events at a
    time, each step in a worker thread (never on the event loop). Same answer; never raises for a
    recording that cannot be read (False)."""
    decided = _decided_without_reading(session)
    if decided is not None:
        return decided
    try:
        redactor = EventRedactor(session.pipeline.dialect, keep=False)
        events = _events(session)
        while await asyncio.to_thread(_feed_some, redactor, events, step):
            pass
        return not redactor.finish()[1]
    except (CaptureError, ValueError, RecursionError):
        return False


def _feed_some(redactor: EventRedactor, events: Iterator[ProviderEvent], step: int) -> bool:
    """Feed ``redactor`` up to ``step`` of ``events``; False once they are all read."""
    fed = False
    for event in islice(events, step):
        redactor.feed(event)
        fed = True
    return fed


async def redacted_in_steps(
    data: bytes, name: str, dialect: str | None, step: int = CHECK_STEP_EVENTS, judged_by: Pipeline | None = None
) -> bytes:
    """:func:`toollatch.redaction.export.redact_capture` of ``data``, made ``step`` provider events at
    a time, each step in a worker thread (``judged_by``: the session's pipeline,
    whose tools and settings tell which calls committed). Raises what the capture reader and
    the redactor raise (``CaptureError``, ``ValueError``, ``RecursionError``)."""
    lines: list[str] = []
    made = redacted_lines(data, name, dialect, **_judge(judged_by))
    while batch := await asyncio.to_thread(lambda: list(islice(made, step))):
        lines.extend(batch)
    return "".join(lines).encode("utf-8", "surrogatepass")


def _judge(pipeline: Pipeline | None) -> dict[str, Any]:
    return {} if pipeline is None else {"registry": pipeline.registry, "config": pipeline.config}


def _decided_without_reading(session: LiveSession) -> bool | None:
    """The answer when it does not depend on reading the stream through, else None."""
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
    except (CaptureError, ValueError, RecursionError):
        return False
    return None


def _events(session: LiveSession) -> Iterator[ProviderEvent]:
    """The provider events of the stream the session assembled, decoded piece by piece."""
    data = session.live_source.stream_data
    pieces = (data[i : i + CHECK_PIECE_BYTES] for i in range(0, len(data), CHECK_PIECE_BYTES))
    return iter_capture(pieces, session.live_source.name)
