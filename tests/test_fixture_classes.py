"""The five fixture classes of DESIGN.md, for OpenAI Chat and Anthropic Messages.

The wire bytes are built here, in each provider's exact SSE format:

* OpenAI Chat Completions streaming: ``data: {chat.completion.chunk}`` events, tool calls in
  ``choices[0].delta.tool_calls[]`` keyed by ``index``, the first entry of a call carrying
  ``id``/``type``/``function.name`` and ``arguments: ""``, a last chunk with
  ``finish_reason: "tool_calls"``, an optional usage chunk with ``choices: []``, then
  ``data: [DONE]``.
* Anthropic Messages streaming: ``event: <type>`` + ``data: {...}`` pairs, ``message_start``,
  ``ping``, ``content_block_start`` (``tool_use`` with ``input: {}``), an empty first
  ``input_json_delta``, the ``partial_json`` fragments, ``content_block_stop``,
  ``message_delta`` (``stop_reason: "tool_use"``), ``message_stop``.

The helpers are imported by the other test modules that need wire bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from toollatch import AssembleConfig, CallState, Pipeline, ToolRegistry, iter_capture
from toollatch.core.model import StreamResult

Call = tuple[str, str, Sequence[str]]  # (call_id, name, argument fragments)

# ------------------------------------------------------------------ wire helpers


def _dumps(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def sse_data(payload: Any) -> bytes:
    """One ``data:``-only SSE event (OpenAI style)."""
    text = payload if isinstance(payload, str) else _dumps(payload)
    return f"data: {text}\n\n".encode()


def openai_tool_call(index: int | None, *, call_id: str | None = None, name: str | None = None, arguments: Any = None) -> dict[str, Any]:
    entry: dict[str, Any] = {} if index is None else {"index": index}
    if call_id is not None:
        entry["id"] = call_id
        entry["type"] = "function"
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    if arguments is not None:
        fn["arguments"] = arguments
    entry["function"] = fn
    return entry


def openai_choice(
    index: int = 0, *, tool_calls: list[dict[str, Any]] | None = None, role: bool = False, finish_reason: str | None = None
) -> dict[str, Any]:
    delta: dict[str, Any] = {"role": "assistant", "content": None} if role else {}
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    if role:
        delta["refusal"] = None
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


def openai_chunk(choices: list[dict[str, Any]], *, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-FX7testchunk",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "gpt-4o-2024-08-06",
        "service_tier": "default",
        "system_fingerprint": "fp_fixture",
        "choices": choices,
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def openai_tool_chunks(calls: Sequence[Call], *, interleave: bool = False, finish: bool = True, usage: bool = True) -> list[dict[str, Any]]:
    """Chunks of one choice streaming ``calls``: sequential, or with fragments interleaved."""
    chunks: list[dict[str, Any]] = []

    def start(i: int) -> dict[str, Any]:
        call_id, name, _ = calls[i]
        entry = openai_tool_call(i, call_id=call_id, name=name, arguments="")
        return openai_chunk([openai_choice(tool_calls=[entry], role=not chunks)])

    def fragment(i: int, text: str) -> dict[str, Any]:
        return openai_chunk([openai_choice(tool_calls=[openai_tool_call(i, arguments=text)])])

    if interleave:
        chunks.extend(start(i) for i in range(len(calls)))
        longest = max((len(c[2]) for c in calls), default=0)
        for j in range(longest):
            chunks.extend(fragment(i, c[2][j]) for i, c in enumerate(calls) if j < len(c[2]))
    else:
        for i, (_, _, fragments) in enumerate(calls):
            chunks.append(start(i))
            chunks.extend(fragment(i, f) for f in fragments)
    if finish:
        chunks.append(openai_chunk([openai_choice(finish_reason="tool_calls")]))
        if usage:
            chunks.append(openai_chunk([], usage={"prompt_tokens": 80, "completion_tokens": 20, "total_tokens": 100}))
    return chunks


def openai_sse(chunks: Sequence[dict[str, Any]], *, done: bool = True) -> bytes:
    return b"".join(sse_data(c) for c in chunks) + (sse_data("[DONE]") if done else b"")


def anthropic_event(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {_dumps(payload)}\n\n".encode()


def anthropic_message_start(message_id: str = "msg_01FixtureTest", content: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": content or [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 412, "output_tokens": 1},
        },
    }


def anthropic_tool_block(
    index: int, call_id: str, name: str, fragments: Sequence[str], *, block_type: str = "tool_use", input: Any = None
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": block_type, "id": call_id, "name": name, "input": {} if input is None else input},
        },
        {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": ""}},
    ]
    events += [{"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": f}} for f in fragments]
    events.append({"type": "content_block_stop", "index": index})
    return events


def anthropic_text_block(index: int, text: str, *, kind: str = "text") -> list[dict[str, Any]]:
    if kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        delta = {"type": "thinking_delta", "thinking": text}
    else:
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": text}
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        {"type": "content_block_delta", "index": index, "delta": delta},
        {"type": "content_block_stop", "index": index},
    ]


def anthropic_end(stop_reason: str = "tool_use") -> list[dict[str, Any]]:
    return [
        {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}, "usage": {"output_tokens": 57}},
        {"type": "message_stop"},
    ]


def anthropic_tool_events(calls: Sequence[Call], *, end: bool = True, message_id: str = "msg_01FixtureTest") -> list[dict[str, Any]]:
    events = [anthropic_message_start(message_id), {"type": "ping"}]
    for i, (call_id, name, fragments) in enumerate(calls):
        events += anthropic_tool_block(i, call_id, name, fragments)
    return events + (anthropic_end() if end else [])


def anthropic_sse(events: Sequence[dict[str, Any]]) -> bytes:
    return b"".join(anthropic_event(e) for e in events)


def wire(dialect: str, calls: Sequence[Call], **kwargs: Any) -> bytes:
    if dialect == "openai-chat":
        return openai_sse(openai_tool_chunks(calls, interleave=kwargs.pop("interleave", False)))
    return anthropic_sse(anthropic_tool_events(calls))


def assemble_bytes(data: bytes, *, chunk: int = 7, **kwargs: Any) -> list[StreamResult]:
    """Run wire bytes, split into ``chunk``-byte reads, through a Pipeline."""
    pipeline = Pipeline(**kwargs)
    for event in iter_capture(data[i : i + chunk] for i in range(0, len(data), chunk)):
        pipeline.feed(event)
    pipeline.close()
    return pipeline.results()


# ------------------------------------------------------------------ the five classes

DIALECTS = ["openai-chat", "anthropic"]
CITY_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}


def registry_for(dialect: str) -> ToolRegistry:
    if dialect == "openai-chat":
        return ToolRegistry.from_tools(
            [
                {"type": "function", "function": {"name": "get_weather", "parameters": CITY_SCHEMA}},
                {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
            ]
        )
    return ToolRegistry.from_tools(
        [{"name": "get_weather", "input_schema": CITY_SCHEMA}, {"name": "get_time", "input_schema": {"type": "object", "properties": {}}}]
    )


@pytest.mark.parametrize("dialect", DIALECTS)
def test_single_tool(dialect: str) -> None:
    data = wire(dialect, [("call_1", "get_weather", ['{"ci', 'ty": "Zü', "rich", '", "unit": "c"}'])])
    (stream,) = assemble_bytes(data, registry=registry_for(dialect))
    assert stream.dialect == dialect and stream.end == "complete"
    (call,) = stream.calls
    assert (call.call_id, call.name, call.state, call.reason) == ("call_1", "get_weather", CallState.COMMITTED, None)
    assert call.arguments == {"city": "Zürich", "unit": "c"}
    assert call.bytes == len('{"city": "Zürich", "unit": "c"}'.encode()) and call.fragments == 4
    assert stream.results == []


@pytest.mark.parametrize("dialect", DIALECTS)
def test_two_parallel_tools(dialect: str) -> None:
    calls = [
        ("call_A", "get_weather", ['{"city"', ': "Par', 'is"}']),
        ("call_B", "get_weather", ['{"ci', 'ty": "Lim', 'a", "unit"', ': "f"}']),
    ]
    # OpenAI fragments interleaved across indexes: a keyless assembler would cross them
    data = wire(dialect, calls, interleave=True)
    (stream,) = assemble_bytes(data, registry=registry_for(dialect))
    assert [(c.call_id, c.state) for c in stream.calls] == [("call_A", CallState.COMMITTED), ("call_B", CallState.COMMITTED)]
    assert [c.arguments for c in stream.calls] == [{"city": "Paris"}, {"city": "Lima", "unit": "f"}]
    assert [c.fragments for c in stream.calls] == [3, 4]
    assert stream.results == []


def test_openai_interleaving_really_interleaves() -> None:
    chunks = openai_tool_chunks([("a", "f", ["1", "2"]), ("b", "g", ["3", "4"])], interleave=True)
    indexes = [c["choices"][0]["delta"]["tool_calls"][0]["index"] for c in chunks if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    assert indexes == [0, 1, 0, 1, 0, 1]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_tool_with_no_arguments(dialect: str) -> None:
    data = wire(dialect, [("call_T", "get_time", [])])
    (stream,) = assemble_bytes(data, registry=registry_for(dialect))
    (call,) = stream.calls
    assert (call.state, call.arguments, call.bytes, call.fragments) == (CallState.COMMITTED, {}, 0, 0)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_arguments_still_meet_required(dialect: str) -> None:
    # "{}" for a missing argument text; the schema's `required` catches the real omission
    data = wire(dialect, [("call_W", "get_weather", [])])
    (stream,) = assemble_bytes(data, registry=registry_for(dialect))
    (call,) = stream.calls
    assert call.state is CallState.FAILED
    assert call.reason is not None and call.reason.startswith("schema_invalid: /: required")
    assert [(r.tool_call_id, r.is_error) for r in stream.results] == [("call_W", True)]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_oversized_arguments(dialect: str) -> None:
    limit = 64
    big = '{"city": "' + "x" * 150 + '"}'
    pieces = [big[i : i + 16] for i in range(0, len(big), 16)]
    calls = [("call_S", "get_weather", ['{"city": "Oslo"}']), ("call_L", "get_weather", pieces), ("call_T", "get_time", ["{}"])]
    data = wire(dialect, calls, interleave=True)
    (stream,) = assemble_bytes(data, registry=registry_for(dialect), config=AssembleConfig(max_tool_argument_bytes=limit))
    small, large, other = stream.calls
    assert large.state is CallState.FAILED
    assert large.reason is not None and large.reason.startswith("arguments_exceed_max_bytes")
    assert large.bytes == len(big) and large.fragments == len(pieces) and large.arguments is None
    assert (small.state, small.arguments) == (CallState.COMMITTED, {"city": "Oslo"})
    assert (other.state, other.arguments) == (CallState.COMMITTED, {})
    assert [(r.tool_call_id, r.is_error) for r in stream.results] == [("call_L", True)]
    assert stream.end == "complete"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_cancel_mid_stream(dialect: str) -> None:
    calls = [("call_A", "get_weather", ['{"city"', ': "Par', 'is"}']), ("call_B", "get_time", ["{", "}"])]
    events = list(iter_capture([wire(dialect, calls)]))
    pipeline = Pipeline(registry=registry_for(dialect))
    half = len(events) // 2
    for event in events[:half]:
        pipeline.feed(event)
    opened = [v.call_id for s in pipeline.streams for v in s.views()]
    assert opened, "half of the stream should have opened at least one call"
    assert pipeline.committed(0, pipeline.streams[0].views()[0].key) is None
    out = pipeline.cancel()
    assert out[-1].kind == "stream_end" and out[-1].end == "cancelled"
    (stream,) = pipeline.results()
    assert stream.end == "cancelled"
    assert [c.call_id for c in stream.calls] == opened
    assert all(c.state is CallState.CANCELLED and c.arguments is None for c in stream.calls)
    assert [r.tool_call_id for r in stream.results] == opened
    assert all(r.is_error and r.content.startswith("cancelled") for r in stream.results)
    # the rest of the stream arrives after the stop: ignored
    for event in events[half:]:
        assert pipeline.feed(event) == []
    assert pipeline.close() == []
    assert pipeline.results()[0].to_json() == stream.to_json()
