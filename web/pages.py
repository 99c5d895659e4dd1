"""HTML routes: the source list, starting sessions (demo, capture, upload), the session page
and its controls.

Forms work without JavaScript (POST, then ``303 See Other``); the session controls are
also sent by htmx and by ``static/app.js`` (keyboard shortcuts, the timeline scrubber)
with ``HX-Request: true``, which gets ``204 No Content`` because the WebSocket carries the
update. Every input problem becomes a page with a message and a 4xx status, never a 500.

Control actions (form field ``action``): ``play``, ``pause``, ``toggle``, ``step``,
``back``, ``seek`` (with ``position``, 0 … total events), ``restart``, ``cancel``,
``rate`` (with ``rate``, base events/second) and ``speed`` (with ``speed``: 0.25 … 20 or
``max``). A ``rate`` or ``speed`` field sent along with another action is applied too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from .library import receive_upload
from .render import Renderer, demo_groups
from .replay import SessionStore
from .session import Session
from .settings import FULL_SPEED, Settings, parse_speed
from .sources import SourceError, capture_list, demo_list, load_capture, load_demo
from .triage_routes import session_triage

log = logging.getLogger("toollatch.web")

#: Upload form fields other than the two files.
_MAX_FORM_FIELDS = 8


def _rate(raw: Any) -> float | None:
    """A positive finite rate from a form value, else None."""
    try:
        rate = float(raw)
    except (TypeError, ValueError):
        return None
    return rate if 0 < rate < float("inf") else None


def _start_pace(raw: Any) -> tuple[float | None, float]:
    """``(base rate, speed)`` from a start form's ``rate`` field; ``"max"`` means full speed."""
    if isinstance(raw, str) and raw.strip().lower() == "max":
        return None, FULL_SPEED
    return _rate(raw), 1.0


def _position(raw: Any) -> int | None:
    """A non-negative event position from a form value, else None."""
    try:
        value = int(str(raw))
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def build_router(settings: Settings, store: SessionStore, renderer: Renderer) -> APIRouter:
    """Routes ``/``, ``/sessions``, ``/sessions/upload``, ``/sessions/{id}``, ``/sessions/{id}/control``."""
    router = APIRouter()

    def index_page(error: str | None = None, status: int = 200, query: Mapping[str, str] | None = None) -> HTMLResponse:
        html = renderer.page(
            "index.html",
            error=error,
            query=dict(query or {}),
            groups=demo_groups(demo_list()),
            captures=capture_list(settings.captures_dir),
            captures_dir=settings.captures_dir,
            sessions=store.all()[:20],
            max_upload=settings.max_upload_bytes,
            default_rate=settings.replay_rate,
        )
        return HTMLResponse(html, status_code=status)

    def error_page(title: str, message: str, status: int) -> HTMLResponse:
        return HTMLResponse(renderer.page("error.html", title=title, message=message), status_code=status)

    def started(session: Session) -> RedirectResponse:
        return RedirectResponse(f"/sessions/{session.id}", status_code=303)

    @router.get("/", response_class=HTMLResponse)
    async def index(request: Request) -> HTMLResponse:
        return index_page(query=request.query_params)

    @router.post("/sessions")
    async def start(request: Request) -> Response:
        async with request.form(max_files=0, max_fields=_MAX_FORM_FIELDS) as form:
            kind, name = form.get("kind"), form.get("name")
            rate, speed = _start_pace(form.get("rate"))
        if not isinstance(kind, str) or not isinstance(name, str) or not name:
            return index_page("Choose a demo or a capture to replay.", 400)
        try:
            if kind == "demo":
                source = load_demo(name, settings.config)
            elif kind == "capture":
                source = load_capture(settings.captures_dir, name, settings.config)
            else:
                return index_page(f"Unknown source kind {kind!r}.", 400)
        except SourceError as exc:
            return index_page(str(exc), exc.status)
        return started(store.create(source, rate=rate, speed=speed))

    @router.post("/sessions/upload")
    async def upload(request: Request) -> Response:
        # A file or pasted text: raw SSE (curl -N / curl -i), JSON Lines, HAR, Bedrock event
        # stream. Each stream is stored (web.store) and gets its own session.
        try:
            sources, raw_rate = await receive_upload(request, settings, request.app.state.sources)
        except SourceError as exc:
            return index_page(str(exc), exc.status)
        rate, speed = _start_pace(raw_rate)
        created = [store.create(source, rate=rate, speed=speed) for source in sources]
        if len(created) == 1:
            return started(created[0])
        return RedirectResponse("/?started=" + ",".join(s.id for s in created) + "#sessions-h", status_code=303)

    @router.get("/sessions/{sid}", response_class=HTMLResponse)
    async def session_page(sid: str, request: Request) -> HTMLResponse:
        session = store.get(sid)
        if session is None:
            return error_page("Session not found", f"There is no session {sid!r}; it may have expired.", 404)
        triage = await session_triage(session, request.app.state.sources)
        return HTMLResponse(renderer.page("session.html", **renderer.session_context(session), oob=False, t=triage))

    @router.post("/sessions/{sid}/control")
    async def control(sid: str, request: Request) -> Response:
        session = store.get(sid)
        if session is None:
            return error_page("Session not found", f"There is no session {sid!r}; it may have expired.", 404)
        async with request.form(max_files=0, max_fields=_MAX_FORM_FIELDS) as form:
            action, rate, speed = form.get("action"), _rate(form.get("rate")), parse_speed(form.get("speed"))
            position = _position(form.get("position"))
        simple = {
            "play": store.play,
            "pause": store.pause,
            "toggle": store.toggle,
            "step": store.step,
            "back": store.back,
            "restart": store.restart,
            "cancel": store.cancel,
        }
        if action not in (*simple, "seek", "rate", "speed"):
            return error_page("Unknown control", f"Unknown action {action!r}.", 400)
        if action == "seek" and position is None:
            return error_page("Bad position", "Seek needs a position: a whole number of events from 0.", 400)
        if rate is not None:
            store.set_rate(session, rate)
        if speed is not None:
            store.set_speed(session, speed)
        if action == "seek" and position is not None:
            store.seek(session, position)
        elif action in simple:
            simple[str(action)](session)
        if request.headers.get("hx-request") == "true":
            return Response(status_code=204)
        return RedirectResponse(f"/sessions/{sid}", status_code=303)

    return router
