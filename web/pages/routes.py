"""HTML routes: the source list, starting sessions (demo, capture, upload), the session page
and its controls.

Forms work without JavaScript (POST, then ``303 See Other``); the session controls are
also sent by htmx and by ``static/app.js`` (keyboard shortcuts, the timeline scrubber)
with ``HX-Request: true``, which gets ``204 No Content`` because the WebSocket carries the
update. Every input problem becomes a page with a message and a 4xx status, never a 500.

Control actions (form field ``action``): ``play``, ``pause``, ``toggle``, ``step``,
``back``, ``seek`` (with ``position``, 0 … total events), ``restart``, ``cancel``,
``rate`` (with ``rate``, base events/second: leaves the recorded pace), ``pace`` (with
``pace``: ``recorded`` or ``rate``; :mod:`toollatch.web.pages.timing`) and ``speed`` (with ``speed``: 0.25 …
20 or ``max``). ``GET /sessions/{id}/timing`` is the timing panel alone. A ``rate`` or ``speed`` field sent along with another action is applied too.
Values (:mod:`toollatch.web.replay.controls`): not a number is a ``400``; a number out of range is clamped,
and the session page shows a notice saying so until the next control.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from toollatch.web.replay.controls import BadValue, form_position, form_rate, form_speed, start_pace
from toollatch.web.triage.library import UploadError, receive_upload
from toollatch.web.pages.render import Renderer, demo_groups
from toollatch.web.replay.runner import MAX_RATE, MIN_RATE, SessionStore
from toollatch.web.replay.session import Session
from toollatch.web.settings import MAX_SPEED, MIN_SPEED, Settings
from toollatch.web.triage.sources import SourceError, capture_list, demo_list, load_capture, load_demo
from toollatch.web.pages.timing import session_timing
from toollatch.web.triage.routes import session_triage

log = logging.getLogger("toollatch.web")

#: Upload form fields other than the two files.
_MAX_FORM_FIELDS = 8


def build_router(settings: Settings, store: SessionStore, renderer: Renderer) -> APIRouter:
    """Routes ``/``, ``/sessions``, ``/sessions/upload``, ``/sessions/{id}``, ``/sessions/{id}/control``."""
    router = APIRouter()

    async def index_page(error: str | None = None, status: int = 200, query: Mapping[str, str] | None = None, paste: str = "") -> HTMLResponse:
        # the captures folder (any size), the mock's scenarios and the stored sources listed
        # (a SQLite query, which may wait for a save, in the store's own threads): read off the event loop
        captures, listed = await asyncio.to_thread(lambda: (capture_list(settings.captures_dir), renderer.index_context()))
        stored_listing = renderer.env.globals.get("stored_listing")
        stored = await stored_listing(dict(query or {})) if callable(stored_listing) else None
        html = renderer.page(
            "index.html",
            **listed,
            stored=stored,
            error=error,
            paste=paste,
            query=dict(query or {}),
            groups=demo_groups(demo_list()),
            captures=captures,
            captures_dir=settings.captures_dir,
            sessions=store.all()[:20],
            max_upload=settings.max_upload_bytes,
            default_rate=settings.replay_rate,
        )
        return HTMLResponse(html, status_code=status)

    def error_page(title: str, message: str, status: int) -> HTMLResponse:
        return HTMLResponse(renderer.page("error.html", title=title, message=message), status_code=status)

    def started(session: Session, notice: str | None = None) -> RedirectResponse:
        session.set_notice(notice)
        return RedirectResponse(f"/sessions/{session.id}", status_code=303)

    @router.get("/", response_class=HTMLResponse)
    async def index(request: Request) -> HTMLResponse:
        return await index_page(query=request.query_params)

    @router.get("/sessions")
    async def session_list() -> RedirectResponse:
        """The session list is a section of the index (a person who types /sessions means it)."""
        return RedirectResponse("/#sessions", status_code=303)

    @router.post("/sessions")
    async def start(request: Request) -> Response:
        async with request.form(max_files=0, max_fields=_MAX_FORM_FIELDS) as form:
            kind, name, raw_rate = form.get("kind"), form.get("name"), form.get("rate")
        if not isinstance(kind, str) or not isinstance(name, str) or not name:
            return await index_page("Choose a demo or a capture to replay.", 400)
        try:
            rate, speed, notice = start_pace(raw_rate)
        except BadValue as exc:
            return await index_page(str(exc), 400)
        try:
            if kind == "demo":
                source = load_demo(name, settings.config)
            elif kind == "capture":
                source = await asyncio.to_thread(load_capture, settings.captures_dir, name, settings.config)  # a dry run of the whole file: off the event loop
            else:
                return await index_page(f"Unknown source kind {kind!r}.", 400)
        except SourceError as exc:
            return await index_page(str(exc), exc.status)
        return started(store.create(source, rate=rate, speed=speed), notice)

    @router.post("/sessions/upload")
    async def upload(request: Request) -> Response:
        # A file or pasted text: raw SSE (curl -N / curl -i), JSON Lines, HAR, Bedrock event
        # stream. Each stream is stored (toollatch.web.store) and gets its own session.
        try:
            sources, (rate, speed, notice) = await receive_upload(request, settings, request.app.state.sources)
        except UploadError as exc:  # the form again, with the pasted text (escaped by the template)
            return await index_page(str(exc), exc.status, paste=exc.paste if exc.paste and exc.status != 413 else "")
        created = [store.create(source, rate=rate, speed=speed) for source in sources]
        for session in created:
            session.set_notice(notice)
        if len(created) == 1:
            return started(created[0], notice)
        return RedirectResponse("/?started=" + ",".join(s.id for s in created) + "#sessions-h", status_code=303)

    @router.get("/sessions/{sid}", response_class=HTMLResponse)
    async def session_page(sid: str, request: Request) -> HTMLResponse:
        session = store.get(sid)
        if session is None:
            return error_page("Session not found", f"There is no session {sid!r}; it may have expired.", 404)
        triage = await session_triage(session, request.app.state.sources)
        timing = await session_timing(session)
        return HTMLResponse(renderer.page("session.html", **renderer.session_context(session), oob=False, t=triage, timing=timing))

    @router.get("/sessions/{sid}/timing", response_class=HTMLResponse)
    async def timing_panel(sid: str) -> HTMLResponse:
        """The timing panel alone: a live session's page polls it until the stream ends."""
        session = store.get(sid)
        if session is None:
            return error_page("Session not found", f"There is no session {sid!r}; it may have expired.", 404)
        timing = await session_timing(session)
        return HTMLResponse(renderer.page("partials/_timing.html", **renderer.session_context(session), timing=timing))

    @router.post("/sessions/{sid}/control")
    async def control(sid: str, request: Request) -> Response:
        session = store.get(sid)
        if session is None:
            return error_page("Session not found", f"There is no session {sid!r}; it may have expired.", 404)
        async with request.form(max_files=0, max_fields=_MAX_FORM_FIELDS) as form:
            action, raw_rate, raw_speed, raw_position = form.get("action"), form.get("rate"), form.get("speed"), form.get("position")
            pace = form.get("pace")
        simple = {
            "play": store.play,
            "pause": store.pause,
            "toggle": store.toggle,
            "step": store.step,
            "back": store.back,
            "restart": store.restart,
            "cancel": store.cancel,
        }
        if action == "pace":  # the recorded pace, or back to the base rate
            store.set_pace(session, pace == "recorded")
            store.flush(session)
            return Response(status_code=204) if request.headers.get("hx-request") == "true" else RedirectResponse(f"/sessions/{sid}", status_code=303)
        if action not in (*simple, "seek", "rate", "speed"):
            return error_page("Unknown control", f"Unknown action {action!r}.", 400)
        # Not a number: 400. A number out of range: clamped, and the page says so.
        try:
            rate, rate_notice = form_rate(raw_rate)
            speed, speed_notice = form_speed(raw_speed)
            position, position_notice = form_position(raw_position, session.total) if action == "seek" else (None, None)
        except BadValue as exc:
            return error_page("Invalid control value", str(exc), 400)
        if action == "rate" and rate is None:
            return error_page("Invalid control value", f"Rate needs a value: events per second, from {MIN_RATE:g} to {MAX_RATE:,g}.", 400)
        if action == "speed" and speed is None:
            return error_page("Invalid control value", f"Speed needs a value: {MIN_SPEED:g} to {MAX_SPEED:g}, or max.", 400)
        session.set_notice(" ".join(n for n in (rate_notice, speed_notice, position_notice) if n) or None)
        if rate is not None:
            store.set_rate(session, rate)
        if speed is not None:
            store.set_speed(session, speed)
        if action == "seek" and position is not None:
            store.seek(session, position)
        elif action in simple:
            simple[str(action)](session)
        store.flush(session)  # the notice, even when nothing else changed
        if request.headers.get("hx-request") == "true":
            return Response(status_code=204)
        return RedirectResponse(f"/sessions/{sid}", status_code=303)

    return router
