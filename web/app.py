"""The dashboard app factory and runner.

``create_app(settings)`` wires templates, static files, the session store, routes and the
local-only guards. Templates and static files are found next to this package when it is
installed as a wheel (``toollatch/web/templates``, ``toollatch/web/static``), else at the
repository's top level (``templates/``, ``static/``: an editable install).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.middleware.trustedhost import TrustedHostMiddleware

from toollatch.observe import otel

from toollatch.web.pages import api, follow, observe, routes as pages
from toollatch.web.triage import library, routes as triage_routes
from toollatch.web.live import mirror
from toollatch.web.replay import ws
from toollatch.web.replay.fanout import Clock, Sleep
from toollatch.web.security import NoFramingMiddleware, SameOriginMiddleware, client_disconnected
from toollatch.web.server import SERVER_OPTIONS, DateMiddleware
from toollatch.web.live.routes import install as install_live
from toollatch.web.live.store import LiveRenderer, LiveSessionStore
from toollatch.web.loop_lag import lag_histogram, watch_loop
from toollatch.web.settings import Settings
from toollatch.web.store import Store

log = logging.getLogger("toollatch.web")

_PACKAGE_DIR = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """``toollatch/web/<name>`` when installed as a wheel, else ``<repo>/<name>`` (an editable install)."""
    installed = _PACKAGE_DIR / name
    return installed if installed.is_dir() else _PACKAGE_DIR.parent / name


#: Paths whose errors stay JSON whatever the client accepts: the JSON API, the proxy and the
#: mock (agents and SDKs), the WebSocket and static files.
_MACHINE_PREFIXES = ("/api/", "/proxy/", "/mock/", "/ws/", "/static/", "/v1/")
_ERROR_TITLES = {404: "Page not found", 405: "Method not allowed"}


def wants_html(request: Request) -> bool:
    """A browser asking for a page: ``Accept`` names ``text/html`` and the path is not an API's."""
    path = request.url.path
    return "text/html" in request.headers.get("accept", "") and not path.startswith(_MACHINE_PREFIXES) and path != "/metrics"


#: Collections of the middle generation between two automatic full collections (CPython's
#: default is 10): with the start-up heap frozen, a full collection still walks every
#: session kept (tens of milliseconds); the server runs one itself whenever no live stream
#: is being forwarded (:func:`collect_between_streams`), so one seldom falls amid them.
FULL_COLLECTION_AFTER = 100


def freeze_startup_heap() -> None:
    """Collect, then exempt every object alive now from the cyclic garbage collector
    (``gc.freeze``): the modules, classes, functions and tables a started server holds
    (some 100,000 objects) are never garbage, yet each full (generation 2) collection
    walked them all, a pause of 40-150 ms of the event loop, and of every stream it
    forwards. Objects made afterwards (sessions, their pipelines) are collected as usual;
    automatic full collections come after :data:`FULL_COLLECTION_AFTER` younger ones."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_AFTER)


def collect_between_streams() -> None:
    """A full collection while no live stream is forwarded (the last one just ended): the
    garbage of evicted sessions goes, and an automatic one is further away."""
    gc.collect()


def create_app(
    settings: Settings | None = None, *, sleep: Sleep = asyncio.sleep, clock: Clock = time.monotonic, freeze_heap: bool = False
) -> FastAPI:
    """The dashboard as an ASGI app.

    ``sleep`` paces replays and deferred renders (``await sleep(seconds)``) and ``clock``
    (seconds, monotonic) times them; tests pass a virtual pair that does not wait.
    ``freeze_heap``: at start-up, :func:`freeze_startup_heap`, and
    :func:`collect_between_streams` each time the last live stream ends (for a server
    process of its own, :func:`run`; not for an app made in a process that makes many).
    """
    settings = settings or Settings()
    renderer = LiveRenderer(resource_dir("templates"), settings)  # Renderer + live sessions' regions
    store = LiveSessionStore(settings, renderer, sleep=sleep, clock=clock)  # SessionStore + live sessions
    if freeze_heap:
        store.on_idle = collect_between_streams
    # OTLP export of live streams and the metrics when an endpoint is set (docs/telemetry.md)
    store.telemetry = otel.for_config(settings.config.telemetry_otlp_endpoint)
    if store.telemetry is not None:
        store.metrics = store.telemetry.metrics(store.metrics)  # type: ignore[assignment]
    sources = Store(settings.data_dir)  # persistent uploads/recordings (SQLite under data_dir)

    lag = lag_histogram(store.metrics.registry)  # served at /metrics with the assembly metrics

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if freeze_heap:
            freeze_startup_heap()
        watcher = asyncio.get_running_loop().create_task(watch_loop(lag), name="loop-lag")
        yield
        watcher.cancel()
        await close_live()
        await store.shutdown()
        sources.close()

    app = FastAPI(title="toollatch dashboard", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.settings = settings
    app.state.store = store
    app.state.renderer = renderer
    app.state.sources = sources
    app.mount("/static", StaticFiles(directory=resource_dir("static")), name="static")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # Unknown paths (and wrong methods) get the HTML error page in a browser, JSON elsewhere.
        if not wants_html(request):
            return await http_exception_handler(request, exc)
        title = _ERROR_TITLES.get(exc.status_code, f"Error {exc.status_code}")
        if exc.status_code == 404:
            message = f"There is no page at {request.url.path[:200]}."
        elif exc.status_code == 405:
            message = f"{request.url.path[:200]} does not answer {request.method} requests."
        else:
            message = str(exc.detail)
        html = renderer.page("error.html", title=title, message=message)
        return HTMLResponse(html, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    app.add_exception_handler(ClientDisconnect, client_disconnected)  # a log line, not a traceback
    close_live = install_live(app, settings, store, renderer, sources)  # proxy, mock, direct connect, recordings
    app.include_router(pages.build_router(settings, store, renderer))
    app.include_router(follow.build_router(store, renderer))  # the session list refreshed, "watch the next live stream"
    app.include_router(api.build_router(settings, store))
    app.include_router(ws.build_router(store))
    app.include_router(mirror.build_router(store))  # streams latched in an agent's process (toollatch.latch(dashboard=))
    app.include_router(observe.build_router(settings, store.metrics, renderer))
    app.include_router(library.build_router(settings, store, sources, renderer))  # stored sources
    app.include_router(triage_routes.build_router(settings, store, sources, renderer))  # triage, exports, compare
    # Added last = outermost: the Host check runs first, then the Origin check.
    app.add_middleware(SameOriginMiddleware)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=settings.trusted_hosts())
    app.add_middleware(NoFramingMiddleware)  # every answer but the proxy's: no page in another site's frame
    app.add_middleware(DateMiddleware)  # outermost: every answer but the proxy's is dated
    return app


#: The interpreter's thread switch interval in a dashboard's server process (seconds).
SWITCH_INTERVAL_S = 0.0005


def run(settings: Settings | None = None) -> None:
    """Serve the dashboard with uvicorn on ``settings.host:settings.port`` (loopback by default)."""
    import uvicorn

    settings = settings or Settings()
    if settings.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("binding %s: the dashboard is meant for loopback only", settings.host)
    app = create_app(settings, freeze_heap=True)
    # Worker threads (a dry run, a recording's check, triage) run Python code while the
    # event loop serves sockets: after each system call the loop waits for the GIL again,
    # up to one switch interval each time (5 ms by default), so a request of a few system
    # calls waits tens of milliseconds behind one busy thread. A shorter interval bounds
    # those waits (stall_probe: worst answer to GET /api/live during a 20 MiB upload of
    # comment lines 998 -> 101 ms).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info", **SERVER_OPTIONS)  # no Date/Server of its own: toollatch.web.server
