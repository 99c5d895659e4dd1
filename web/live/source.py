"""What a live session shows of its request, and what its endpoint says about it.

:class:`LiveSource` is the source of a :class:`~toollatch.web.live.session.LiveSession`:
the upstream, endpoint, dialect and request body (never headers, never the API key), the
bytes as they arrive (with any forwarded credential replaced) and the request's tools as a
registry. The functions here read a request: which dialect an endpoint path speaks
(:func:`endpoint_dialect`), whether it streams whatever the body says
(:func:`streams_by_endpoint`), and whether its tools can be a registry
(:func:`request_registry`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from toollatch.core.model import escape_surrogates
from toollatch.core.registry import RegistryError, ToolRegistry
from toollatch.demo.mockwire import MockDialect
from toollatch.observe.timing import ChunkTimes

from toollatch.web.live.credentials import scrub_bytes, scrub_text, scrub_value
from toollatch.web.store import tool_names
from toollatch.web.triage.sources import escaped_strings, registry_from_tools

log = logging.getLogger("toollatch.web")

#: Endpoint path endings → the dialect a request there speaks.
ENDPOINT_DIALECTS: tuple[tuple[str, MockDialect], ...] = (
    ("chat/completions", "openai-chat"),
    ("responses", "openai-responses"),
    ("messages", "anthropic"),
)


def endpoint_dialect(path: str) -> MockDialect | None:
    """``v1/chat/completions`` → ``openai-chat``; None for other paths."""
    clean = path.rstrip("/")
    return next((d for suffix, d in ENDPOINT_DIALECTS if clean.endswith(suffix)), None)


def streams_by_endpoint(path: str) -> bool:
    """True for an endpoint that streams whatever the request body says: Gemini / Vertex AI
    ``models/<model>:streamGenerateContent``, whose default body (without ``alt=sse``) is one
    JSON array sent as ``application/json`` a chunk at a time, read as it arrives."""
    return path.split("?", 1)[0].rstrip("/").endswith(":streamGenerateContent")


def request_registry(tools: Any) -> tuple[ToolRegistry | None, str | None]:
    """``(registry, None)`` for a request's usable tools (any JSON shape); ``(None, why)`` when
    they cannot be a registry, ``why`` naming the tool, place and rule (:class:`RegistryError`,
    which :func:`~toollatch.web.triage.sources.registry_from_tools` raises for every fault), never a schema value."""
    if tools is None:
        return None, None
    try:
        return registry_from_tools(tools), None
    except RegistryError as exc:
        log.warning("live session: request tools not usable as a registry: %s", exc)
        return None, str(exc)


def usable_registry(tools: Any) -> ToolRegistry | None:
    """The registry of request-supplied ``tools``, or None (see :func:`request_registry`)."""
    return request_registry(tools)[0]


class LiveSource:
    """What a live session shows of its request: never headers, never the API key.

    Duck-types :class:`toollatch.web.triage.sources.LoadedSource` for the session templates and JSON twin;
    ``data`` grows as bytes arrive and ``count`` as provider events are decoded.
    ``secrets`` are the credential values the request forwarded
    (:func:`toollatch.web.live.credentials.secret_values`): should the upstream echo one, it is replaced
    by ``[redacted]`` in ``data``, in every decoded event and in the response's
    ``content_type`` (:meth:`answered`), so no page, export, report, recording or log made
    from this source carries it; should the request body hold one, it is replaced in the
    ``request`` kept (its model, title, tools) as well.
    """

    kind = "live"
    cancel_after: int | None = None
    mirrored = False  # True for a stream latched in the agent's process (toollatch.web.live.mirror)

    def __init__(
        self, name: str, *, upstream: str, endpoint: str, dialect: str | None, request: dict[str, Any] | None, secrets: list[str] | None = None
    ) -> None:
        self.name = name
        self.secrets: tuple[str, ...] = tuple(secrets or ())
        if self.secrets and request is not None:
            request = scrub_value(request, list(self.secrets))
        self.upstream = upstream
        self.endpoint = endpoint
        self.dialect = dialect
        self.request = request  # the request body (model, tools, messages): recorded
        tools = request.get("tools") if isinstance(request, dict) else None
        # The request's strings are shown and stored: a lone surrogate is escaped, as in a stream's ops.
        self.tools: list[dict[str, Any]] | None = escaped_strings(tools) if isinstance(tools, list) and tools else None
        model = request.get("model") if isinstance(request, dict) else None
        self.model = escape_surrogates(str(model)) if model is not None else None
        self.streaming = bool(isinstance(request, dict) and request.get("stream") is True) or streams_by_endpoint(endpoint)
        self.title = f"Live: {upstream} {endpoint}" + (f" · {self.model}" if self.model else "")
        self._registry, self.registry_error = request_registry(self.tools)
        if self.registry_error is not None:
            checked = f"; the request's tools could not be used as a registry ({self.registry_error}), so names and schemas are not checked."
        elif self.tools:
            checked = "; arguments are checked against the request's tools."
        else:
            checked = "; the request had no tools, so names and schemas are not checked."
        self.description = f"A live {dialect or 'provider'} stream through the proxy, assembled as its bytes arrive" + checked
        self.chunks: list[bytes] = []
        self.wire: bytes | None = None  # a non-streaming JSON body re-told as a stream, once read
        #: Tool calls of a non-streaming body past those re-told (they fail ``too_many_tool_calls``).
        self.untold_calls = 0
        self.size = 0
        self.count = 0
        self.http_status: int | None = None
        self.content_type: str | None = None
        self.recording: str | None = None  # the Store id once saved
        self.recording_download: str | None = None  # "as_received" or "redacted" (live_store.download_as_received)
        self.started = time.time()
        self._requested = time.monotonic()
        self._first_byte: float | None = None
        #: When each chunk arrived (:class:`~toollatch.observe.timing.ChunkTimes`, offsets into ``data``).
        self.times = ChunkTimes()
        #: Arrivals are recorded where the bytes arrive (the proxy's tee), not when assembled.
        self.timed_elsewhere = False

    def arrived(self, size: int, now: float | None = None) -> None:
        """``size`` bytes arrived (``now``: ``time.monotonic()`` by default): their offset
        from the first byte is kept for the recording (8 bytes a chunk)."""
        now = time.monotonic() if now is None else now
        if self._first_byte is None:
            self._first_byte = now
            self.times.first_byte_s = now - self._requested
        self.times.add(size, now - self._first_byte)

    def arrived_all(self, arrivals: list[tuple[int, float]]) -> None:
        """:meth:`arrived` of each ``(size, time.monotonic())`` pair, in order."""
        if not arrivals:
            return
        if self._first_byte is None:
            self._first_byte = arrivals[0][1]
            self.times.first_byte_s = self._first_byte - self._requested
        self.times.add_all(arrivals, self._first_byte)

    def answered(self, status: int, content_type: str | None) -> None:
        """The upstream's status and ``Content-Type`` (any forwarded credential in it replaced)."""
        self.http_status = status
        self.content_type = scrub_text(content_type, list(self.secrets)) if content_type is not None else None

    @property
    def data(self) -> bytes:
        """The bytes received so far, with any forwarded credential replaced."""
        data = b"".join(self.chunks)
        return scrub_bytes(data, list(self.secrets))[0] if self.secrets else data

    @property
    def json_body(self) -> bool:
        """A non-streaming answer: one JSON body, assembled (once complete) as the stream
        that would have carried it."""
        return (self.content_type or "").startswith("application/json") and not self.streaming

    @property
    def stream_data(self) -> bytes:
        """The stream the session assembles, for the exports and the triage: ``data``, or
        for a non-streaming JSON body the stream re-told from it (empty until it is read)."""
        if (self.http_status or 200) >= 400:
            return b""  # an upstream error body is no provider stream: never assembled or exported
        if self.json_body:
            return self.wire or b""
        return self.data

    def iter_events(self) -> Any:
        return iter(())  # a live session is never stepped through a replay

    def iter_slices(self) -> Any:
        return iter(())

    def registry(self) -> ToolRegistry | None:
        """The request's tools as a registry; None when it had none or they are not usable
        (``registry_error`` then says why)."""
        return self._registry

    def meta(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "title": self.title,
            "dialect": self.dialect,
            "size": self.size,
            "events": self.count,
            "tools": tool_names(self.tools) if self.tools is not None else None,
            "registry_error": self.registry_error,
            "cancel_after": None,
            "upstream": self.upstream,
            "endpoint": self.endpoint,
            "model": self.model,
            "streaming": self.streaming,
            "http_status": self.http_status,
            "content_type": self.content_type,
            "recording": self.recording,
            "recording_download": self.recording_download,
            "untold_calls": self.untold_calls,
        }
