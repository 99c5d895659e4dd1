"""The recording proxy: ``/proxy/<upstream>/<path>`` forwarded byte for byte, teed into a live session.

An agent under development points its SDK's ``base_url`` at
``http://127.0.0.1:8765/proxy/openai/v1`` (or ``/proxy/anthropic``). Each request is
forwarded with ``httpx.AsyncClient`` streaming to ``<base_url of the upstream>/<path>``
(``<path>`` as the client wrote it, percent-escapes and all: :mod:`toollatch.web.live.proxy_paths`);
the response goes back unbuffered with the upstream's status, content type and bytes, in
order, while each chunk is also fed to a :class:`~toollatch.web.live.session.LiveSession` whose page fills in
real time. Upstreams come from ``Settings.upstreams`` (``{name: base_url}``); ``openai``,
``anthropic`` and ``mock`` that are not configured go to the built-in mock provider
(:mod:`toollatch.web.live.mock`), in-process, through the same httpx client interface.

Credentials (``Authorization``, ``x-api-key``, ``api-key``, ``x-goog-api-key``, cookies,
any header named like a key, token, secret or session, and every query value but a few
known-harmless ones: :mod:`toollatch.web.live.credentials`) are forwarded upstream and nowhere else: no
header is stored, logged, shown or recorded, query values are replaced in every URL that is
logged or shown, and should an upstream echo a forwarded credential, the live session
scrubs it from all it shows, stores or logs (the page, the JSON twin, exports, the recording). ``Accept-Encoding`` is sent as ``identity`` so the
bytes teed are the bytes the client gets (an upstream that encodes its answer anyway: the
client gets it encoded, the session its decoded content, :mod:`toollatch.web.live.tee`); the request's other headers are forwarded as the
client sent them (repeated ones repeated, in order), hop-by-hop ones left out, and the
httpx clients add none of their own (:func:`bare_client`).

Outcomes: upstream ended → the client's response ends normally and the session finishes
(complete or truncated); upstream dropped mid-body → the client's stream is aborted too
and the session ends truncated; client disconnected → the upstream request is closed and
the session ends cancelled; Stop on the session page → the upstream request is closed,
the client's stream aborted, open calls CANCELLED. Any failure before the upstream answers
(:func:`open_upstream`: a path that is not a URL → ``400``, connect failure → ``502``...)
is a JSON error in the provider's shape (:mod:`toollatch.web.live.proxy_errors`) naming the upstream, and
ends the session (ERROR); an upstream 4xx/5xx reaches the client unchanged and shows on
the session, except the built-in mock's refusal of a request it cannot serve (a model that
is no scenario, most often a real model name with no upstream configured: its 404 says what
to do, :meth:`~toollatch.web.live.mock.MockProvider.unknown_model`): that is neither kept as a session nor
recorded, a log line names it.
"""

from __future__ import annotations

import asyncio
import logging
from http.cookiejar import CookieJar, DefaultCookiePolicy
from urllib.parse import parse_qsl, unquote

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from toollatch.wire.urls import scrub_url
from toollatch.wire.untrusted import parse_json

from toollatch.web.bodies import read_capped
from toollatch.web.live.content_coding import MAX_DECODED_BYTES, CodingError, decode_body
from toollatch.web.live.credentials import (  # the credential rules, re-exported for the proxy's callers
    FORWARDED,
    install_log_filters,
    is_secret_header,
    secret_values,
)
from toollatch.web.live.session import LiveSession
from toollatch.web.live.source import LiveSource, endpoint_dialect
from toollatch.web.live.store import LiveSessionStore
from toollatch.web.live.mock import MOCK_REFUSED, MockProvider, MockTransport
from toollatch.web.live.proxy_headers import forward_headers, header_bytes, response_headers  # forward_headers: re-exported
from toollatch.web.live.proxy_paths import encode_path, split_path, wire_path  # split_path: re-exported
from toollatch.web.live.proxy_errors import control_character, error_json, error_shape  # error_shape: re-exported
from toollatch.web.settings import Settings
from toollatch.web.live.tee import Tee, TeeWorker  # TeeWorker: re-exported

log = logging.getLogger("toollatch.proxy")

#: Upstream names served by the built-in mock unless configured otherwise.
BUILTIN_UPSTREAMS = ("openai", "anthropic", "mock")
MOCK_BASE = "http://mock.toollatch.invalid"
#: Seconds: connecting, and waiting for the next chunk of a stream (models pause to think).
TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=10.0)


def cookie_jar() -> CookieJar:
    """A cookie jar that keeps nothing, for the upstream clients: each request carries the
    ``Cookie`` header its own client sent, and each ``Set-Cookie`` goes back to the client it
    answers, never further. (An ``httpx.AsyncClient``'s own jar stores every cookie an
    upstream sets and adds it to every later request that has no ``Cookie`` header: another
    agent's, or a direct connection's.)"""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


def bare_client(**options: object) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` that adds nothing of its own to a request: no default
    header (httpx's ``User-Agent: python-httpx``, ``Accept: */*``, ``Connection`` and
    ``Accept-Encoding`` would otherwise go upstream with every request whose client sent
    none), no cookie (:func:`cookie_jar`), no redirect followed. Only ``Host`` and the body's
    ``Content-Length`` are set by httpx itself."""
    client = httpx.AsyncClient(follow_redirects=False, cookies=cookie_jar(), **options)  # type: ignore[arg-type]
    client.headers.clear()
    return client


class Upstreams:
    """Where each upstream name goes, and the httpx clients that reach it
    (:func:`bare_client`: they add no header or cookie of their own)."""

    def __init__(self, settings: Settings, mock: MockProvider) -> None:
        self.configured = dict(settings.upstreams)
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=64)  # one connection per live stream
        self.http = bare_client(timeout=TIMEOUT, limits=limits)
        self.mock = bare_client(transport=MockTransport(mock), timeout=TIMEOUT, limits=limits)

    def names(self) -> list[str]:
        return list(dict.fromkeys([*self.configured, *BUILTIN_UPSTREAMS]))

    def base(self, name: str) -> str | None:
        """The base URL of ``name`` (the mock's is :data:`MOCK_BASE`), or None if unknown."""
        if name in self.configured:
            return self.configured[name].rstrip("/")
        return MOCK_BASE if name in BUILTIN_UPSTREAMS else None

    def is_mock(self, name: str) -> bool:
        return self.base(name) == MOCK_BASE

    def target(self, name: str, path: str, query: str = "", wire: str | None = None) -> tuple[httpx.AsyncClient, str] | None:
        """Client and URL for ``/proxy/<name>/<path>``; a base ending in ``/v1`` is not doubled.

        ``wire``: the path as it goes upstream, percent-encoded (the client's own bytes:
        :func:`~toollatch.web.live.proxy_paths.wire_path`). Without it, ``path`` is decoded text and stays
        a path: a ``?``, ``#`` or ``%`` in it is sent percent-encoded, never read as the start
        of a query, a fragment or an escape (:func:`split_path` decides beforehand what of a
        proxied path is its query)."""
        base = self.base(name)
        if base is None:
            return None
        wire = (encode_path(path) if wire is None else wire).lstrip("/")
        first, _, rest = wire.partition("/")
        if base.endswith("/v1") and unquote(first) == "v1":
            wire = rest
        url = f"{base}/{wire}" + (f"?{query}" if query else "")
        return (self.mock if base == MOCK_BASE else self.http), url

    async def aclose(self) -> None:
        await self.http.aclose()
        await self.mock.aclose()


def connect_error(name: str, base: str, exc: Exception) -> str:
    """The message for an upstream that cannot be reached: its name, its base URL without
    userinfo or query (:func:`~toollatch.wire.urls.scrub_url`), and the exception's type only."""
    where = "the built-in mock" if base == MOCK_BASE else scrub_url(base)
    return f"toollatch proxy: cannot reach upstream {name!r} at {where} ({type(exc).__name__})."


async def conclude(store: LiveSessionStore, session: LiveSession, outcome: str, detail: str, secrets: list[str]) -> None:
    """Apply how the upstream body ended to the session, then save its recording. A
    non-streaming body is read off the event loop and assembled in steps (:meth:`LiveSession.settle`)."""
    if outcome == "complete":
        await session.settle()
    elif outcome == "dropped":
        session.dropped(detail)
    elif outcome == "client_gone":
        session.cancel("client disconnected")
    else:
        session.cancel("user stop")
    log.info("session %s: upstream %s (%s)", session.id, outcome, session.end_kind)
    await store.finished(session, secrets)


class ProxyStream(Response):
    """Relays an upstream ``httpx.Response`` to the client chunk by chunk, teeing each
    chunk into ``session``; watches the client for a disconnect meanwhile."""

    def __init__(
        self, upstream: httpx.Response, session: LiveSession | None, store: LiveSessionStore, secrets: list[str], teer: TeeWorker
    ) -> None:
        super().__init__(status_code=upstream.status_code)
        self.teer = teer
        self.tee = Tee(session, store, upstream.headers.get("content-encoding")) if session is not None else None
        self.upstream = upstream
        self.session = session
        self.store = store
        self.secrets = secrets
        self.raw_headers = response_headers(upstream.headers.raw)  # the bytes as received

    async def _pump(self, send: Send) -> None:
        async for chunk in self.upstream.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if self.tee is not None:
                # The client's bytes go first; the copy is assembled by the tee worker.
                self.tee.append(chunk)
                self.teer.queue(self.tee)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        pump = asyncio.ensure_future(self._pump(send))
        watch = asyncio.ensure_future(_until_disconnect(receive))
        if self.session is not None:
            self.session.abort = pump.cancel
        outcome, detail = "complete", ""
        try:
            await asyncio.wait({pump, watch}, return_when=asyncio.FIRST_COMPLETED)
            if not pump.done():  # the client went away first
                pump.cancel()
                await asyncio.gather(pump, return_exceptions=True)
                outcome = "client_gone"
            elif pump.cancelled():
                outcome = "stopped"
            elif (exc := pump.exception()) is not None:
                client_side = isinstance(exc, OSError) and not isinstance(exc, httpx.HTTPError)
                outcome, detail = ("client_gone", "") if client_side else ("dropped", type(exc).__name__)
            elif self.session is not None:  # the client has the whole body: a Stop now changes nothing
                self.session.delivered, self.session.abort = True, None
        except asyncio.CancelledError:  # server shutdown
            pump.cancel()
            outcome = "stopped"
            raise
        finally:
            watch.cancel()
            if self.tee is not None:
                self.teer.discard(self.tee)
                await self.tee.drain()  # whatever was forwarded is assembled, in steps, before the end is applied
                self.tee.close(outcome == "complete")
            if self.session is not None:
                self.session.abort = None
            await self.upstream.aclose()
            if self.session is not None:
                await conclude(self.store, self.session, outcome, detail, self.secrets)
        # Anything but a normal end returns without finishing the body: the server then
        # closes the connection, so the client sees its stream broken, never "complete".


async def _until_disconnect(receive: Receive) -> Message:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return message


async def consume(upstream: httpx.Response, session: LiveSession, store: LiveSessionStore, secrets: list[str]) -> None:
    """Read an upstream response into ``session`` with no client attached (direct connect).
    Each read is assembled :data:`~toollatch.web.live.tee.TEE_STEP_BYTES` at a time with a yield to the
    event loop in between, as the proxy's tee is: a read of many events at once never holds
    up the streams the proxy forwards meanwhile."""
    outcome, detail = "complete", ""
    tee = Tee(session, store, upstream.headers.get("content-encoding"))
    try:
        async for chunk in upstream.aiter_raw():
            tee.append(chunk)
            await tee.drain()
    except asyncio.CancelledError:
        outcome = "stopped"
    except Exception as exc:  # httpx.HTTPError, or anything else the transport raised mid-body
        outcome, detail = "dropped", type(exc).__name__
    finally:
        await tee.drain()  # whatever was read is assembled, in steps, before the end is applied
        tee.close(outcome == "complete")
        await upstream.aclose()
        await conclude(store, session, outcome, detail, secrets)


async def open_upstream(
    upstreams: Upstreams, store: LiveSessionStore, name: str, method: str, path: str, query: str,
    headers: list[tuple[str, str]], body: bytes, session: LiveSession | None, wire: str | None = None,
) -> httpx.Response | JSONResponse:
    """Send the request upstream (streaming) and return the upstream's response once its
    status and headers arrived. Any failure before that ends ``session`` (status ERROR, the
    message on its page) and is answered with a JSON error in the provider's shape
    (:func:`error_json`), never raised:

    * ``400 invalid_request_error``: the request cannot be forwarded as it is: its path or
      query holds a control character (``%00``: :func:`control_character`) or is otherwise
      not a valid URL (too long: ``httpx.InvalidURL``, ``ValueError``), or its headers are
      not valid HTTP (``httpx.LocalProtocolError``);
    * ``502 upstream_unreachable``: the upstream cannot be reached or broke off before
      answering (any other ``httpx.HTTPError``: connect, TLS, timeout, protocol errors);
    * ``502 upstream_request_failed``: anything else the client or transport raised.

    Messages name the upstream and the kind of fault (exception type), never a header,
    a query value or the body. Cancelled (server shutdown): the session is cancelled and
    the cancellation goes on. ``wire``: the path as it goes upstream (:meth:`Upstreams.target`).
    """
    target = upstreams.target(name, path, query, wire)
    assert target is not None
    client, url = target
    fault = control_character(path, query)
    if fault is not None:
        message = f"toollatch proxy: the request cannot be forwarded to upstream {name!r}: {fault}."
        return await _refuse(store, session, path, 400, "invalid_request_error", message)
    try:
        request = client.build_request(method, url, headers=header_bytes(forward_headers(headers)), content=body)
        upstream = await client.send(request, stream=True)
    except asyncio.CancelledError:
        if session is not None:
            session.cancel("the request was cancelled before the upstream answered")
            store.flush(session)
        raise
    except (httpx.InvalidURL, httpx.LocalProtocolError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        where = "its headers are not valid HTTP" if isinstance(exc, httpx.LocalProtocolError) else "its path or query is not a valid URL"
        message = f"toollatch proxy: the request cannot be forwarded to upstream {name!r}: {where} ({type(exc).__name__})."
        return await _refuse(store, session, path, 400, "invalid_request_error", message)
    except httpx.HTTPError as exc:
        message = connect_error(name, upstreams.base(name) or "", exc)
        return await _refuse(store, session, path, 502, "upstream_unreachable", message)
    except Exception as exc:
        message = f"toollatch proxy: the request to upstream {name!r} failed before it answered ({type(exc).__name__})."
        return await _refuse(store, session, path, 502, "upstream_request_failed", message)
    if session is not None:
        session.live_source.answered(upstream.status_code, upstream.headers.get("content-type"))
        store.flush(session)
    return upstream


async def _refuse(store: LiveSessionStore, session: LiveSession | None, path: str, status: int, kind: str, message: str) -> JSONResponse:
    """End ``session`` with ``message`` (status ERROR) and answer the client with it."""
    log.warning("%s", message)
    if session is not None:
        session.failed(message)
        await store.finished(session, [])
    return error_json(status, kind, message, path)


def new_session(
    store: LiveSessionStore, name: str, path: str, body: bytes, secrets: list[str] | None = None,
    content_encoding: str | None = None, limit: int = MAX_DECODED_BYTES,
) -> LiveSession:
    """A live session for a request body (JSON when it parses; its ``tools`` the registry);
    ``secrets``: the credential values the request forwards, scrubbed from all it shows.
    ``content_encoding``: the request's ``Content-Encoding``; the body is decoded (to at most
    ``limit`` bytes) for the session only, and is forwarded as the client sent it."""
    return store.create_live(request_source(name, path, body, secrets, content_encoding, limit))


def request_source(
    name: str, path: str, body: bytes, secrets: list[str] | None = None,
    content_encoding: str | None = None, limit: int = MAX_DECODED_BYTES,
) -> LiveSource:
    """The :class:`LiveSource` of a request (see :func:`new_session`): its body decoded and
    parsed, its tools checked into a registry. Touches no shared state, so the proxy runs it
    in a worker thread: a large body or a large tools array is no stall of the event loop."""
    try:
        content = decode_body(body, content_encoding, limit)
    except CodingError:
        content = b""  # a coding that cannot be undone: forwarded as is, no registry
    request, _ = parse_json(content) if content else (None, None)  # not JSON: forwarded as is, no registry
    endpoint = "/" + path.lstrip("/")
    return LiveSource(f"{name}{endpoint}", upstream=name, endpoint=endpoint, dialect=endpoint_dialect(path),
                      request=request if isinstance(request, dict) else None, secrets=secrets)


def build_router(settings: Settings, store: LiveSessionStore, upstreams: Upstreams, teer: TeeWorker) -> APIRouter:
    """``/proxy/{upstream}/{path}`` for every method an SDK sends (HEAD and OPTIONS too); POSTs become live sessions."""
    router = APIRouter()

    @router.api_route("/proxy/{name}/{path:path}", methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], include_in_schema=False)
    async def proxy(name: str, path: str, request: Request) -> Response:
        if upstreams.base(name) is None:
            known = ", ".join(upstreams.names())
            return error_json(404, "unknown_upstream", f"toollatch proxy: no upstream {name!r}; configured: {known}.")
        body = await read_capped(request, settings.max_upload_bytes)
        if body is None:
            return error_json(413, "request_too_large", f"toollatch proxy: request body over {settings.max_upload_bytes} bytes.")
        try:
            path, embedded = split_path(path)
            wire = wire_path(request.scope, path)  # the client's own bytes
        except ValueError as exc:
            return error_json(400, "invalid_path", f"toollatch proxy: {exc}.")
        query = "&".join(q for q in (embedded, request.url.query) if q)
        headers = list(request.headers.items())
        secrets = secret_values(headers, parse_qsl(embedded, keep_blank_values=True) + list(request.query_params.multi_items()))
        FORWARDED.set(tuple(secrets))  # this request's context only: its log lines are scrubbed of them
        coding = request.headers.get("content-encoding")
        session = None
        if request.method == "POST":
            source = await asyncio.to_thread(request_source, name, path, body, secrets, coding, settings.max_upload_bytes)
            session = store.create_live(source)
        upstream = await open_upstream(upstreams, store, name, request.method, path, query, headers, body, session, wire)
        if isinstance(upstream, JSONResponse):
            return upstream
        if session is not None and upstream.extensions.get(MOCK_REFUSED):  # relayed as is; neither a session nor a recording
            log.warning("toollatch proxy: the built-in mock (upstream %r) answered %d to %s %s; not recorded", name, upstream.status_code, request.method, scrub_url("/" + path.lstrip("/"), limit=200))
            store.forget(session)
            session = None
        return ProxyStream(upstream, session, store, secrets, teer)

    return router

