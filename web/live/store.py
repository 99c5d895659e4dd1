"""Live sessions in the session store, their page regions, and their recordings.

:class:`LiveSessionStore` is the app's :class:`~toollatch.web.replay.runner.SessionStore` with live
sessions added: they are created by the proxy or a direct connection, never stepped by a
replay runner, and replay controls do nothing to them except Stop, which aborts the
upstream request (through :attr:`toollatch.web.live.session.LiveSession.abort`) and cancels open calls.

:class:`LiveRenderer` renders a live session's status and controls from
``partials/_live_status.html`` and ``partials/_live_controls.html`` (a Stop button and the
recording link instead of replay controls); everything else is the replay's own partials.

:class:`LiveSessionStore` saves each finished live session as a recording
(:mod:`toollatch.web.live.recordings`, whose names are importable from here too).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from toollatch.core.pipeline import Pipeline
from toollatch.observe.telemetry import turn_spans

from toollatch.web.live.reading import (  # noqa: F401  (TEXT_LEFT_ASIDE, download_as_received: re-exported)
    TEXT_LEFT_ASIDE,
    Reading,
    download_as_received,
    read_in_steps,
)
from toollatch.web.live.session import LiveSession
from toollatch.web.live.source import LiveSource
from toollatch.web.pages.render import Renderer
from toollatch.web.replay.runner import SessionStore
from toollatch.web.replay.session import Session, Status
from toollatch.web.store import Store
from toollatch.web.live.recordings import (  # noqa: F401  (re-exported: callers import them from here too)
    PreparedRecording,
    prepare_recording,
    recording_source,
    recording_summary,
    redacted_recording,
    replay_bytes,
    save_recording,
    stored_times,
)

log = logging.getLogger("toollatch.web")

_LIVE_PARTS = {"_controls.html": "_live_controls.html", "_status.html": "_live_status.html"}


def is_live(session: Session) -> bool:
    return isinstance(session, LiveSession)


class LiveRenderer(Renderer):
    """The dashboard renderer, with a live session's own status and controls, and the
    index page's live-stream section (``live_context``, set when the routes are installed)."""

    live_context: Callable[[], dict[str, Any]] | None = None

    def index_context(self) -> dict[str, Any]:
        """The live-stream section's variables (the mock's scenarios list the captures folder)."""
        return self.live_context() if self.live_context is not None else {}

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
        sid = self._new_id()
        session = session_class(sid, source, self.settings.config, self.metrics)
        self._register(session)
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

        The recording is read through once (:func:`~toollatch.web.live.reading.read_in_steps`:
        the as-received check, the search for echoed credentials and the reproducer): that
        work waits until no other live stream is running, up to :data:`RECORDING_DEFER_S`
        seconds, then runs in small steps in worker threads, so a chunk another stream
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
        secrets = sorted({*session.live_source.secrets, *forwarded_secrets}, key=len, reverse=True)
        try:  # the recording is read through once, in steps between the other streams' chunks
            reading = await read_in_steps(session, secrets)
        except Exception as exc:  # never a 500, never the bytes: the (empty) reproducer is kept
            log.error("session %s: recording not checked (%s)", session.id, type(exc).__name__)
            reading = Reading(False, session.echoed_secret or bool(secrets), b"")
        # The session has ended (nothing changes it now): its summary walks every call, so
        # it is prepared in a worker thread, like the write.
        prepared = await asyncio.to_thread(prepare_recording, session, forwarded_secrets, reading)
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
