"""Local-only guards: trusted ``Host`` (DNS rebinding) and same-origin writes and sockets.

A dashboard on 127.0.0.1 is still reachable from any web page the user visits: a hostile
page can POST a form to it, open a WebSocket to it, or rebind its own DNS name to
127.0.0.1. So:

* ``Host`` must be one of the trusted names (starlette ``TrustedHostMiddleware``);
* a WebSocket handshake or a state-changing request (POST, PUT, PATCH, DELETE) that
  carries an ``Origin`` header is refused unless that origin's ``host[:port]`` is the
  request's own ``Host``; ``Origin: null`` is refused too;
* such a request is refused as well when the browser says it came from another site or
  another origin of this site (``Sec-Fetch-Site: cross-site`` or ``same-site``, Fetch
  Metadata, W3C), ``Origin`` or not: a browser leaves ``Origin`` out in some navigations;
* no page may be framed by another (``Content-Security-Policy: frame-ancestors 'none'``
  and ``X-Frame-Options: DENY`` on every dashboard response, :class:`NoFramingMiddleware`),
  so *Delete*, *Stop* or *Reveal* cannot be clicked through an invisible frame.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from toollatch.web.server import PROXIED_PREFIX

log = logging.getLogger("toollatch.web")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


#: ``Sec-Fetch-Site`` values of requests a page of the dashboard itself did not make (a
#: browser sends ``same-origin`` for its own pages, ``none`` for a typed address or bookmark).
FOREIGN_SITES = frozenset({"cross-site", "same-site"})


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
        foreign = (headers.get("sec-fetch-site") or "").strip().lower() in FOREIGN_SITES
        if checked and (foreign or not same_origin(headers.get("origin"), headers.get("host"))):
            log.warning("refused cross-origin %s to %s", scope["type"], scope.get("path"))
            if scope["type"] == "websocket":
                await WebSocketClose(code=1008, reason="cross-origin WebSocket refused")(scope, receive, send)
            else:
                await PlainTextResponse("Cross-origin request refused.", status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)


#: Headers that keep every dashboard page out of other sites' frames.
NO_FRAMING = ((b"content-security-policy", b"frame-ancestors 'none'"), (b"x-frame-options", b"DENY"))


class NoFramingMiddleware:
    """Adds :data:`NO_FRAMING` to every HTTP response of the dashboard (a response that
    already sets one of the two keeps its own), except the proxy's (``/proxy/...``), which
    carry exactly the headers the upstream sent (:mod:`toollatch.web.server`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or str(scope.get("path", "")).startswith(PROXIED_PREFIX):
            await self.app(scope, receive, send)
            return

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in NO_FRAMING if name not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, guarded)


async def client_disconnected(request: Request, exc: Exception) -> Response:
    """The exception handler for :class:`~starlette.requests.ClientDisconnect`: a client that
    went away while its request body was read (a proxied SDK call cancelled, an upload
    abandoned) is one log line, not a traceback. Nothing is left to answer; the status
    (499, "client closed request") shows in the access log. The route's template is
    logged, not the path, which may carry a proxied provider's key."""
    route = request.scope.get("route")
    where = getattr(route, "path", None) or "a request"
    log.info("%s %s: the client disconnected before its request body was read", request.method, where)
    return Response(status_code=499)
