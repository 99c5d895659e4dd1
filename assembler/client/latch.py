"""``latch()``: the completion latch around an SDK stream, in the agent's own loop.

::

    stream = client.chat.completions.create(..., tools=tools, stream=True)
    s = latch(stream, tools=tools)
    for chunk in s:          # the SDK's own chunks, unchanged
        ...
    s.turn.committed         # calls safe to execute: call_id, name, parsed arguments
    s.turn.results           # the error results owed for the rest, one per tool_call_id
    s.turn.history()         # the finalized assistant message + results, in the dialect's shape

The source is an OpenAI or Anthropic SDK stream (``openai.Stream`` / ``AsyncStream`` of Chat
Completions chunks or Responses events, ``anthropic.Stream`` / ``AsyncStream`` or a
``MessageStream`` of Messages events), any iterable of such objects or of their JSON
``dict``, or the raw response bytes (an iterable or async iterable of ``bytes``, e.g.
``httpx.Response.iter_bytes()``; SSE, JSON Lines, AWS event stream, gzip: see
:mod:`toollatch.wire.intake`). Items are passed on unchanged; each is also turned into a
:class:`~toollatch.wire.capture.ProviderEvent` (``model_dump(by_alias=True, exclude_unset=True)``,
the JSON the provider sent) and fed to one :class:`~toollatch.core.pipeline.Pipeline`, which
detects the dialect and runs the same adapters and state machine as ``toollatch assemble``.

The turn ends when the source ends (a stream without the provider's normal end is
truncated: nothing commits), or CANCELLED when the caller stops reading before the end (a
``break``, an exception in the loop body or from the source, :meth:`Latched.close`).
``assemble_idle_timeout_s`` is applied by a timer of its own (a thread for ``for``, a task
for ``async for``): an open call that receives nothing for that long FAILS
``idle_timeout`` without the caller polling.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

from toollatch.wire.capture import CaptureError, ProviderEvent
from toollatch.core.config import AssembleConfig
from toollatch.wire.intake import PushDecoder
from toollatch.core.pipeline import Pipeline
from toollatch.redaction.redact import AssemblyEvent
from toollatch.core.registry import BUILTIN_CLIENT_TOOLS, ToolRegistry
from toollatch.observe.telemetry import endpoint as telemetry_endpoint
from toollatch.observe.telemetry import turn_spans
from toollatch.client.turn import Turn, turn_of


def _config(config: AssembleConfig | Mapping[str, Any] | str | Path | None) -> AssembleConfig | None:
    if config is None or isinstance(config, AssembleConfig):
        return config
    if isinstance(config, (str, Path)):
        return AssembleConfig.load(Path(config))
    if isinstance(config, Mapping):
        return AssembleConfig.from_mapping(dict(config))
    raise TypeError(f"config: expected an AssembleConfig, a mapping of agent_stream_assemble keys or a YAML path, not {type(config).__name__}")


def _registry(tools: Any) -> ToolRegistry | None:
    """The tools as the SDKs take them (OpenAI Chat, Responses, Anthropic; dicts or SDK
    models). Built-in tools without a name (Responses ``{"type": "web_search"}``) run on the
    provider's side and are left out, except those the client runs (``{"type": "shell"}``,
    ``local_shell``, ``apply_patch``, ``computer``/``computer_use_preview``), registered under
    the name their calls carry; raises :class:`~toollatch.core.registry.RegistryError`."""
    if tools is None:
        return None
    if isinstance(tools, Mapping) and "tools" in tools:
        tools = tools["tools"]
    entries = [_plain(t) for t in tools]
    named = [
        t for t in entries
        if not isinstance(t, dict) or t.get("name") or isinstance(t.get("function"), dict) or t.get("type") in BUILTIN_CLIENT_TOOLS
    ]
    return ToolRegistry.from_tools(named).ensure_usable()


def _plain(item: Any) -> Any:
    """An SDK model as the JSON the provider sent (field aliases, unset fields left out)."""
    dump = getattr(item, "model_dump", None)
    if dump is not None:
        return dump(by_alias=True, exclude_unset=True)
    return item


#: Event types openai's ``chat.completions.stream()`` helper adds of its own (built from
#: the chunks it also yields as ``{"type": "chunk"}`` events): passed on, not assembled.
_HELPER_EVENTS = ("content.", "refusal.", "tool_calls.", "logprobs.")


class Latched:
    """What :func:`latch` returns: iterate it (``for`` or ``async for``) for the source's
    items, then read :attr:`turn`. Also a context manager (``with`` / ``async with``),
    which ends the turn CANCELLED if the block is left before the stream's end."""

    def __init__(self, source: Any, *, registry: ToolRegistry | None, config: AssembleConfig | None, mirror: Any = None) -> None:
        self._source = source
        self._mirror = mirror
        self._lock = threading.Lock()  # the idle timer thread and the reading thread
        self._telemetry = _telemetry(config)
        self._began_ns = time.time_ns()
        self.pipeline = Pipeline(
            config=config,
            registry=registry,
            name="<latch>",
            metrics=self._telemetry.metrics() if self._telemetry is not None else None,  # type: ignore[arg-type]
            progress_events=mirror is not None,
            emit_events=mirror is not None,
        )
        self._decoder: PushDecoder | None = None
        self._count = 0
        self._error: str | None = None
        self._turn: Turn | None = None
        self._started = False
        self._stop = threading.Event()

    # ------------------------------------------------------------------ the turn

    @property
    def turn(self) -> Turn:
        """The turn, once the source ended. Read before that (after a ``break`` out of the
        loop, or inside it), it ends the turn first: CANCELLED, every open call with its
        error result, and later items are passed on but no longer assembled."""
        if self._turn is None:
            self._finish(cancel="the caller stopped reading before the stream ended")
        assert self._turn is not None
        return self._turn

    @property
    def dialect(self) -> str | None:
        """The dialect detected so far (None until the first telling event)."""
        return self.pipeline.dialect

    @property
    def mirror_dropped(self) -> int:
        """Events not sent to the dashboard (it was down, slow or refused them)."""
        return self._mirror.dropped if self._mirror is not None else 0

    def close(self) -> None:
        """Stop: a turn not yet ended ends CANCELLED (open calls get their error results)."""
        self._finish(cancel="the caller closed the stream")

    def __enter__(self) -> "Latched":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "Latched":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ iteration

    def __iter__(self) -> Iterator[Any]:
        if not hasattr(self._source, "__iter__"):
            raise TypeError(self._not_iterable("__aiter__", "is read with 'async for', not 'for'"))
        return self._run_sync()

    def __aiter__(self) -> AsyncIterator[Any]:
        if not hasattr(self._source, "__aiter__"):
            raise TypeError(self._not_iterable("__iter__", "is read with 'for', not 'async for'"))
        return self._run_async()

    def _not_iterable(self, other: str, wrong_way: str) -> str:
        name = type(self._source).__name__
        if hasattr(self._source, other):
            return f"latch: {name} {wrong_way}"
        return f"latch: {name} cannot be iterated: pass the SDK's stream, or raw bytes such as response.iter_bytes()"

    def _run_sync(self) -> Iterator[Any]:
        self._begin()
        timer = threading.Thread(target=self._idle_thread, name="toollatch-idle", daemon=True)
        timer.start()
        ended = False
        try:
            for item in self._source:
                self._take(item)
                yield item
            ended = True
        finally:
            self._stop.set()
            self._finish(cancel=None if ended else "the caller stopped reading before the stream ended")

    async def _run_async(self) -> AsyncIterator[Any]:
        self._begin()
        timer = asyncio.get_running_loop().create_task(self._idle_task(), name="toollatch-idle")
        ended = False
        try:
            async for item in self._source:
                self._take(item)
                yield item
            ended = True
        finally:
            self._stop.set()
            timer.cancel()
            self._finish(cancel=None if ended else "the caller stopped reading before the stream ended")

    def _begin(self) -> None:
        if self._started or self._turn is not None:
            raise RuntimeError("latch: a stream can be read once")
        self._started = True
        self._began_ns = time.time_ns()

    # ------------------------------------------------------------------ feeding

    def _take(self, item: Any) -> None:
        """Feed one source item; never raises for what the provider sent."""
        if self._error is not None or self._turn is not None:
            return
        if isinstance(item, (bytes, bytearray, memoryview)):
            if self._decoder is None:
                self._decoder = PushDecoder("<latch>")
            try:
                events = self._decoder.feed(bytes(item))
            except CaptureError as exc:
                self._error = str(exc)
                return
        else:
            data = _plain(item)
            if not isinstance(data, dict):
                self._error = f"latch: item {self._count + 1} is a {type(item).__name__}, not an SDK event, a JSON object or bytes"
                return
            kind = data.get("type")
            if kind == "chunk" and isinstance(data.get("chunk"), dict):
                data = data["chunk"]  # openai's chat.completions.stream() helper: the chunk it wraps
            elif isinstance(kind, str) and kind.startswith(_HELPER_EVENTS) and "choices" not in data:
                return  # the helper's own events, made from chunks it also yields
            self._count += 1
            kind = data.get("type")
            events = [ProviderEvent(kind if isinstance(kind, str) else None, data, self._count, 0)]
        for event in events:
            self._feed(event)

    def _feed(self, event: ProviderEvent) -> None:
        with self._lock:
            if self._error is not None or self.pipeline.ended:
                return
            try:
                out = self.pipeline.feed(event)
            except CaptureError as exc:
                self._error = str(exc)
                return
            self._mirrored(out)

    def _mirrored(self, events: list[AssemblyEvent]) -> None:
        """Hand ``events`` to the dashboard mirror (under the lock: it reads the pipeline)."""
        if self._mirror is not None and events:
            self._mirror.events(events, self.pipeline)

    # ------------------------------------------------------------------ idle timeout

    def _interval(self) -> float:
        return min(1.0, max(0.05, self.pipeline.config.assemble_idle_timeout_s / 4))

    def _idle_thread(self) -> None:
        while not self._stop.wait(self._interval()):
            self._check_idle()

    async def _idle_task(self) -> None:
        while not self._stop.is_set():
            await asyncio.sleep(self._interval())
            self._check_idle()

    def _check_idle(self) -> None:
        with self._lock:
            self._mirrored(self.pipeline.check_idle() if not self.pipeline.ended else [])

    # ------------------------------------------------------------------ the end

    def _finish(self, cancel: str | None) -> None:
        with self._lock:
            if self._turn is not None:
                return
            self._stop.set()
            out: list[AssemblyEvent] = []
            if self._decoder is not None and self._error is None and cancel is None:
                try:
                    for event in self._decoder.close():
                        out += self.pipeline.feed(event)
                except CaptureError as exc:
                    self._error = str(exc)
            try:
                if cancel is not None:
                    out += self.pipeline.cancel(cancel)
                elif self.pipeline.dialect is not None or self._error is None:
                    out += self.pipeline.close()  # a stream cut by an unreadable input ends truncated
            except CaptureError as exc:
                self._error = self._error or str(exc)
            self._turn = turn_of(self.pipeline, self._error)
            self._mirrored(out)
        if self._mirror is not None:
            self._mirror.end(self._turn)
        if self._telemetry is not None:
            self._telemetry.export(turn_spans(self._turn.streams, self._began_ns, time.time_ns(), origin="latch"))


def _telemetry(config: AssembleConfig | None) -> Any:
    """The process's OpenTelemetry exporter (:mod:`toollatch.observe.otel`) when an OTLP endpoint is
    configured (``telemetry_otlp_endpoint`` or ``OTEL_EXPORTER_OTLP_*``), else None; the
    SDK is imported only then."""
    configured = config.telemetry_otlp_endpoint if config is not None else None
    if telemetry_endpoint(configured) is None:
        return None
    from toollatch.observe import otel

    return otel.for_config(configured)


def latch(
    source: Any,
    *,
    tools: Any = None,
    config: AssembleConfig | Mapping[str, Any] | str | Path | None = None,
    dashboard: str | None = None,
) -> Latched:
    """Put the completion latch around ``source``; iterate the result as you would ``source``.

    ``source``: an OpenAI or Anthropic SDK stream (sync or async), an iterable of SDK events
    or their JSON ``dict``, or raw response bytes (an iterable or async iterable of
    ``bytes``). ``tools``: the ``tools`` array sent with the request, in any shape the SDKs
    take (OpenAI Chat ``{"type": "function", "function": {...}}``, Responses
    ``{"type": "function", "name", "parameters"}``, Anthropic ``{"name", "input_schema"}``):
    names are checked and arguments validated against their JSON Schema; without it, any
    name is accepted. ``config``: an :class:`~toollatch.core.config.AssembleConfig`, a mapping of
    ``agent_stream_assemble`` keys, or a YAML file path. ``dashboard``: the URL of a running
    ``toollatch serve`` (loopback only, e.g. ``"http://127.0.0.1:8765"``) to mirror the stream
    into as a live session: names, ids, states and byte counts, and a call's arguments only
    once it committed. A dashboard that is down or slow never slows or breaks the stream:
    events it cannot take in time are dropped and counted (:attr:`Latched.mirror_dropped`).

    Raises :class:`~toollatch.core.registry.RegistryError` for unusable ``tools``,
    :class:`~toollatch.core.config.ConfigError` for a bad ``config``, ValueError for a dashboard
    URL that is not a loopback ``http://`` URL.

    With an OTLP endpoint set (``OTEL_EXPORTER_OTLP_ENDPOINT`` or the
    ``telemetry_otlp_endpoint`` setting) and the ``[otel]`` extra installed, each stream of
    the turn is exported as an OpenTelemetry span when the turn ends, with an event per call
    transition and the assembly metrics: names, ids, states, reason codes, counts, never
    argument text (docs/telemetry.md). Nothing the provider sends raises: a stream
    that cannot be read ends the turn with ``end="error"`` and :attr:`Turn.error` saying why.
    """
    registry = _registry(tools)
    settings = _config(config)
    mirror = None
    if dashboard is not None:
        from toollatch.client.mirror import Mirror  # HTTP client code, loaded only when asked for

        mirror = Mirror(dashboard, config=settings, tools=registry.names if registry is not None else None)
    return Latched(source, registry=registry, config=settings, mirror=mirror)


__all__ = ["Latched", "Turn", "latch"]
