"""Live sessions: a stream arriving over the network, assembled as its bytes arrive.

A :class:`LiveSession` is a :class:`~toollatch.web.replay.session.Session` fed by the proxy (or by a direct
connection the server makes) instead of a replay runner: :meth:`LiveSession.feed_bytes`
takes each chunk exactly as received, decodes it incrementally
(:class:`~toollatch.web.live.incremental.IncrementalCapture`, the same decoding as :func:`toollatch.wire.capture.iter_capture`)
and feeds the provider events to the pipeline. The session's redacted state, renders and
WebSocket fan-out are the replay machinery's own, so the session page fills in real time.

A live session ends one of four ways (a stream that already reached its normal end
finishes complete whatever comes after): the upstream body ended (:meth:`finish`: a stream
without its normal end is truncated), the upstream dropped mid-stream (:meth:`dropped`:
truncated, open calls FAILED ``stream_truncated``), a user stop or client disconnect
(:meth:`~toollatch.web.replay.session.Session.cancel`: open calls CANCELLED with their error results), or
no stream at all (:meth:`failed`: a connect failure or an upstream 4xx/5xx).

Its pipeline runs on the wall clock (seconds since the request began), not a virtual one.
The raw bytes are kept so the session can be saved as a recording; request headers never
reach this module.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from toollatch.wire.capture import ProviderEvent
from toollatch.core.config import AssembleConfig
from toollatch.observe.metrics import Metrics
from toollatch.core.model import escape_surrogates
from toollatch.demo.mockwire import MockDialect
from toollatch.core.pipeline import Pipeline
from toollatch.core.registry import RegistryError, ToolRegistry
from toollatch.wire.retell import retell_body
from toollatch.observe.timing import ChunkTimes

from toollatch.web.live.credentials import describe_error, scrub_bytes, scrub_text, scrub_value  # describe_error: re-exported
from toollatch.web.live.incremental import IncrementalCapture
from toollatch.web.replay.session import Session, Status
from toollatch.web.triage.sources import escaped_strings, registry_from_tools
from toollatch.web.store import tool_names

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
        }


class LiveSession(Session):
    """A session fed by a live stream. ``abort`` (set by whoever drives the upstream
    request) stops it: the Stop button calls it."""

    live = True

    def __init__(self, sid: str, source: LiveSource, config: AssembleConfig, metrics: Metrics | None = None) -> None:
        self._t0 = time.monotonic()
        super().__init__(sid, source, config, 1.0, 1.0, metrics)  # type: ignore[arg-type]
        self.live_source = source
        self.abort: Callable[[], None] | None = None
        self.notify: Callable[[], None] | None = None  # set by the store: render what changed
        self._idle_watch: asyncio.Task[None] | None = None
        self.end_kind: str | None = None  # complete, truncated, dropped, cancelled, error
        self._capture = IncrementalCapture(source.name, source.secrets)
        self.status = Status.PLAYING
        #: A forwarded credential was found in what the session assembled (e.g. echoed in
        #: argument text split over fragments, which per-event scrubbing cannot see).
        self.echoed_secret = False
        #: The client was sent the whole response (the proxy forwarded the upstream's normal
        #: end); what it holds may still be being assembled. A Stop then has nothing to abort.
        self.delivered = False

    def scrubbed(self, value: Any) -> Any:
        """``value`` with every credential the request forwarded replaced by ``[redacted]``
        (:func:`toollatch.web.live.credentials.scrub_value`): applied to all the session shows or serves
        once assembled, never to the bytes the client receives."""
        if not self.live_source.secrets:
            return value
        out = scrub_value(value, list(self.live_source.secrets))
        if out != value:
            self.echoed_secret = True
        return out

    def reset(self) -> None:
        super().reset()
        self.pipeline = Pipeline(
            config=self.config,
            registry=self.source.registry(),
            clock=lambda: time.monotonic() - self._t0,
            name=self.source.name,
            metrics=getattr(self, "metrics", None),
            progress_events=self.forward_progress,
        )

    @property
    def total(self) -> int:
        return self.live_source.count

    def step(self, count: int = 1, *, sliced: bool = False) -> int:
        """Nothing to step: events arrive from the network."""
        return 0

    # ------------------------------------------------------------------ feeding

    def feed_bytes(self, chunk: bytes) -> None:
        """One chunk exactly as received: kept for the recording, decoded, assembled. Never
        raises: a fault in decoding ends the session with an error (status ERROR) naming
        the exception's type only, and the bytes are still kept."""
        self.live_source.chunks.append(chunk)
        self.live_source.size += len(chunk)
        if not self.live_source.timed_elsewhere:
            self.live_source.arrived(len(chunk))
        self.progressed()
        if self.status.done or self.upstream_error or self.live_source.json_body:
            return  # an error or JSON body is read once complete; after the end, bytes are only kept
        try:
            events = self._capture.decode(chunk)
        except Exception as exc:  # a bug must not stop the tee or the proxy; its text could quote the stream
            log.error("session %s: live decoding raised %s", self.id, type(exc).__name__)
            self._fail(f"The stream could not be decoded ({type(exc).__name__}).")
            return
        for event in events:
            self._event(event)
        self._watch_idle()

    # ------------------------------------------------------------------ idle timeout

    def _watch_idle(self) -> None:
        """Start the idle watcher once a loop is running (feeding may happen from a thread)."""
        if self._idle_watch is not None or self.status.done:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._idle_watch = loop.create_task(self._check_idle_until_done(), name=f"idle-{self.id}")

    async def _check_idle_until_done(self) -> None:
        """Apply ``assemble_idle_timeout_s`` while the stream is open: a call that receives
        nothing for that long FAILS ``idle_timeout`` even if the upstream never ends."""
        interval = min(1.0, max(0.05, self.config.assemble_idle_timeout_s / 4))
        while not self.status.done:
            await asyncio.sleep(interval)  # wall time, like the pipeline's clock
            if self.status.done:
                return
            self._guard(self.pipeline.check_idle)
            if self.pending.transitions and self.notify is not None:
                self.notify()

    def stop_watching(self) -> None:
        if self._idle_watch is not None:
            self._idle_watch.cancel()

    def set_status(self, status: Status) -> None:
        super().set_status(status)
        if status.done:
            self.stop_watching()

    @property
    def upstream_error(self) -> bool:
        """The upstream answered with an HTTP error status (4xx/5xx)."""
        return (self.live_source.http_status or 200) >= 400

    def _event(self, event: ProviderEvent) -> None:
        self.live_source.count += 1
        self.position = self.live_source.count
        self._guard(lambda: self.pipeline.feed(event))

    def finish(self) -> None:
        """The upstream body ended: assemble what is left; no normal end means truncated."""
        if self.status.done:
            return
        if self.upstream_error:
            self.failed(describe_error(self.live_source.http_status or 0, self.live_source.data))
            return
        if self.live_source.json_body:
            if not self._assemble_json():
                return
        else:
            for event in self._capture.close():
                self._event(event)
        if not self.status.done:
            self._guard(self.pipeline.close)
        end = self._stream_end()
        self._end(end if end in ("complete", "error") else "truncated")  # a provider stop is an error

    def _assemble_json(self) -> bool:
        """A non-streaming body, re-told as the stream that would have carried it; False
        (the session failed, naming what is wrong with the body) when it cannot be read."""
        dialect = self.live_source.dialect
        wire, problem = retell_body(dialect, self.live_source.data, self.live_source.name)
        if wire is None:
            self.failed(f"The non-streaming {dialect or 'provider'} response could not be read: {problem}.")
            return False
        self.live_source.wire = wire
        capture = IncrementalCapture(self.live_source.name, self.live_source.secrets)
        for event in [*capture.decode(wire), *capture.close()]:
            self._event(event)
        return True

    def dropped(self, detail: str) -> None:
        """The upstream connection broke mid-body: the stream is truncated, unless the
        provider had already ended it (then the session finishes as that stream ended)."""
        if self.status.done:
            return
        if self.provider_ended:
            self.finish()
            return
        for event in self._capture.close():
            self._event(event)
        self.error = f"The upstream connection dropped mid-stream ({detail})."
        if not self.status.done:
            self._guard(self.pipeline.close)
        self._end("dropped")

    def failed(self, message: str) -> None:
        """No stream: the upstream could not be reached or answered with an error status."""
        if self.status.done:
            return
        self.error = message
        self.end_kind = "error"
        self.set_status(Status.ERROR)

    def cancel(self, detail: str = "user stop") -> None:
        """A client disconnect or user stop. When the provider had already ended the stream
        (an SDK closes the response at ``[DONE]`` without reading the body's end), every call
        has its verdict: the session finishes as that stream ended instead."""
        if self.status.done:
            return
        if self.provider_ended:
            self.finish()
            return
        super().cancel(detail)
        self.end_kind = "cancelled"

    def _fail(self, message: str) -> None:
        """The stream could not be read or assembled further (a fault, not the upstream's)."""
        super()._fail(message)
        self.end_kind = "error"

    def _end(self, kind: str) -> None:
        self.end_kind = kind
        if not self.status.done:
            self.set_status(Status.FINISHED)

    @property
    def provider_ended(self) -> bool:
        """The provider ended the last stream itself (a normal end, a cut for length or a stop
        of its own: every call has its verdict), and no stream is open."""
        streams = self.pipeline.streams
        return bool(streams) and streams[-1].ended and self._stream_end() in ("complete", "truncated", "error")

    def _stream_end(self) -> str | None:
        return str(list(self.ends.values())[-1].kind) if self.ends else None

    # ------------------------------------------------------------------ JSON

    def to_json(self) -> dict[str, Any]:
        doc = super().to_json()
        doc["live"] = {"end": self.end_kind, "elapsed_s": round(time.monotonic() - self._t0, 3), **self.live_source.meta()}
        if self.live_source.registry_error is not None:
            doc["registry"] = f"not checked: the request's tools could not be used as a registry ({self.live_source.registry_error})"
        return self.scrubbed(doc)

    def recording_meta(self) -> dict[str, Any]:
        """What a recording keeps besides the bytes: never headers."""
        src = self.live_source
        return {
            "upstream": src.upstream,
            "endpoint": src.endpoint,
            "dialect": self.pipeline.dialect or src.dialect,
            "model": src.model,
            "streaming": src.streaming,
            "format": "json" if src.json_body else "sse",
            "http_status": src.http_status,
            "content_type": src.content_type,
            "end": self.end_kind,
            "cancel_after": self.live_source.count if self.end_kind == "cancelled" else None,
            "error": self.error,
            "session": self.id,
            "request": src.request,
            "started": src.started,
        }
