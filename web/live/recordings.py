"""Recordings of live sessions: saving a finished session to the store, and replaying it.

:func:`save_recording` (:func:`prepare_recording`, then :meth:`PreparedRecording.write`)
writes a finished live session to the :class:`~toollatch.web.store.Store` as
``kind="recording"``: the request's tools and body, never a header, and the response bytes
as received (any forwarded credential replaced) only when the one reading of its stream
(:mod:`toollatch.web.live.reading`) found no argument text of a call that did not commit
and no forwarded credential in the stream's joined text; otherwise the redacted
reproducer that reading made is stored and served instead (:func:`redacted_recording`).
:func:`recording_source` turns a recording back into a replayable source that reaches the
same verdicts (a cancelled recording stops at the same event).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from toollatch.redaction.export import redact_capture
from toollatch.core.registry import RegistryError
from toollatch.wire.retell import retell_body
from toollatch.observe.timing import ChunkTimes, TimingError

from toollatch.web.live.credentials import scrub_bytes, scrub_value
from toollatch.web.live.reading import Reading, read_recording
from toollatch.web.live.session import LiveSession
from toollatch.web.live.source import usable_registry
from toollatch.web.triage.sources import LoadedSource, SourceError, check, registry_from_tools
from toollatch.web.store import Store, StoredSource

log = logging.getLogger("toollatch.web")


@dataclass(frozen=True)
class PreparedRecording:
    """Everything a recording stores, computed on the event loop; written by :meth:`write`."""

    session: str
    name: str
    body: bytes
    tools: list[Any] | None
    meta: dict[str, Any]
    summary: dict[str, Any]

    def write(self, store: Store) -> str:
        """The database writes (blocking: run them off the event loop); returns the id."""
        rid = store.save(kind="recording", name=self.name, body=self.body, tools=self.tools, meta=self.meta, summary=self.summary)
        log.info("session %s: saved recording %s (%d bytes)", self.session, rid, len(self.body))
        return rid


def prepare_recording(session: LiveSession, forwarded_secrets: list[str], reading: Reading | None = None) -> PreparedRecording:
    """The recording of a finished ``session``: its bytes (scrubbed of any forwarded credential),
    request tools, metadata and search summary. Never a header. ``reading``: the one reading
    of its stream (:func:`~toollatch.web.live.reading.read_in_steps` with the same
    credentials), made here in one go when not given: whether the bytes may be kept as
    received, whether a forwarded credential is echoed in the stream's joined text, and the
    redacted reproducer kept instead of the bytes when not."""
    secrets = sorted({*session.live_source.secrets, *forwarded_secrets}, key=len, reverse=True)
    if reading is None:
        reading = read_recording(session, secrets)
    session.echoed_secret = reading.echoed
    as_received = reading.as_received
    raw = b"".join(session.live_source.chunks)
    body, redacted = scrub_bytes(raw, secrets)
    meta = session.recording_meta()
    meta["download"] = "as_received" if as_received else "redacted"
    if redacted:
        meta["redacted"] = "a forwarded credential appeared in the body and was replaced"
    if session.echoed_secret or not as_received:
        # A call did not commit (its text is never kept), or a credential was echoed split
        # over chunks no single one holds whole: keep the reproducer (argument strings and
        # text masked, every scalar of a call that did not commit too; same verdicts)
        # instead of the bytes, in the database as on every download.
        body = scrub_bytes(reading.reproducer or b"", secrets)[0]
        meta["download"], meta["streaming"] = "redacted", True
        meta["redacted"] = (
            "a forwarded credential appeared in the stream's text: the recording keeps the redacted reproducer"
            if session.echoed_secret
            else "a call did not commit: the recording keeps the redacted reproducer"
        )
    # String by string (keys too): the request body as well, if a key was pasted into it. A
    # replace over the JSON text could cut its syntax: a forwarded query value may be any text.
    clean = scrub_value(meta, secrets)
    src = session.live_source
    if len(src.times):  # packed arrays (8 bytes a chunk), against the bytes received: fitted to the body kept when read
        clean["chunk_times"] = src.times.to_json()
    name = f"{src.upstream} {src.endpoint}" + (f" {src.model}" if src.model else "")
    return PreparedRecording(session.id, name, body, src.tools, clean, recording_summary(session))


def save_recording(store: Store, session: LiveSession, forwarded_secrets: list[str]) -> str:
    """Save ``session`` as a recording, blocking; returns its id (also kept on the session's source)."""
    prepared = prepare_recording(session, forwarded_secrets)
    rid = prepared.write(store)
    session.live_source.recording, session.live_source.recording_download = rid, prepared.meta["download"]
    return rid


def redacted_recording(stored: StoredSource) -> tuple[bytes, str, str]:
    """``(body, media type, file suffix)`` of a recording's redacted reproducer
    (:func:`toollatch.redaction.export.redact_capture` of what it replays: a non-streaming JSON body
    as the stream that would have carried it). Every string value of argument text and
    every text delta is masked, and every scalar (keys, numbers, literals) of a call that
    did not commit; fragment boundaries and byte lengths stay, so it assembles to the same
    verdicts. Raises ``CaptureError``/``ValueError`` if unreadable."""
    try:  # the tools the stream was judged by: a call that failed its schema did not commit
        registry = registry_from_tools(stored.tools) if stored.tools else None
    except RegistryError:
        registry = None
    body = redact_capture(replay_bytes(stored), stored.name, stored.meta.get("dialect"), registry=registry)
    if body.lstrip()[:1] == b"{":
        return body, "application/x-ndjson", "redacted.jsonl"
    return body, "text/event-stream", "redacted.sse"


def recording_summary(session: LiveSession) -> dict[str, Any]:
    """What the store indexes for search (the keys of :func:`toollatch.web.triage.ingest.summary`):
    tool names, verdicts (states and reason codes) and quirks. Never argument text."""
    results = session.pipeline.results()
    calls = [c for r in results for c in r.calls]
    verdicts = {c.state.value for c in calls} | {(c.reason or "").split(":", 1)[0] for c in calls if c.reason}
    return {
        "tools": sorted({c.name for c in calls if c.name}),
        "verdicts": sorted(verdicts),
        "quirks": sorted({q for r in results for q in r.quirks}),
        "dialect": session.pipeline.dialect,
        "events": session.position,
        "streams": len(results),
        "calls": len(calls),
        "ends": [r.end for r in results],
    }


def replay_bytes(stored: StoredSource) -> bytes:
    """What a recording replays: its bytes, or for a non-streaming JSON body the stream
    that would have carried it."""
    body = stored.body or b""
    dialect = stored.meta.get("dialect")
    if not stored.meta.get("streaming") and str(stored.meta.get("content_type") or "").startswith("application/json"):
        wire, _ = retell_body(dialect, body, stored.name)
        return body if wire is None else wire  # unreadable: the bytes, which fail to read the same way
    return body


def recording_source(stored: StoredSource, config: Any) -> LoadedSource:
    """A replayable source from a stored recording (same verdicts as the live session)."""
    data = replay_bytes(stored)
    registry = usable_registry(stored.tools) if stored.tools else None
    tools = stored.tools if registry is not None else None  # as live: tools that cannot be used check nothing
    count, dialect = check(data, stored.name, config, registry)
    cancel_after = stored.meta.get("cancel_after") if stored.meta.get("end") == "cancelled" else None
    if not data:
        raise SourceError("The recording has no bytes to replay.", status=422)
    return LoadedSource(
        "capture",
        f"recording {stored.id}",
        f"Recording: {stored.name}",
        f"A live {dialect or 'provider'} stream recorded by the proxy, replayed through the assembler.",
        data,
        count,
        dialect,
        tools,
        cancel_after if isinstance(cancel_after, int) else None,
        times=stored_times(stored, len(data)),
    )


def stored_times(stored: StoredSource, size: int | None = None) -> ChunkTimes | None:
    """A recording's chunk times fitted to ``size`` bytes (its body's by default: a redacted
    or re-told body keeps the times, chunk ends scaled); None when it holds none."""
    try:
        times = ChunkTimes.from_json(stored.meta["chunk_times"]) if stored.meta.get("chunk_times") else None
    except TimingError:
        return None
    return None if times is None else times.fit(len(stored.body or b"") if size is None else size)
