"""Local-only guards: trusted ``Host`` (DNS rebinding) and same-origin writes and sockets.

A dashboard on 127.0.0.1 is still reachable from any web page the user visits: a hostile
page can POST a form to it, open a WebSocket to it, or rebind its own DNS name to
127.0.0.1. So:

* ``Host`` must be one of the trusted names (starlette ``TrustedHostMiddleware``);
* a WebSocket handshake or a state-changing request (POST, PUT, PATCH, DELETE) that
  carries an ``Origin`` header is refused unless that origin's ``host[:port]`` is the
  request's own ``Host``; ``Origin: null`` is refused too.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

log = logging.getLogger("toollatch.web")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def same_origin(origin: str | None, host: str | None) -> bool:
    """True when ``origin`` is absent or names the same ``host[:port]`` as the Host header."""
    if origin is None:
        return True
    if not host or origin.strip().lower() == "null":
        return False
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False
    return parts.netloc.lower() == host.strip().lower()


class SameOriginMiddleware:
    """Refuse cross-origin WebSocket handshakes and cross-origin unsafe HTTP requests."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        checked = scope["type"] == "websocket" or scope.get("method", "GET") not in SAFE_METHODS
        if checked and not same_origin(headers.get("origin"), headers.get("host")):
            log.warning("refused cross-origin %s to %s", scope["type"], scope.get("path"))
            if scope["type"] == "websocket":
                await WebSocketClose(code=1008, reason="cross-origin WebSocket refused")(scope, receive, send)
            else:
                await PlainTextResponse("Cross-origin request refused.", status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)
