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
reach this module. What the session shows of its request is its
:class:`~toollatch.web.live.source.LiveSource`.
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
from toollatch.core.large import LARGE_PAYLOAD_CHARS, CappedPipeline
from toollatch.wire.retell import retell_capped

from toollatch.web.live.credentials import describe_error, scrub_value  # describe_error: re-exported
from toollatch.web.live.backlog import OPS_STEP, Backlog
from toollatch.web.live.incremental import IncrementalCapture
from toollatch.web.live.offload import retell_off_loop
from toollatch.web.live.source import (  # noqa: F401  (re-exported: callers import them from here too)
    ENDPOINT_DIALECTS,
    LiveSource,
    endpoint_dialect,
    request_registry,
    streams_by_endpoint,
    usable_registry,
)
from toollatch.web.replay.paging import CALLS_PAGE
from toollatch.web.replay.session import Session, Status

log = logging.getLogger("toollatch.web")

#: Provider events of a re-told non-streaming body fed per step of :meth:`LiveSession.settle`
#: before it yields to the event loop: a few milliseconds of assembly at most.
JSON_STEP_EVENTS = 32


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
        self._capture = IncrementalCapture(source.name, source.secrets, LARGE_PAYLOAD_CHARS)
        self.status = Status.PLAYING
        #: A forwarded credential was found in what the session assembled (e.g. echoed in
        #: argument text split over fragments, which per-event scrubbing cannot see).
        self.echoed_secret = False
        #: The client was sent the whole response (the proxy forwarded the upstream's normal
        #: end); what it holds may still be being assembled. A Stop then has nothing to abort.
        self.delivered = False
        #: A non-streaming body, read and re-told (:meth:`_read_json`), and how many of its events were fed.
        self._retold: tuple[list[ProviderEvent], str | None, int] | None = None
        self._fed = 0
        #: Events decoded and not yet assembled (:meth:`feed_bytes` with a ``step``).
        self.backlog = Backlog()

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
        self.pipeline = CappedPipeline(
            config=self.config,
            registry=self.source.registry(),
            clock=lambda: time.monotonic() - self._t0,
            name=self.source.name,
            metrics=getattr(self, "metrics", None),
            progress_events=self.forward_progress,
            coalesce_progress=True,  # byte counts folded once per piece of work (_take_progress), not per fragment
            keep=self.calls_followed,
        )

    def step(self, count: int = 1, *, sliced: bool = False) -> int:
        """Nothing to step: events arrive from the network."""
        return 0

    # ------------------------------------------------------------------ feeding

    def feed_bytes(self, chunk: bytes, step: int | None = None) -> None:
        """One chunk exactly as received: kept for the recording, decoded, assembled: all of
        it, or (``step``) about ``step`` ops, the rest held in :attr:`backlog` for later
        :meth:`~toollatch.web.live.backlog.Backlog.work`. Never raises: a fault in decoding
        ends the session with an error (status ERROR) naming the exception's type only, and
        the bytes are still kept."""
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
        self.backlog.extend(events)
        self.backlog.work(self, step)
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
        """The upstream body ended: assemble what is left; no normal end means truncated.
        A non-streaming body not yet read (:meth:`settle` reads it off the event loop) is
        read and assembled here at once."""
        if self.status.done:
            return
        if self.upstream_error:
            self.failed(describe_error(self.live_source.http_status or 0, self.live_source.data))
            return
        if self.live_source.json_body:
            if self._retold is None:
                self._retold = self._read_json()
            if not self._feed_json(self._retold, len(self._retold[0])):
                return
        else:
            self.backlog.extend(self._capture.close())
            self.backlog.work(self)
        self._close_stream()

    async def settle(self, step: int = JSON_STEP_EVENTS) -> None:
        """:meth:`finish`, never holding the event loop for long: events still held in the
        :attr:`backlog` are assembled :data:`~toollatch.web.live.backlog.OPS_STEP` ops at a
        time; a non-streaming body is read and re-told off the loop
        (:func:`~toollatch.web.live.offload.retell_off_loop`), and its events are assembled
        ``step`` at a time with a yield to the event loop after each step. A stop or cancel
        arriving meanwhile ends the session as it would a stream (the events fed so far
        stand). Cancelled while it yields: the rest is fed at once, then the cancellation
        goes on."""
        if self.status.done or self.upstream_error or not self.live_source.json_body:
            while self.backlog.work(self, OPS_STEP):
                if self.backlog.waiting(self):
                    await self.backlog.read_large(self)
                await asyncio.sleep(0)
            self.finish()
            return
        if self._retold is None:
            body = await asyncio.to_thread(lambda: self.live_source.data)
            retold = await retell_off_loop(self.live_source.dialect, body, self.live_source.name, self._json_calls)
            self._retold = await asyncio.to_thread(self._decode_retold, retold)
        events = self._retold[0]
        try:
            while self._fed < len(events) and not self.status.done:
                self._feed_json(self._retold, min(len(events), self._fed + step))
                if self._fed < len(events):
                    await asyncio.sleep(0)
        finally:
            self.finish()

    @property
    def _json_calls(self) -> int:
        """The calls of a non-streaming body that are re-told: every call of one body is in
        flight at once, so the ones past ``max_tool_calls_in_flight_assemble`` fail
        ``too_many_tool_calls`` anyway; the first of them is re-told (and shown failing)."""
        return self.config.max_tool_calls_in_flight_assemble + 1

    def _read_json(self) -> tuple[list[ProviderEvent], str | None, int]:
        """The body re-told (at most :attr:`_json_calls` calls) and decoded, at once."""
        return self._decode_retold(retell_capped(self.live_source.dialect, self.live_source.data, self.live_source.name, self._json_calls))

    def _decode_retold(self, retold: tuple[bytes | None, str | None, int]) -> tuple[list[ProviderEvent], str | None, int]:
        """``(events, None, untold)`` for a re-told body (``untold``: the calls left out), or
        ``([], why, 0)`` when it could not be read. Touches no other session state (the body
        has ended), so it may run in a worker thread."""
        wire, problem, untold = retold
        if wire is None:
            return [], problem or "unreadable", 0
        self.live_source.wire = wire
        capture = IncrementalCapture(self.live_source.name, self.live_source.secrets)
        return [*capture.decode(wire), *capture.close()], None, untold

    def _feed_json(self, retold: tuple[list[ProviderEvent], str | None, int], upto: int) -> bool:
        """Feed the re-told events up to index ``upto``; False (the session failed, naming
        what is wrong with the body) when the body could not be read."""
        events, problem, untold = retold
        if problem is not None:
            dialect = self.live_source.dialect
            self.failed(f"The non-streaming {dialect or 'provider'} response could not be read: {problem}.")
            return False
        if untold and self.live_source.untold_calls != untold:
            self.live_source.untold_calls = untold
            limit = self.config.max_tool_calls_in_flight_assemble
            self.set_notice(
                f"The response holds {limit + 1 + untold} tool calls, more than max_tool_calls_in_flight_assemble ({limit}): "
                f"every call past the first {limit} FAILED too_many_tool_calls; the first {limit + 1} are shown, the other {untold} are not assembled one by one."
            )
        while self._fed < upto and not self.status.done:
            self._event(events[self._fed])
            self._fed += 1
        self._take_progress()
        return True

    def _close_stream(self) -> None:
        self._take_progress()  # the last counts before the verdicts the end gives
        if not self.status.done:
            self._guard(self.pipeline.close)
        end = self._stream_end()
        self._end(end if end in ("complete", "error") else "truncated")  # a provider stop is an error

    def dropped(self, detail: str) -> None:
        """The upstream connection broke mid-body: the stream is truncated, unless the
        provider had already ended it (then the session finishes as that stream ended)."""
        if self.status.done:
            return
        if self.provider_ended:
            self.finish()
            return
        self.backlog.extend(self._capture.close())
        self.backlog.work(self)
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
        self.backlog.clear()  # events not yet assembled when the stop arrived: not assembled
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

    def to_json(self, offset: int = 0, limit: int = CALLS_PAGE) -> dict[str, Any]:
        doc = super().to_json(offset, limit)
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
