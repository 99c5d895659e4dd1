"""The built-in mock provider's replies: demo scenarios and captures as provider-exact streams.

No API key, no network. The request's ``model`` picks what is served:

* a demo scenario (``single``, ``parallel``, ``noargs``, ``oversized``, ``cancel``,
  ``truncated``, ``invalid``, ``canary``), in the dialect of the endpoint asked
  (:mod:`toollatch.demo.mockwire`): ``/v1/chat/completions`` (OpenAI Chat), ``/v1/responses``
  (OpenAI Responses), ``/v1/messages`` (Anthropic Messages);
* a capture under ``--captures`` by its relative path (``openai-chat/x.sse``), served only
  at its own dialect's endpoint (elsewhere: a clear 400).

``"stream": true`` gets SSE (``text/event-stream``), one provider event per write, paced
by ``delay`` seconds; otherwise the scenario's non-streaming body (``application/json``).
Errors use each provider's own error shape. Query parameters (the SDKs' ``default_query``):
``delay`` (seconds between writes), ``chunk`` (an integer seed: re-chunk the bytes at random
byte positions, 1–64 bytes a write), ``drop`` (drop the connection after that many writes)
and ``status`` (answer with that HTTP error status instead).

Recordings (``toollatch mock --recording FILE``, :meth:`MockProvider.add_recording`): a
HAR with the ``_chunks`` timing extension (a dashboard recording's ``.har`` download) is
served chunk for chunk at its *recorded pace*, each chunk when its recorded second comes
(``?delay=`` paces it evenly instead); a plain capture at ``delay``. A recording is asked for
by its name, and answers any model that is no scenario or capture, so an agent pointed at
the mock with its own model name gets the recorded stream, with its timing.

:class:`MockProvider` builds the replies (:class:`MockReply`); :mod:`toollatch.web.live.mock`
serves them over HTTP and in-process.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toollatch.wire.capture import DONE, CaptureError, iter_capture
from toollatch.dialects import detect
from toollatch.demo.bodies import final_response
from toollatch.demo.mockwire import (
    MOCK_DIALECTS,
    MockDialect,
    ScenarioError,
    rechunk,
    scenario_events,
    scenario_names,
    scenario_script,
    split_events,
)
from toollatch.wire.untrusted import parse_json, short

from toollatch.web.live.mock_recording import read_recording
from toollatch.web.triage.sources import capture_list

log = logging.getLogger("toollatch.mock")

#: Endpoint path (below the mock's root) → the dialect it speaks.
ENDPOINTS: dict[str, MockDialect] = {
    "/v1/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses",
    "/v1/messages": "anthropic",
}
_DIALECT_ENDPOINT = {dialect: path for path, dialect in ENDPOINTS.items()}
#: Scenario names an unknown model's answer lists (the rest: ``GET /v1/models``).
UNKNOWN_MODEL_SHOWN = 4


class MockDrop(Exception):
    """The mock drops the connection mid-stream (``?drop=N``)."""


#: The ``httpx.Response.extensions`` key :class:`MockTransport` sets (never sent on the wire)
#: when the mock refused a request it cannot serve (not an error asked for with ``?status=``).
MOCK_REFUSED = "toollatch_mock_refused"


@dataclass
class MockReply:
    """One answer: status, headers and the body as the pieces written (async, paced);
    ``refused``: an error because the request cannot be served (unknown model, endpoint...)."""

    status: int
    headers: dict[str, str]
    chunks: AsyncIterator[bytes]
    refused: bool = False


async def paced(pieces: list[bytes], delay: float, drop: int | None, open_streams: list[int] | None = None) -> AsyncIterator[bytes]:
    """``pieces`` with ``delay`` seconds between them; ``open_streams[0]`` counts bodies
    being written (so a test can see an aborted request really closed its stream)."""
    if open_streams is not None:
        open_streams[0] += 1
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        for n, piece in enumerate(pieces):
            if drop is not None and n >= drop:
                raise MockDrop(f"mock dropped the connection after {drop} writes")
            if n and delay > 0:  # on a schedule (write n at start + n × delay), so the pace never drifts
                await asyncio.sleep(max(0.0, start + n * delay - loop.time()))
            yield piece
    finally:
        if open_streams is not None:
            open_streams[0] -= 1


async def _timed(pieces: list[tuple[float, bytes]], drop: int | None, open_streams: list[int] | None = None) -> AsyncIterator[bytes]:
    """``(seconds, bytes)`` pieces, each written when its recorded second comes (from the first write)."""
    if open_streams is not None:
        open_streams[0] += 1
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        for n, (t, piece) in enumerate(pieces):
            if drop is not None and n >= drop:
                raise MockDrop(f"mock dropped the connection after {drop} writes")
            await asyncio.sleep(max(0.0, start + t - loop.time()))
            yield piece
    finally:
        if open_streams is not None:
            open_streams[0] -= 1


def error_reply(dialect: MockDialect, status: int, message: str, kind: str = "invalid_request_error", code: str | None = None) -> MockReply:
    """An error in the provider's own shape."""
    if dialect == "anthropic":
        anthropic_type = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}
        doc: dict[str, Any] = {"type": "error", "error": {"type": anthropic_type.get(status, "api_error"), "message": message}}
    else:
        doc = {"error": {"message": message, "type": kind, "param": "model" if code == "model_not_found" else None, "code": code}}
    return MockReply(status, {"content-type": "application/json"}, paced([json.dumps(doc).encode()], 0.0, None), refused=kind != "mock_error")


def _number(raw: str | None, kind: type[int] | type[float]) -> Any:
    if raw is None:
        return None
    try:
        value = kind(raw)
    except ValueError:
        return None
    return value if value >= 0 else None


@dataclass
class MockProvider:
    """Serves demo scenarios and captures; ``delay`` seconds between writes by default and
    ``rechunk`` (a seed) to re-chunk every body at random byte positions."""

    captures_dir: Path | None = None
    delay: float = 0.0
    rechunk: int | None = None
    _capture_dialects: dict[str, tuple[float, str | None]] = field(default_factory=dict)
    #: bodies being written right now (one counter in a list, shared with the generators)
    open_streams: list[int] = field(default_factory=lambda: [0])
    #: name → (dialect, timed pieces, timed): served at their recorded pace (:meth:`add_recording`)
    recordings: dict[str, tuple[str | None, list[tuple[float, bytes]], bool]] = field(default_factory=dict)

    def add_recording(self, path: Path) -> list[str]:
        """Serve the streams of a recording file (:func:`read_recording`); returns their names."""
        names = []
        for name, dialect, pieces, timed in read_recording(path):
            self.recordings[name] = (dialect, pieces, timed)
            names.append(name)
        return names

    def _recording(self, model: str) -> tuple[str | None, list[tuple[float, bytes]], bool] | None:
        """The recording ``model`` names, or the first recording for a model that is no
        scenario or capture (an agent's own model name); None without recordings."""
        if model in self.recordings:
            return self.recordings[model]
        if not self.recordings or model in scenario_names() or model in {c.path for c in capture_list(self.captures_dir)}:
            return None
        return next(iter(self.recordings.values()))

    # ------------------------------------------------------------------ what is served

    def scenarios(self) -> list[str]:
        """Demo scenario names, then every capture servable here (a mock dialect)."""
        captures = [c.path for c in capture_list(self.captures_dir) if self.capture_dialect(c.path) in MOCK_DIALECTS]
        return scenario_names() + captures + list(self.recordings)

    def capture_dialect(self, rel: str) -> str | None:
        """The dialect of a listed capture, from its first events (cached by mtime)."""
        if self.captures_dir is None:
            return None
        path = self.captures_dir / rel
        mtime = path.stat().st_mtime
        cached = self._capture_dialects.get(rel)
        if cached is not None and cached[0] == mtime:
            return cached[1]
        found: str | None = None
        try:
            for n, event in enumerate(iter_capture([path.read_bytes()], rel)):
                found = detect(event)
                if found is not None or n > 64:
                    break
        except (OSError, CaptureError):
            found = None
        self._capture_dialects[rel] = (mtime, found)
        return found

    def _capture_events(self, rel: str, dialect: str) -> list[bytes]:
        assert self.captures_dir is not None
        data = (self.captures_dir / rel).read_bytes()
        if data.startswith(b"HTTP/"):  # a `curl -i` dump: serve the body only
            cut = min(i for i in (data.find(b"\r\n\r\n") + 4, data.find(b"\n\n") + 2) if i > 1)
            data = data[cut:]
        if data.lstrip()[:1] == b"{":  # JSON Lines of provider events: write them as SSE
            out: list[bytes] = []
            for event in iter_capture([data], rel):
                kind = event.data.get("type") if isinstance(event.data, dict) and dialect != "openai-chat" else None
                body = DONE if event.data == DONE else json.dumps(event.data, ensure_ascii=False, separators=(",", ":"))
                out.append((f"event: {kind}\n" if kind else "").encode() + f"data: {body}\n\n".encode())
            return out
        return split_events(data)

    # ------------------------------------------------------------------ replies

    def reply(self, path: str, body: bytes, query: Mapping[str, str]) -> MockReply:
        """The answer to ``POST <path>`` with JSON ``body`` and the mock's query options."""
        dialect = ENDPOINTS.get(path)
        if dialect is None:
            return error_reply("openai-chat", 404, f"The mock serves {', '.join(ENDPOINTS)}; not {path}.", code="unknown_url")
        request, problem = parse_json(body or b"{}")
        if problem is not None:
            return error_reply(dialect, 400, f"The request body is {problem}.")
        if not isinstance(request, dict):
            return error_reply(dialect, 400, "The request body must be a JSON object.")
        status = _number(query.get("status"), int)
        if status is not None and 400 <= status <= 599:
            return error_reply(dialect, status, f"The mock answers {status} as asked (?status={status}).", kind="mock_error")
        model = request.get("model")
        if not isinstance(model, str) or not model:
            return error_reply(dialect, 400, "Give a 'model': a scenario name (GET /api/scenarios lists them).")
        delay = _number(query.get("delay"), float)
        delay = self.delay if delay is None else delay
        seed = _number(query.get("chunk"), int)
        seed = self.rechunk if seed is None else seed
        drop = _number(query.get("drop"), int)
        stream = request.get("stream") is True
        recording = self._recording(model)
        if recording is not None:
            own, timed_pieces, timed = recording
            if own != dialect:
                return error_reply(dialect, 400, f"The recording is a {own or 'unrecognised'} stream: ask for it at {_DIALECT_ENDPOINT.get(own, 'its own endpoint')}.", code="wrong_endpoint")  # type: ignore[arg-type]
            if not stream:
                return error_reply(dialect, 400, 'The recording is a recorded stream: send "stream": true.', code="wrong_endpoint")
            recorded_pace = timed and query.get("delay") is None
            log.info("mock: recording for %r (%d writes, %s)", model, len(timed_pieces), "recorded pace" if recorded_pace else f"{delay}s apart")
            chunks = _timed(timed_pieces, drop, self.open_streams) if recorded_pace else paced([p for _, p in timed_pieces], delay, drop, self.open_streams)
            return MockReply(200, {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}, chunks)
        try:
            pieces = self._pieces(model, dialect, stream)
        except ScenarioError:
            return error_reply(dialect, 404, self.unknown_model(model, dialect), code="model_not_found")
        except _WrongDialect as exc:
            return error_reply(dialect, 400, str(exc), code="wrong_endpoint")
        if seed is not None:
            pieces = rechunk(b"".join(pieces), seed)
        content_type = "text/event-stream; charset=utf-8" if stream else "application/json"
        log.info("mock: %s %s (%s, %d writes)", dialect, model, "stream" if stream else "json", len(pieces))
        return MockReply(200, {"content-type": content_type, "cache-control": "no-cache"}, paced(pieces, delay, drop, self.open_streams))

    def unknown_model(self, model: str, dialect: MockDialect) -> str:
        """What to do when ``model`` is neither a scenario nor a capture (a real model name,
        most often: an agent pointed at the proxy with no upstream configured): reach the
        provider with ``--upstream``, or name a scenario (a few listed, and where all are).
        The model name is quoted shortened (it is the client's text)."""
        provider, url = ("anthropic", "https://api.anthropic.com") if dialect == "anthropic" else ("openai", "https://api.openai.com")
        names = scenario_names()
        few = ", ".join(names[:UNKNOWN_MODEL_SHOWN])
        return (
            f"toollatch: {short(model, 60)} is not a mock scenario; this endpoint is toollatch's built-in mock. "
            f"To reach the real provider, run `toollatch serve --upstream {provider}={url}`. "
            f"Or name a scenario as the model: {few}, ... (all {len(self.scenarios())}: GET /v1/models at this base URL, or the dashboard's index page)."
        )

    def _pieces(self, model: str, dialect: MockDialect, stream: bool) -> list[bytes]:
        if model in scenario_names():
            if stream:
                return scenario_events(model, dialect)
            return [json.dumps(final_response(scenario_script(model), dialect), ensure_ascii=False).encode()]
        listed = {c.path for c in capture_list(self.captures_dir)}
        if model not in listed:
            raise ScenarioError(model)
        own = self.capture_dialect(model)
        if own != dialect:
            where = f" at {_DIALECT_ENDPOINT[own]}" if own in _DIALECT_ENDPOINT else ""  # type: ignore[index]
            raise _WrongDialect(f"Capture {model!r} is a {own or 'unrecognised'} stream: ask for it{where or ' elsewhere'}, not at the {dialect} endpoint.")
        if not stream:
            raise _WrongDialect(f"Capture {model!r} is a recorded stream: send \"stream\": true.")
        return self._capture_events(model, dialect)


class _WrongDialect(Exception):
    """A capture asked for at another dialect's endpoint (or without streaming)."""
