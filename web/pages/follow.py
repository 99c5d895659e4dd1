"""Following sessions as they appear: the index's session list, refreshed, and "watch the
next live stream", which opens the next live session the proxy (or direct connect) starts.

* ``GET /partials/sessions`` - the index page's session list alone; the index polls it
  every 2 s, so sessions the proxy opens show up without a reload.
* ``GET /live/next`` - a page that waits for the next live session and then opens it: it
  polls ``GET /live/next/poll?after=<id>&seq=<n>``, which answers ``204`` while no live
  session newer than the page exists and ``200`` with ``HX-Redirect: /sessions/<new id>``
  once one does (the first one created after the page, if several). "Newer" is by
  creation number (:attr:`toollatch.web.replay.session.Session.seq`), so a live session the page waited
  after may be evicted meanwhile: an older one still kept is never taken for the next.
  ``after`` (the id of the newest live session when the page was made) is used only
  without ``seq``. Start it, then run the agent: its first request is shown as it streams.
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import HTMLResponse

from toollatch.web.live.store import LiveSessionStore
from toollatch.web.pages.render import Renderer

#: Sessions listed on the index page, newest first.
LISTED = 20


def build_router(store: LiveSessionStore, renderer: Renderer) -> APIRouter:
    router = APIRouter()

    def newest_live() -> tuple[str, int]:
        """Id and creation number of the newest live session (``("", 0)`` when none)."""
        live = store.live_sessions()
        return (live[0].id, live[0].seq) if live else ("", 0)

    def threshold(after: str, seq: str) -> int:
        """The creation number a live session must exceed to be "next"."""
        if seq.isascii() and seq.isdigit() and len(seq) <= 18:
            return int(seq)
        known = store.get(after[:64]) if after else None
        return known.seq if known is not None else 0

    @router.get("/partials/sessions", response_class=HTMLResponse)
    async def session_list() -> HTMLResponse:
        return HTMLResponse(renderer.page("partials/_sessions.html", sessions=store.all()[:LISTED]))

    @router.get("/live/next", response_class=HTMLResponse)
    async def follow_next() -> HTMLResponse:
        after, seq = newest_live()
        return HTMLResponse(renderer.page("follow.html", after=after, seq=seq))

    @router.get("/live/next/poll")
    async def poll(after: str = "", seq: str = "") -> Response:
        floor = threshold(after, seq)
        newer = [s for s in store.live_sessions() if s.seq > floor]  # newest first
        if newer:
            return Response(status_code=200, headers={"HX-Redirect": f"/sessions/{newer[-1].id}"})
        return Response(status_code=204)

    return router
