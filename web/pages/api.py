"""JSON twins of the pages: ``/api/sources``, ``/api/sessions``, ``/api/sessions/{id}``.

``POST /api/sessions`` starts a session from JSON (``{"demo": name}`` or
``{"capture": path}``, optional ``"rate"`` (base events/second, or ``"max"``),
``"speed"`` (0.25 … 20 or ``"max"``) and ``"autoplay"``) and answers ``201`` with the
session document. A value out of range is refused with ``400`` and a message naming the
range (the HTML forms clamp it instead, with a notice: :mod:`toollatch.web.replay.controls`).

A session document is paged by call (``?offset=&limit=``, defaults 0 and
:data:`~toollatch.web.replay.paging.CALLS_PAGE`, at most
:data:`~toollatch.web.replay.paging.MAX_CALLS_PAGE`; ``page`` holds the totals:
:meth:`~toollatch.web.replay.session.Session.to_json`). A session document also carries ``summary`` (one line once the session is over, else
null: :func:`~toollatch.web.pages.summary.session_summary`) and ``delivery``: renders so far and, per WebSocket viewer,
frames offered, sent, dropped (progress only) and full-state resyncs. Session documents
hold committed arguments, so they are sent as :class:`DocumentResponse` (any nesting depth).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from toollatch.core import jsontext
from toollatch.wire.untrusted import parse_json

from toollatch.web.bodies import read_capped
from toollatch.web.replay.runner import MAX_RATE, MIN_RATE, SessionStore
from toollatch.web.replay.paging import CALLS_PAGE, MAX_CALLS_PAGE
from toollatch.web.settings import FULL_SPEED, Settings, parse_speed
from toollatch.web.triage.sources import SourceError, capture_list, demo_list, load_capture, load_demo
from toollatch.web.pages.summary import session_summary
from toollatch.web.pages.timing import session_timing
from toollatch.web.triage.routes import session_triage


class DocumentResponse(JSONResponse):
    """A JSON response encoded at any nesting depth (:func:`toollatch.core.jsontext.dumps`), the
    same bytes starlette's :class:`JSONResponse` gives where that one can encode the value."""

    def render(self, content: Any) -> bytes:
        return jsontext.dumps(content, allow_nan=False, separators=(",", ":")).encode("utf-8")


#: Largest ``POST /sessions`` body: a few small fields.
MAX_CREATE_BYTES = 1024 * 1024


def page_params(request: Request) -> tuple[int, int]:
    """``offset`` and ``limit`` of a session document's page of calls (query parameters,
    whole numbers; defaults 0 and :data:`~toollatch.web.replay.paging.CALLS_PAGE`);
    :class:`ValueError` naming the parameter and its range when one is not a whole number
    in range."""
    values = []
    for name, default, low, high in (("offset", 0, 0, None), ("limit", CALLS_PAGE, 1, MAX_CALLS_PAGE)):
        raw = request.query_params.get(name)
        if raw is None:
            values.append(default)
            continue
        if not (raw.isascii() and raw.isdigit()) or int(raw) < low or (high is not None and int(raw) > high):
            top = f" to {high}" if high is not None else " or more"
            raise ValueError(f"{name} must be a whole number from {low}{top}")
        values.append(int(raw))
    return values[0], values[1]


def build_router(settings: Settings, store: SessionStore) -> APIRouter:
    router = APIRouter(prefix="/api")

    @router.get("/sources")
    async def sources() -> dict[str, Any]:
        captures = await asyncio.to_thread(capture_list, settings.captures_dir)  # a folder of any size: off the event loop
        return {
            "demos": [
                {
                    "name": d.name,
                    "title": d.title,
                    "dialect": d.dialect,
                    "description": d.description,
                    "events": d.events,
                    "bytes": len(d.wire),
                    "cancel_after": d.cancel_after,
                    "expected": list(d.expected),
                    "expected_end": d.expected_end,
                }
                for d in demo_list()
            ],
            "captures_dir": str(settings.captures_dir) if settings.captures_dir else None,
            "captures": [{"path": c.path, "bytes": c.size, "tools": c.has_tools} for c in captures],
            "max_upload_bytes": settings.max_upload_bytes,
        }

    @router.get("/sessions")
    async def sessions() -> JSONResponse:
        """A JSON array of the sessions, oldest first, each with its ``id``."""
        return JSONResponse([
            {"id": s.id, "status": s.status.value, "source": s.source.meta(), "position": s.position, "total": s.total, "speed": s.speed_value}
            for s in reversed(store.all())
        ])

    @router.get("/sessions/{sid}")
    async def session(sid: str, request: Request) -> JSONResponse:
        found = store.get(sid)
        if found is None:
            return JSONResponse({"error": f"no session {sid!r}"}, status_code=404)
        try:
            offset, limit = page_params(request)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        await session_timing(found)  # in a thread (a timed pass); to_json carries it as "timing"
        triage = await session_triage(found, request.app.state.sources)  # diagnoses, naive lane, exports
        doc = {**found.to_json(offset, limit), "summary": session_summary(found), "watchers": store.watchers(found), "delivery": store.delivery(found), "triage": triage}
        return DocumentResponse(doc)

    @router.post("/sessions")
    async def create(request: Request) -> JSONResponse:
        raw = await read_capped(request, MAX_CREATE_BYTES)
        if raw is None:
            return JSONResponse({"error": f"body over {MAX_CREATE_BYTES} bytes"}, status_code=413)
        body, problem = parse_json(raw)
        if problem is not None:
            return JSONResponse({"error": f"body must be JSON: the body is {problem}"}, status_code=400)
        if not isinstance(body, dict):
            return JSONResponse({"error": "body must be a JSON object"}, status_code=400)
        rate, speed = body.get("rate"), 1.0
        if rate == "max":
            rate, speed = None, FULL_SPEED
        if rate is not None and (not isinstance(rate, (int, float)) or isinstance(rate, bool) or not MIN_RATE <= rate <= MAX_RATE):
            return JSONResponse({"error": f"rate must be a number of events/second from {MIN_RATE:g} to {MAX_RATE:g}, or \"max\""}, status_code=400)
        if "speed" in body:
            parsed = parse_speed(body["speed"])
            if parsed is None:
                return JSONResponse({"error": "speed must be a number from 0.25 to 20, or \"max\""}, status_code=400)
            speed = parsed
        try:
            if isinstance(body.get("demo"), str):
                source = load_demo(body["demo"], settings.config)
            elif isinstance(body.get("capture"), str):
                source = await asyncio.to_thread(load_capture, settings.captures_dir, body["capture"], settings.config)  # a dry run of the whole file: off the event loop
            else:
                return JSONResponse({"error": "give 'demo' or 'capture'"}, status_code=400)
        except SourceError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        created = store.create(source, rate=float(rate) if rate is not None else None, speed=speed, autoplay=bool(body.get("autoplay", True)))
        return DocumentResponse({**created.to_json(), "url": f"/sessions/{created.id}"}, status_code=201)

    return router
