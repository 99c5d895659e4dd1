"""How the dashboard is served: the uvicorn options, and the ``Date`` of its own responses.

uvicorn adds a ``Date`` and a ``Server: uvicorn`` header to every response, next to those
the app sends: a proxied answer would reach the client with two of each (the upstream's
and the dashboard's). So the dashboard runs with :data:`SERVER_OPTIONS` (uvicorn adds
neither), and :class:`DateMiddleware` dates the dashboard's own responses, leaving the
proxy's (``/proxy/...``) with exactly the headers the upstream sent.
"""

from __future__ import annotations

from email.utils import formatdate
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Keyword arguments for ``uvicorn.run`` / ``uvicorn.Config``: no header of the server's own.
SERVER_OPTIONS: dict[str, Any] = {"server_header": False, "date_header": False}
#: Paths whose responses are the upstream's, headers and all.
PROXIED_PREFIX = "/proxy/"


class DateMiddleware:
    """Adds ``Date`` (RFC 9110 IMF-fixdate, now) to each HTTP response that has none, except
    the proxy's: those carry the upstream's ``Date`` or none, as the upstream answered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or str(scope.get("path", "")).startswith(PROXIED_PREFIX):
            await self.app(scope, receive, send)
            return

        async def dated(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"date" for name, _ in headers):
                    headers.append((b"date", formatdate(usegmt=True).encode("latin-1")))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, dated)
