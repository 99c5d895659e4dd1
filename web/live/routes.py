"""Routes for live streams: the proxy, the built-in mock, direct connect and recordings.

* ``/proxy/<upstream>/<path>`` — the recording proxy (:mod:`toollatch.web.live.proxy`);
* ``/mock/v1/chat/completions``, ``/mock/v1/responses``, ``/mock/v1/messages``,
  ``/mock/v1/models`` and ``GET /api/scenarios`` — the built-in mock (:mod:`toollatch.web.live.mock`);
* ``POST /connect`` — direct connect (:mod:`toollatch.web.live.connect`): the server streams from the
  upstream itself and redirects to the live session;
* ``GET /sessions/{id}/recording`` — a live session's recording: the bytes as received when
  every call committed, else its redacted reproducer (a call that did not commit never has
  its argument text served, as *Reveal text* is never offered for a live stream);
* ``GET /sessions/{id}/recording.har`` — the same bytes as a HAR 1.2 file, each chunk's
  arrival time in ``response.content._chunks`` (:mod:`toollatch.web.pages.timing`);
* ``POST /recordings/{rid}/replay`` — replay a recording (same verdicts);
* ``GET /api/live`` — the upstreams, the mock's scenarios and the live sessions.

:func:`install` adds them to the app and returns the coroutine function that closes the
httpx clients at shutdown.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from toollatch.wire.capture import CaptureError

from toollatch.web.live import mock as mock_module
from toollatch.web.live import proxy
from toollatch.web.pages.api import DocumentResponse
from toollatch.web.live.connect import ConnectError, auth_headers, build_request
from toollatch.web.live.recordings import recording_source, redacted_recording, stored_times
from toollatch.web.live.store import LiveRenderer, LiveSessionStore
from toollatch.web.settings import Settings
from toollatch.web.triage.sources import SourceError
from toollatch.web.store import Store, StoredSource
from toollatch.web.pages.timing import recording_har

log = logging.getLogger("toollatch.web")

_MAX_FORM_FIELDS = 8


def install(app: FastAPI, settings: Settings, store: LiveSessionStore, renderer: LiveRenderer, sources: Store) -> Callable[[], Awaitable[None]]:
    """Mount the live-stream routes; returns ``close()`` for the app's shutdown."""
    proxy.install_log_filters()
    provider = mock_module.MockProvider(settings.captures_dir, settings.mock_delay, settings.mock_rechunk)
    upstreams = proxy.Upstreams(settings, provider)
    store.recordings = sources
    tasks: set[asyncio.Task[None]] = set()
    app.state.upstreams = upstreams
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    renderer.live_context = lambda: {
        "proxy_base": f"http://{host}:{settings.port}/proxy",
        "live_upstreams": [{"name": n, "mock": upstreams.is_mock(n)} for n in upstreams.names()],
        "scenarios": provider.scenarios(),
        "mock_delay": settings.mock_delay,
        "mock_demo_delay": settings.mock_demo_delay,
    }
    app.state.mock = provider
    app.include_router(mock_module.build_router(provider, prefix="/mock"))
    teer = proxy.TeeWorker()
    app.include_router(proxy.build_router(settings, store, upstreams, teer))
    app.include_router(_router(settings, store, renderer, sources, upstreams, provider, tasks))

    async def close() -> None:
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await teer.aclose()
        await upstreams.aclose()

    return close


def _router(
    settings: Settings,
    store: LiveSessionStore,
    renderer: LiveRenderer,
    sources: Store,
    upstreams: proxy.Upstreams,
    provider: mock_module.MockProvider,
    tasks: set[asyncio.Task[None]],
) -> APIRouter:
    router = APIRouter()

    def error_page(title: str, message: str, status: int) -> HTMLResponse:
        return HTMLResponse(renderer.page("error.html", title=title, message=message), status_code=status)

    @router.post("/connect")
    async def connect(request: Request) -> Response:
        async with request.form(max_files=0, max_fields=_MAX_FORM_FIELDS) as form:
            fields = {k: str(form.get(k) or "") for k in ("upstream", "api", "model", "tools", "prompt", "pace")}
        name = fields["upstream"] or "mock"
        if upstreams.base(name) is None:
            return error_page("Unknown upstream", f"There is no upstream {name!r}.", 400)
        mock = upstreams.is_mock(name)
        try:
            plan = build_request(name, fields["api"] or "chat", fields["model"], fields["tools"], fields["prompt"], mock=mock)
            headers = auth_headers(name, plan.api, settings.api_key_env, mock=mock)
        except ConnectError as exc:
            return error_page("Cannot connect", str(exc), 400)
        body = json.dumps(plan.body).encode()
        secrets = proxy.secret_values(headers)
        proxy.FORWARDED.set(tuple(secrets))  # this request's context (and its reading task's): log lines scrubbed of them
        session = proxy.new_session(store, name, plan.path, body, secrets)
        # The mock at demo pace (the form's default) writes every mock_demo_delay seconds;
        # otherwise at its own pace (--mock-delay), the one agents through the proxy get.
        query = f"delay={settings.mock_demo_delay:g}" if mock and fields["pace"] == "demo" else ""
        upstream = await proxy.open_upstream(upstreams, store, name, "POST", plan.path, query, headers, body, session)
        if isinstance(upstream, httpx.Response):
            task = asyncio.get_running_loop().create_task(proxy.consume(upstream, session, store, secrets), name=f"connect-{session.id}")
            session.abort = task.cancel
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        return RedirectResponse(f"/sessions/{session.id}", status_code=303)

    async def served(sid: str) -> tuple[StoredSource, bytes, str, str] | HTMLResponse:
        """``(stored, body, media type, suffix)`` of a session's recording download, or an error page."""
        session = store.get(sid)
        rid = getattr(getattr(session, "live_source", None), "recording", None)
        stored = await sources.off_loop(sources.get, rid) if rid else None  # SQLite, a body of megabytes
        if stored is None or stored.body is None:
            return error_page("No recording", f"Session {sid!r} has no recording (yet).", 404)
        if stored.meta.get("download") != "as_received":  # a call did not commit: its text is never served
            try:
                body, media, suffix = await asyncio.to_thread(redacted_recording, stored)
            except (CaptureError, ValueError) as exc:
                return error_page("Cannot download", f"The recording of session {sid!r} cannot be redacted ({type(exc).__name__}).", 422)
            return stored, body, media, suffix
        streaming = bool(stored.meta.get("streaming"))
        media = "text/event-stream" if streaming else str(stored.meta.get("content_type") or "application/octet-stream")
        suffix = "sse" if streaming else "json" if "json" in media else "bin"
        return stored, stored.body, media.split(";")[0], suffix

    @router.get("/sessions/{sid}/recording")
    async def recording(sid: str) -> Response:
        found = await served(sid)
        if isinstance(found, HTMLResponse):
            return found
        _, body, media, suffix = found
        return Response(body, media_type=media, headers={"content-disposition": f'attachment; filename="recording-{sid}.{suffix}"'})

    @router.get("/sessions/{sid}/recording.har")
    async def recording_har_file(sid: str) -> Response:
        """The recording as HAR 1.2, each chunk's arrival time in ``response.content._chunks``."""
        found = await served(sid)
        if isinstance(found, HTMLResponse):
            return found
        stored, body, media, _ = found
        har = await asyncio.to_thread(recording_har, stored, body, media, stored_times(stored))
        return Response(har, media_type="application/json", headers={"content-disposition": f'attachment; filename="recording-{sid}.har"'})

    @router.post("/recordings/{rid}/replay")
    async def replay(rid: str, request: Request) -> Response:
        stored = await sources.off_loop(sources.get, rid)
        if stored is None or stored.kind != "recording":
            return error_page("No recording", f"There is no recording {rid!r}.", 404)
        try:  # a pass over the recording's bytes (its check): off the event loop
            source = await asyncio.to_thread(recording_source, stored, settings.config)
        except SourceError as exc:
            return error_page("Cannot replay", str(exc), exc.status)
        session = store.create(source)
        if "application/json" in request.headers.get("accept", ""):
            return DocumentResponse({**session.to_json(), "url": f"/sessions/{session.id}"}, status_code=201)
        return RedirectResponse(f"/sessions/{session.id}", status_code=303)

    @router.get("/api/live")
    async def live() -> dict[str, Any]:
        scenarios = await asyncio.to_thread(provider.scenarios)  # a walk of the captures folder: never on the event loop
        return {
            "upstreams": [{"name": n, "mock": upstreams.is_mock(n), "api_key_env": settings.api_key_env.get(n)} for n in upstreams.names()],
            "scenarios": scenarios,
            "sessions": [{"id": s.id, "status": s.status.value, "end": s.end_kind, **s.live_source.meta()} for s in store.live_sessions()],
        }

    return router

