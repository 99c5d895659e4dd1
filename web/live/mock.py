"""The built-in mock provider, served: over HTTP and in-process to an ``httpx.AsyncClient``.

No API key, no network. :class:`~toollatch.web.live.mock_provider.MockProvider` builds the
replies (what the request's ``model`` and query parameters pick: see
:mod:`toollatch.web.live.mock_provider`, whose names are importable from here too);
:func:`build_router` serves them over HTTP, :func:`create_mock_app` as ``toollatch mock``
alone, and :class:`MockTransport` hands them to an ``httpx.AsyncClient`` in-process,
streaming, so the proxy talks to the mock exactly as to a remote upstream.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from toollatch.web.live.mock_provider import (  # noqa: F401  (re-exported: callers import them from here)
    ENDPOINTS,
    MOCK_REFUSED,
    UNKNOWN_MODEL_SHOWN,
    MockDrop,
    MockProvider,
    MockReply,
    error_reply,
    paced,
)

log = logging.getLogger("toollatch.mock")


# ------------------------------------------------------------------ HTTP


class MockResponse(Response):
    """Streams a :class:`MockReply`; on :class:`MockDrop` it stops without ending the body,
    so the server closes the connection mid-stream, as a dropped upstream does."""

    def __init__(self, reply: MockReply) -> None:
        super().__init__(status_code=reply.status)
        # Streamed: no Content-Length (the base class would declare 0 for the empty body).
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers.items()]
        self.reply = reply

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        try:
            async for piece in self.reply.chunks:
                await send({"type": "http.response.body", "body": piece, "more_body": True})
        except MockDrop as exc:
            log.info("%s", exc)
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def build_router(provider: MockProvider, prefix: str = "") -> APIRouter:
    """``POST {prefix}/v1/chat/completions``, ``/v1/responses``, ``/v1/messages``,
    ``GET {prefix}/v1/models`` and ``GET /api/scenarios`` (a JSON array of names)."""
    router = APIRouter()

    async def serve(request: Request) -> Response:
        path = request.url.path[len(prefix) :]
        body = await request.body()
        # off the event loop: a reply may list the captures folder and read a capture's first events
        return MockResponse(await asyncio.to_thread(provider.reply, path, body, request.query_params))

    for path in ENDPOINTS:
        router.add_api_route(prefix + path, serve, methods=["POST"], include_in_schema=False)

    @router.get(prefix + "/v1/models", include_in_schema=False)
    async def models() -> dict[str, Any]:
        names = await asyncio.to_thread(provider.scenarios)  # lists the captures folder: off the event loop
        return {"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "toollatch-mock"} for n in names]}

    @router.get("/api/scenarios", include_in_schema=False)
    async def scenarios() -> JSONResponse:
        return JSONResponse(await asyncio.to_thread(provider.scenarios))

    return router


# ------------------------------------------------------------------ in-process httpx transport


class _ReplyStream(httpx.AsyncByteStream):
    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for piece in self._chunks:
                yield piece
        except MockDrop as exc:
            raise httpx.RemoteProtocolError(f"peer closed connection without sending complete message body ({exc})") from None

    async def aclose(self) -> None:
        closer = getattr(self._chunks, "aclose", None)
        if closer is not None:
            await closer()


class MockTransport(httpx.AsyncBaseTransport):
    """An httpx transport answering from a :class:`MockProvider`, streaming, in-process."""

    def __init__(self, provider: MockProvider) -> None:
        self.provider = provider

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        if request.method == "GET" and request.url.path == "/v1/models":
            names = await asyncio.to_thread(self.provider.scenarios)  # lists the captures folder: off the event loop
            listing = {"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "toollatch-mock"} for n in names]}
            reply = MockReply(200, {"content-type": "application/json"}, paced([json.dumps(listing).encode()], 0.0, None))
        elif request.method != "POST":
            reply = error_reply("openai-chat", 405, f"The mock answers POST only, not {request.method}.")
        else:
            reply = await asyncio.to_thread(self.provider.reply, request.url.path, body, dict(request.url.params))
        extensions = {MOCK_REFUSED: True} if reply.refused else {}
        return httpx.Response(reply.status, headers=reply.headers, stream=_ReplyStream(reply.chunks), request=request, extensions=extensions)


#: What each endpoint speaks, for the listing at ``GET /``.
ENDPOINT_TITLES = {
    "openai-chat": "OpenAI Chat Completions",
    "openai-responses": "OpenAI Responses",
    "anthropic": "Anthropic Messages",
}


def endpoint_listing(provider: MockProvider) -> dict[str, Any]:
    """``GET /`` of ``toollatch mock``: its endpoints, how the model picks what is served,
    the query options, and the scenario names (a JSON object)."""
    endpoints = [{"method": "POST", "path": path, "speaks": ENDPOINT_TITLES[dialect]} for path, dialect in ENDPOINTS.items()]
    endpoints += [
        {"method": "GET", "path": "/v1/models", "speaks": "OpenAI model list: every scenario name"},
        {"method": "GET", "path": "/api/scenarios", "speaks": "a JSON array of scenario names"},
    ]
    return {
        "service": "toollatch mock provider",
        "endpoints": endpoints,
        "model": "the request's model names a scenario (or a capture's relative path); \"stream\": true gets SSE",
        "query": {
            "delay": "seconds between writes",
            "chunk": "an integer seed: re-chunk the bytes at random byte positions",
            "drop": "drop the connection after that many writes",
            "status": "answer with that HTTP error status instead",
        },
        "scenarios": provider.scenarios(),
    }


def create_mock_app(provider: MockProvider, allowed_hosts: list[str]) -> Any:
    """The mock alone (``toollatch mock``): the routes at the root, ``GET /`` listing them
    (:func:`endpoint_listing`), the ``Host`` check on."""
    from fastapi import FastAPI
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    app = FastAPI(title="toollatch mock provider", docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(build_router(provider))

    @app.get("/", include_in_schema=False)
    async def index() -> JSONResponse:
        return JSONResponse(await asyncio.to_thread(endpoint_listing, provider))

    app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)
    return app
