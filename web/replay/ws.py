"""``/ws/sessions/{id}``: live HTML updates for htmx 4's ``hx-ws`` extension.

Each message is a raw HTML string of out-of-band elements (see :mod:`toollatch.web.pages.render`); the
first one is the session's whole current state, so a late viewer catches up. Messages
are taken from the viewer's bounded queue (:class:`toollatch.web.replay.fanout.Viewer`) by this socket's
own task: a slow socket only ever delays itself, never the replay or other viewers.
Messages from the client are read only to notice the disconnect. The ``Origin`` check
happens in :class:`toollatch.web.security.SameOriginMiddleware` before this handler runs.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect

from toollatch.web.replay.runner import SessionStore


async def _until_disconnect(websocket: WebSocket) -> None:
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return


def build_router(store: SessionStore) -> APIRouter:
    router = APIRouter()

    @router.websocket("/ws/sessions/{sid}")
    async def live(websocket: WebSocket, sid: str) -> None:
        session = store.get(sid)
        if session is None:
            await websocket.close(code=1008, reason="no such session")
            return
        await websocket.accept()
        viewer = store.subscribe(session)
        closed = asyncio.ensure_future(_until_disconnect(websocket))
        try:
            while True:
                message = asyncio.ensure_future(viewer.get())
                done, _ = await asyncio.wait({message, closed}, return_when=asyncio.FIRST_COMPLETED)
                if closed in done:
                    message.cancel()
                    break
                await websocket.send_text(message.result())
        except WebSocketDisconnect:
            pass
        finally:
            store.unsubscribe(session, viewer)
            closed.cancel()

    return router
