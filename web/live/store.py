"""Live sessions in the session store, their page regions, and their recordings.

:class:`LiveSessionStore` is the app's :class:`~toollatch.web.replay.runner.SessionStore` with live
sessions added: they are created by the proxy or a direct connection, never stepped by a
replay runner, and replay controls do nothing to them except Stop, which aborts the
upstream request (through :attr:`toollatch.web.live.session.LiveSession.abort`) and cancels open calls.

:class:`LiveRenderer` renders a live session's status and controls from
``partials/_live_status.html`` and ``partials/_live_controls.html`` (a Stop button and the
recording link instead of replay controls); everything else is the replay's own partials.

:func:`save_recording` writes a finished live session to the :class:`~toollatch.web.store.Store`
as ``kind="recording"``: the request's tools and body, never a header, and the response
bytes as received (any forwarded credential replaced) only when no call left its argument
text uncommitted (:func:`download_as_received`) and no forwarded credential is in the
stream's joined text (:func:`toollatch.web.live.echo.echoed_in_stream`); otherwise the redacted
reproducer is stored and served instead (:func:`redacted_recording`). :func:`recording_source` turns a recording back into a replayable source
that reaches the same verdicts (a cancelled recording stops at the same event).
"""

from __future__ import annotations

import asyncio
import logging
import secrets as _secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toollatch.wire.capture import CaptureError
from toollatch.redaction.export import redact_capture
from toollatch.core.registry import RegistryError
from toollatch.core.pipeline import Pipeline
from toollatch.wire.retell import retell_body
from toollatch.observe.telemetry import turn_spans
from toollatch.observe.timing import ChunkTimes, TimingError

from toollatch.web.live.as_received import (  # TEXT_LEFT_ASIDE, download_as_received: re-exported
    TEXT_LEFT_ASIDE,
    check_as_received,
    download_as_received,
    redacted_in_steps,
)
from toollatch.web.live.credentials import scrub_bytes, scrub_value
from toollatch.web.live.echo import echoed_in_stream
from toollatch.web.replay.fanout import Broadcaster
from toollatch.web.live.session import LiveSession
from toollatch.web.live.source import LiveSource, usable_registry
from toollatch.web.pages.render import Renderer
from toollatch.web.replay.runner import SessionStore
from toollatch.web.replay.session import Session, Status
from toollatch.web.triage.sources import LoadedSource, SourceError, check, registry_from_tools
from toollatch.web.store import Store, StoredSource

log = logging.getLogger("toollatch.web")

_LIVE_PARTS = {"_controls.html": "_live_controls.html", "_status.html": "_live_status.html"}


def is_live(session: Session) -> bool:
    return isinstance(session, LiveSession)


class LiveRenderer(Renderer):
    """The dashboard renderer, with a live session's own status and controls, and the
    index page's live-stream section (``live_context``, set when the routes are installed)."""

    live_context: Callable[[], dict[str, Any]] | None = None

    def page(self, name: str, **context: Any) -> str:
        if name == "index.html" and self.live_context is not None:
            context = {**self.live_context(), **context}
        return super().page(name, **context)

    def session_context(self, session: Session) -> dict[str, Any]:
        return {**super().session_context(session), "live": is_live(session)}

    def _part(self, name: str, session: Session, **extra: Any) -> str:
        return super()._part(_LIVE_PARTS.get(name, name) if is_live(session) else name, session, **extra)


#: Longest a finished live session's recording waits for the other live streams to end.
RECORDING_DEFER_S = 5.0


class LiveSessionStore(SessionStore):
    """Replay sessions plus live ones. ``recordings`` (set by the app) saves finished live sessions."""

    recordings: Store | None = None
    #: Called when a live session's recording is saved and no live stream is playing any
    #: more (set by the app: a full garbage collection while nothing is forwarded).
    on_idle: Callable[[], None] | None = None
    _saving = 0  # recordings being checked and saved
    #: Where finished live sessions are exported as OpenTelemetry spans (set by the app when
    #: an OTLP endpoint is configured: :func:`toollatch.observe.otel.for_config`), else None.
    telemetry: Any = None

    def create_live(self, source: LiveSource, session_class: type[LiveSession] = LiveSession) -> LiveSession:
        """A new live session (of ``session_class``), registered with its broadcaster, status PLAYING."""
        self._evict()
        sid = _secrets.token_hex(4)
        while sid in self._sessions:
            sid = _secrets.token_hex(4)
        session = session_class(sid, source, self.settings.config, self.metrics)
        self._sessions[sid] = session
        self._hubs[sid] = Broadcaster(
            session,
            self.renderer,
            max_per_second=self.settings.max_renders_per_second,
            capacity=self.settings.viewer_queue_frames,
            clock=self._clock,
            sleep=self._sleep,
        )
        session.notify = lambda: self.flush(session)
        log.info("session %s: live from %s %s", sid, source.upstream, source.endpoint)
        return session

    async def shutdown(self) -> None:
        for session in self.live_sessions():
            session.stop_watching()
        await super().shutdown()

    def _evict(self) -> None:
        """Drop the oldest idle sessions beyond ``max_sessions``; a live stream is never idle."""
        for sid in list(self._sessions):
            if len(self._sessions) < self.settings.max_sessions:
                return
            session = self._sessions[sid]
            if is_live(session) and not session.status.done:
                continue
            if sid not in self._tasks and sid not in self._seeks and not self._hubs[sid].viewers:
                del self._sessions[sid]
                self._hubs.pop(sid).close()

    def forget(self, session: LiveSession) -> None:
        """Drop a live session before it is shown or recorded (the built-in mock refused its
        request: the client has the answer, nothing was streamed worth replaying)."""
        session.stop_watching()
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
            self._hubs.pop(session.id).close()

    def live_sessions(self) -> list[LiveSession]:
        """Live sessions, newest first."""
        return [s for s in self.all() if isinstance(s, LiveSession)]

    # ------------------------------------------------------------------ controls

    def cancel(self, session: Session) -> None:
        """Stop: a live session aborts its upstream request and the client's stream. Once
        the client was sent the whole response (:attr:`~toollatch.web.live.session.LiveSession.delivered`),
        there is nothing left to stop: the session ends as what was forwarded ends, never
        CANCELLED while the agent holds every call complete."""
        if not isinstance(session, LiveSession):
            super().cancel(session)
            return
        if session.delivered:
            self.flush(session)
            return
        abort, session.abort = session.abort, None
        session.cancel("user stop")
        if abort is not None:
            abort()
        self.flush(session)

    async def finished(self, session: LiveSession, forwarded_secrets: list[str]) -> None:
        """A live session ended: render the end, then save the recording in a worker thread
        (a database write, with its fsync, must not stall the other streams on the loop).

        The recording is read through once (:func:`~toollatch.web.live.as_received.check_as_received`):
        that work waits until no other live stream is running, up to :data:`RECORDING_DEFER_S`
        seconds, then runs on the event loop in small steps, so a chunk another stream
        forwards meanwhile waits for one step at most. Once the last recording being saved
        is saved and no live stream is playing, :attr:`on_idle` is called."""
        self.flush(session)
        self._export(session)
        if self.recordings is None or not session.live_source.size:
            return
        self._saving += 1
        try:
            await self._save_recording(session, forwarded_secrets)
        finally:
            self._saving -= 1
        if self.on_idle is not None and not self._saving and not self._others_playing(session):
            self.on_idle()

    def _export(self, session: LiveSession) -> None:
        """Each stream of a finished live session as a span (docs/telemetry.md); a session
        mirrored from an agent's ``latch()`` is left to that process's own telemetry."""
        if self.telemetry is None or not isinstance(session.pipeline, Pipeline):
            return
        results = session.pipeline.results()
        if results:
            start_ns = int(session.live_source.started * 1e9)
            self.telemetry.export(turn_spans(results, start_ns, time.time_ns(), origin="serve"))

    async def _save_recording(self, session: LiveSession, forwarded_secrets: list[str]) -> None:
        waited = 0.0
        while waited < RECORDING_DEFER_S and self._others_playing(session):
            await asyncio.sleep(0.05)
            waited += 0.05
        try:  # the recording is read through once, in steps between the other streams' chunks
            as_received = await check_as_received(session)
        except Exception as exc:  # never a 500: the redacted download is always safe
            log.error("session %s: recording not checked (%s)", session.id, type(exc).__name__)
            as_received = False
        reproducer = None
        src = session.live_source
        secrets = sorted({*src.secrets, *forwarded_secrets}, key=len, reverse=True)
        if not session.echoed_secret and secrets:  # echoed in pieces no single event holds
            try:
                session.echoed_secret = await asyncio.to_thread(echoed_in_stream, src.stream_data, src.name, session.pipeline.dialect, secrets)
            except Exception as exc:  # never a 500, never the bytes: the reproducer is kept
                log.error("session %s: joined text not checked (%s)", session.id, type(exc).__name__)
                session.echoed_secret = True
        if session.echoed_secret or not as_received:  # the recording keeps the redacted reproducer: made in steps too
            try:
                reproducer = await redacted_in_steps(src.stream_data, src.name, session.pipeline.dialect, judged_by=session.pipeline)
            except (CaptureError, ValueError, RecursionError):
                reproducer = b""
        prepared = prepare_recording(session, forwarded_secrets, as_received, reproducer)
        try:
            session.live_source.recording = await asyncio.to_thread(prepared.write, self.recordings)
            session.live_source.recording_download = prepared.meta["download"]
        except Exception as exc:  # a full disk must not break the client's response
            log.error("session %s: recording not saved (%s)", session.id, type(exc).__name__)
        session.pending.status = session.pending.controls = True
        self.flush(session)

    def _others_playing(self, session: LiveSession) -> bool:
        return any(s is not session and s.status is Status.PLAYING for s in self.live_sessions())

    def play(self, session: Session) -> None:
        if not is_live(session):
            super().play(session)

    def pause(self, session: Session) -> None:
        if not is_live(session):
            super().pause(session)

    def step(self, session: Session, count: int = 1) -> None:
        if not is_live(session):
            super().step(session, count)

    def seek(self, session: Session, target: int, *, resume: bool = True) -> None:
        if not is_live(session):
            super().seek(session, target, resume=resume)

    def restart(self, session: Session) -> None:
        if not is_live(session):
            super().restart(session)

    def set_rate(self, session: Session, rate: float) -> None:
        if not is_live(session):
            super().set_rate(session, rate)

    def set_speed(self, session: Session, speed: float) -> None:
        if not is_live(session):
            super().set_speed(session, speed)


# ------------------------------------------------------------------ recordings


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


def prepare_recording(
    session: LiveSession, forwarded_secrets: list[str], as_received: bool | None = None, reproducer: bytes | None = None
) -> PreparedRecording:
    """The recording of a finished ``session``: its bytes (scrubbed of any forwarded credential),
    request tools, metadata and search summary. Never a header. ``as_received``: the
    answer of :func:`download_as_received`, computed here when not given; ``reproducer``:
    the redacted reproducer of the session's stream (:func:`~toollatch.web.live.as_received.redacted_in_steps`,
    ``b""`` when it cannot be made), kept instead of the bytes when a forwarded credential
    was echoed in argument text, made here when needed and not given."""
    secrets = sorted({*session.live_source.secrets, *forwarded_secrets}, key=len, reverse=True)
    raw = b"".join(session.live_source.chunks)
    body, redacted = scrub_bytes(raw, secrets)
    meta = session.recording_meta()
    if as_received is None:
        as_received = download_as_received(session)
        if not session.echoed_secret and secrets:
            session.echoed_secret = echoed_in_stream(session.live_source.stream_data, session.live_source.name, session.pipeline.dialect, secrets)
    meta["download"] = "as_received" if as_received else "redacted"
    if redacted:
        meta["redacted"] = "a forwarded credential appeared in the body and was replaced"
    if session.echoed_secret or not as_received:
        # A call did not commit (its text is never kept), or a credential was echoed split
        # over chunks no single one holds whole: keep the reproducer (argument strings and
        # text masked, every scalar of a call that did not commit too; same verdicts)
        # instead of the bytes, in the database as on every download.
        if reproducer is None:
            try:
                reproducer = redact_capture(
                    session.live_source.stream_data,
                    session.live_source.name,
                    session.pipeline.dialect,
                    registry=session.pipeline.registry,
                    config=session.pipeline.config,
                )
            except (CaptureError, ValueError):
                reproducer = b""
        body = scrub_bytes(reproducer, secrets)[0]
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
