"""``latch()`` around the real openai and anthropic SDKs (sync and async, against the
built-in mock on a free port), around raw bytes of every capture, and when the caller
breaks out, an exception passes through, or the stream goes idle."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from toollatch import latch
from toollatch.core.history import check_protocol
from toollatch.wire.inputs import assemble_path
from toollatch.core.model import CallState
from toollatch.core.registry import RegistryError, ToolRegistry
from toollatch.web.live.mock import MockProvider, create_mock_app

from .conftest import CAPTURES, require_shared, tools_file
from .test_live_server import serve

CHAT_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "run_sql", "parameters": {"type": "object"}}},
]
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}, {"type": "function", "name": "run_sql", "parameters": {"type": "object"}}, {"type": "web_search"}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "input_schema": {"type": "object", "required": ["city"]}}, {"name": "write_note", "input_schema": {"type": "object"}}]
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def mock_base() -> Iterator[str]:
    app = create_mock_app(MockProvider(None, 0.0, None), ["127.0.0.1", "localhost"])
    with serve(app) as base:
        yield base


def _states(s: Any) -> list[str]:
    return [c.state.value for r in s.turn.streams for c in r.calls]


# ------------------------------------------------------------------ the SDKs


def test_openai_chat_sync_commits_both_parallel_calls(mock_base: str) -> None:
    client = openai.OpenAI(base_url=mock_base + "/v1", api_key="test", max_retries=0)
    stream = client.chat.completions.create(model="parallel", messages=USER, tools=CHAT_TOOLS, stream=True)  # type: ignore[arg-type]
    s = latch(stream, tools=CHAT_TOOLS)
    chunks = list(s)
    assert chunks and all(type(c).__name__ == "ChatCompletionChunk" for c in chunks)  # passed on unchanged
    turn = s.turn
    assert turn.dialect == "openai-chat" and turn.end == "complete"
    assert [(c.name, c.arguments) for c in turn.committed] == [("get_weather", {"city": "Tromsø", "unit": "celsius"}), ("run_sql", turn.committed[1].arguments)]
    assert turn.committed[1].arguments["database"] == "billing" and turn.results == ()
    assert [c.id for c in turn.committed] == [c.call_id for c in turn.committed] and all(turn.committed)
    history = turn.history({c.id: "ok" for c in turn.committed})
    assert history[0]["role"] == "assistant" and [m["role"] for m in history[1:]] == ["tool", "tool"]
    assert check_protocol(history) == []


def test_openai_chat_async(mock_base: str) -> None:
    async def run() -> Any:
        client = openai.AsyncOpenAI(base_url=mock_base + "/v1", api_key="test", max_retries=0)
        stream = await client.chat.completions.create(model="invalid", messages=USER, stream=True)  # type: ignore[arg-type]
        s = latch(stream)
        seen = [chunk async for chunk in s]
        await client.close()
        return s, seen

    s, seen = asyncio.run(run())
    assert seen and s.turn.end == "complete" and s.turn.committed == ()
    (result,) = s.turn.results
    assert result.is_error and result.content.startswith("invalid_json") and result.tool_call_id
    assert check_protocol(s.turn.history()) == []


def test_openai_responses_sync_with_builtin_tool_in_the_tools(mock_base: str) -> None:
    client = openai.OpenAI(base_url=mock_base + "/v1", api_key="test", max_retries=0)
    stream = client.responses.create(model="parallel", input="hi", tools=RESPONSES_TOOLS, stream=True)  # type: ignore[arg-type]
    s = latch(stream, tools=RESPONSES_TOOLS)
    for _ in s:
        pass
    assert s.turn.dialect == "openai-responses" and [c.name for c in s.turn.committed] == ["get_weather", "run_sql"]
    items = s.turn.history()
    assert [i["type"] for i in items] == ["function_call", "function_call"]


def test_anthropic_sync_and_message_stream_helper(mock_base: str) -> None:
    client = anthropic.Anthropic(base_url=mock_base, api_key="test", max_retries=0)
    stream = client.messages.create(model="single", max_tokens=64, messages=USER, tools=ANTHROPIC_TOOLS, stream=True)  # type: ignore[arg-type]
    s = latch(stream, tools=ANTHROPIC_TOOLS)
    for _ in s:
        pass
    assert s.turn.dialect == "anthropic" and [(c.name, c.arguments) for c in s.turn.committed] == [("get_weather", {"city": "Oslo", "unit": "celsius"})]
    # the helper's stream adds its own events (text, input_json with snapshots): they are passed on, not assembled
    with client.messages.stream(model="single", max_tokens=64, messages=USER, tools=ANTHROPIC_TOOLS) as helper:  # type: ignore[arg-type]
        h = latch(helper, tools=ANTHROPIC_TOOLS)
        kinds = {event.type for event in h}
    assert "input_json" in kinds and [c.arguments for c in h.turn.committed] == [{"city": "Oslo", "unit": "celsius"}]


def test_anthropic_async_unregistered_tool_fails(mock_base: str) -> None:
    async def run() -> Any:
        client = anthropic.AsyncAnthropic(base_url=mock_base, api_key="test", max_retries=0)
        stream = await client.messages.create(model="parallel", max_tokens=64, messages=USER, stream=True)  # type: ignore[arg-type]
        s = latch(stream, tools=ANTHROPIC_TOOLS)  # run_sql is not among them
        async for _ in s:
            pass
        await client.close()
        return s

    s = asyncio.run(run())
    assert [c.name for c in s.turn.committed] == ["get_weather"]
    (result,) = s.turn.results
    assert result.content.startswith("unknown_tool")
    history = s.turn.history()
    assert history[-1]["role"] == "user" and history[-1]["content"][0]["is_error"] is True


# ------------------------------------------------------------------ stopping early


def test_break_mid_stream_cancels_open_calls(mock_base: str) -> None:
    client = openai.OpenAI(base_url=mock_base + "/v1", api_key="test", max_retries=0)
    stream = client.chat.completions.create(model="parallel", messages=USER, stream=True)  # type: ignore[arg-type]
    s = latch(stream)
    for i, _ in enumerate(s):
        if i == 20:
            break
    stream.close()
    turn = s.turn
    assert turn.end == "cancelled" and turn.committed == ()
    assert turn.results and all(r.is_error and r.content.startswith("cancelled") for r in turn.results)
    assert check_protocol(turn.history()) == []


def test_break_out_of_async_for_cancels(mock_base: str) -> None:
    async def run() -> Any:
        client = anthropic.AsyncAnthropic(base_url=mock_base, api_key="test", max_retries=0)
        stream = await client.messages.create(model="single", max_tokens=64, messages=USER, stream=True)  # type: ignore[arg-type]
        s = latch(stream)
        n = 0
        async for _ in s:
            n += 1
            if n == 6:
                break
        turn = s.turn  # read right after the break: the turn ends here
        await stream.close()
        await client.close()
        return turn

    turn = asyncio.run(run())
    assert turn.end == "cancelled" and [c.state for c in turn.streams[0].calls] == [CallState.CANCELLED]
    assert len(turn.results) == 1


def _cut(data: bytes, at: int) -> Iterator[bytes]:
    yield data[:at]
    raise ConnectionResetError("peer went away")


def test_an_exception_from_the_source_passes_through_and_cancels() -> None:
    wire = b"".join(_chat_wire())
    s = latch(_cut(wire, len(wire) // 2))
    with pytest.raises(ConnectionResetError):
        for _ in s:
            pass
    assert s.turn.end == "cancelled" and s.turn.committed == () and len(s.turn.results) == 1


def test_an_exception_in_the_loop_body_cancels() -> None:
    s = latch(iter(_chat_wire()))
    with pytest.raises(KeyError):
        for i, _ in enumerate(s):
            if i == 2:
                raise KeyError("the agent's own fault")
    assert s.turn.end == "cancelled" and [r.content.split(":")[0] for r in s.turn.results] == ["cancelled"]


def test_with_block_left_early_cancels() -> None:
    with latch(iter(_chat_wire())) as s:
        it = iter(s)
        next(it)
        next(it)
    assert s.turn.end == "cancelled"


# ------------------------------------------------------------------ raw bytes


def _chat_wire() -> list[bytes]:
    from toollatch.demo.mockwire import scenario_events

    return scenario_events("single", "openai-chat")


def _capture_files() -> list[Path]:
    if not CAPTURES.is_dir():
        return []
    return sorted(p for p in CAPTURES.rglob("*") if p.is_file() and p.suffix in (".sse", ".jsonl", ".bin", ".eventstream"))


def _comparable(results: list[Any]) -> list[Any]:
    out = []
    for r in results:
        doc = r.to_json()
        out.append((doc["dialect"], doc["end"], doc["end_detail"], [(c["name"], c["call_id"], c["state"], c["reason"], c["arguments"], c["bytes"]) for c in doc["calls"]], doc["results"]))
    return out


@pytest.mark.parametrize("path", _capture_files(), ids=lambda p: p.name)
def test_raw_bytes_of_every_capture_assemble_as_from_the_file(path: Path) -> None:
    require_shared(CAPTURES)
    tools = tools_file(path)
    registry = ToolRegistry.load(tools) if tools else None
    want = _comparable([r for _, r in assemble_path(path, registry=registry)])
    data = path.read_bytes()
    tools_doc = json.loads(tools.read_text()) if tools else None
    pieces = [data[i : i + 7] for i in range(0, len(data), 7)]
    s = latch(iter(pieces), tools=tools_doc)
    assert b"".join(s) == data  # passed on unchanged
    assert _comparable(list(s.turn.streams)) == want

    async def chunks() -> AsyncIterator[bytes]:
        yield gzip.compress(data)  # a gzip-encoded body, read as it is inflated

    async def run() -> Any:
        a = latch(chunks(), tools=tools_doc)
        async for _ in a:
            pass
        return a.turn

    assert _comparable(list(asyncio.run(run()).streams)) == want


def test_capture_files_are_found() -> None:
    require_shared(CAPTURES)
    assert len(_capture_files()) >= 10


def test_unreadable_input_ends_with_an_error_not_an_exception() -> None:
    s = latch([b"<html>502 Bad Gateway</html>\n"])
    assert list(s) == [b"<html>502 Bad Gateway</html>\n"]
    assert s.turn.end is None and s.turn.dialect is None and "no known provider stream" in (s.turn.error or "")
    t = latch([42])
    assert list(t) == [42] and "not an SDK event" in (t.turn.error or "")


# ------------------------------------------------------------------ idle timeout, arguments


def _stalled_chat(pause: float) -> Iterator[bytes]:
    wire = _chat_wire()
    yield from wire[:4]  # the call opened, a few fragments in
    time.sleep(pause)
    yield from wire[4:]


def test_idle_timeout_runs_by_itself_sync() -> None:
    s = latch(_stalled_chat(0.6), config={"assemble_idle_timeout_s": 0.05})
    for _ in s:
        pass
    (result,) = s.turn.results
    assert result.content.startswith("idle_timeout") and s.turn.committed == ()


def test_idle_timeout_runs_by_itself_async() -> None:
    async def source() -> AsyncIterator[bytes]:
        wire = _chat_wire()
        for piece in wire[:4]:
            yield piece
        await asyncio.sleep(0.6)
        for piece in wire[4:]:
            yield piece

    async def run() -> Any:
        s = latch(source(), config={"assemble_idle_timeout_s": 0.05})
        async for _ in s:
            pass
        return s.turn

    (result,) = asyncio.run(run()).results
    assert result.content.startswith("idle_timeout")


def test_bad_arguments_are_refused_at_once() -> None:
    with pytest.raises(RegistryError):
        latch([], tools=[{"type": "function", "function": {"name": "x", "parameters": {"type": 3}}}])
    with pytest.raises(ValueError, match="loopback"):
        latch([], dashboard="http://example.com:8765")
    with pytest.raises(TypeError, match="async for"):
        iter(latch(openai_like_async()))
    with pytest.raises(TypeError, match="iter_bytes"):
        iter(latch(object()))


async def openai_like_async() -> AsyncIterator[bytes]:
    yield b""


def test_a_dropped_connection_raises_through_and_cancels(mock_base: str) -> None:
    client = openai.OpenAI(base_url=mock_base + "/v1", api_key="test", max_retries=0, default_query={"drop": "4"})
    stream = client.chat.completions.create(model="single", messages=USER, stream=True)  # type: ignore[arg-type]
    s = latch(stream)
    with pytest.raises(Exception) as raised:
        for _ in s:
            pass
    assert not isinstance(raised.value, AssertionError)
    assert s.turn.end == "cancelled" and s.turn.committed == () and [r.content.split(":")[0] for r in s.turn.results] == ["cancelled"]


def test_a_stream_without_its_normal_end_commits_nothing(mock_base: str) -> None:
    client = anthropic.Anthropic(base_url=mock_base, api_key="test", max_retries=0)
    stream = client.messages.create(model="truncated", max_tokens=64, messages=USER, stream=True)  # type: ignore[arg-type]
    s = latch(stream)
    for _ in s:
        pass
    assert s.turn.end == "truncated" and s.turn.committed == ()
    assert [r.content.split(":")[0] for r in s.turn.results] == ["stream_truncated"]


def test_raw_bytes_from_httpx_rechunked_at_random(mock_base: str) -> None:
    import httpx

    body = {"model": "parallel", "stream": True, "messages": USER}
    with httpx.stream("POST", f"{mock_base}/v1/responses?chunk=5", json=body) as response:
        s = latch(response.iter_bytes())
        for _ in s:
            pass
    assert s.turn.dialect == "openai-responses" and [c.name for c in s.turn.committed] == ["get_weather", "run_sql"]


def test_openai_chat_stream_helper(mock_base: str) -> None:
    client = openai.OpenAI(base_url=mock_base + "/v1", api_key="test", max_retries=0)
    with client.chat.completions.stream(model="parallel", messages=USER, tools=CHAT_TOOLS) as helper:  # type: ignore[arg-type]
        s = latch(helper, tools=CHAT_TOOLS)
        kinds = {event.type for event in s}
    assert {"chunk", "tool_calls.function.arguments.delta"} <= kinds  # passed on, every one
    assert s.turn.end == "complete" and [c.name for c in s.turn.committed] == ["get_weather", "run_sql"]


def test_openai_responses_stream_helper(mock_base: str) -> None:
    client = openai.OpenAI(base_url=mock_base + "/v1", api_key="test", max_retries=0)
    with client.responses.stream(model="single", input="hi", tools=RESPONSES_TOOLS) as helper:  # type: ignore[arg-type]
        s = latch(helper, tools=RESPONSES_TOOLS)
        for _ in s:
            pass
    assert s.turn.end == "complete" and [(c.name, c.arguments) for c in s.turn.committed] == [("get_weather", {"city": "Oslo", "unit": "celsius"})]
