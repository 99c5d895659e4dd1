"""Following sessions as they appear: the index's session list, refreshed, and "watch the
next live stream", which opens the next live session the proxy (or direct connect) starts.

* ``GET /partials/sessions`` - the index page's session list alone; the index polls it
  every 2 s, so sessions the proxy opens show up without a reload.
* ``GET /live/next`` - a page that waits for the next live session and then opens it: it
  polls ``GET /live/next/poll?after=<id>``, which answers ``204`` while nothing newer
  than live session ``<id>`` exists and ``200`` with ``HX-Redirect: /sessions/<new id>``
  once one does. Start it, then run the agent: its first request is shown as it streams.
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import HTMLResponse

from .live_store import LiveSessionStore
from .render import Renderer

#: Sessions listed on the index page, newest first.
LISTED = 20


def build_router(store: LiveSessionStore, renderer: Renderer) -> APIRouter:
    router = APIRouter()

    def newest_live_id() -> str:
        live = store.live_sessions()
        return live[0].id if live else ""

    @router.get("/partials/sessions", response_class=HTMLResponse)
    async def session_list() -> HTMLResponse:
        return HTMLResponse(renderer.page("partials/_sessions.html", sessions=store.all()[:LISTED]))

    @router.get("/live/next", response_class=HTMLResponse)
    async def follow_next() -> HTMLResponse:
        return HTMLResponse(renderer.page("follow.html", after=newest_live_id()))

    @router.get("/live/next/poll")
    async def poll(after: str = "") -> Response:
        newest = newest_live_id()
        if newest and newest != after[:64]:
            return Response(status_code=200, headers={"HX-Redirect": f"/sessions/{newest}"})
        return Response(status_code=204)

    return router
