"""Provider-chosen positions never size an allocation.

Every dialect keys calls by a number the provider sends (``tool_calls[].index``, a content
block ``index``, ``output_index``, ``contentBlockIndex``, Cohere's ``index``, a Gemini
``jsonPath`` array index). A hostile or broken upstream can send any number there; the
assembler's memory must not grow with it.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from toollatch import assemble_events, read_capture
from toollatch.core.model import CallState, StreamResult

HUGE = 10**15


def sse(*events: dict[str, Any], typed: bool = False) -> bytes:
    return "".join((f"event: {e['type']}\n" if typed else "") + f"data: {json.dumps(e)}\n\n" for e in events).encode()


def openai_chat(index: int) -> bytes:
    call = {"index": index, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    chunks = [{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]},
              {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    return sse(*chunks) + b"data: [DONE]\n\n"


def anthropic(index: int) -> bytes:
    return sse(
        {"type": "message_start", "message": {"id": "m", "content": []}},
        {"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": "c1", "name": "f", "input": {}}},
        {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": '{"a":1}'}},
        {"type": "content_block_stop", "index": index},
        {"type": "message_stop"},
        typed=True,
    )


def openai_responses(index: int) -> bytes:
    item = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": ""}
    return sse(
        {"type": "response.created", "response": {"id": "r"}},
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": index, "delta": '{"a":1}'},
        {"type": "response.output_item.done", "output_index": index, "item": {**item, "arguments": '{"a":1}'}},
        {"type": "response.completed", "response": {"id": "r"}},
        typed=True,
    )


def bedrock_converse(index: int) -> bytes:
    lines = [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": index, "start": {"toolUse": {"toolUseId": "c1", "name": "f"}}}},
        {"contentBlockDelta": {"contentBlockIndex": index, "delta": {"toolUse": {"input": '{"a":1}'}}}},
        {"contentBlockStop": {"contentBlockIndex": index}},
        {"messageStop": {"stopReason": "tool_use"}},
    ]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def cohere(index: int) -> bytes:
    start = {"type": "tool-call-start", "index": index, "delta": {"message": {"tool_calls": {"id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}}}}
    delta = {"type": "tool-call-delta", "index": index, "delta": {"message": {"tool_calls": {"function": {"arguments": '{"a":1}'}}}}}
    return sse(
        {"type": "message-start", "id": "m"}, start, delta, {"type": "tool-call-end", "index": index},
        {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL"}}, typed=True,
    )


BUILDERS: list[Callable[[int], bytes]] = [openai_chat, anthropic, openai_responses, bedrock_converse, cohere]


def assemble(data: bytes) -> StreamResult:
    (result,) = assemble_events(read_capture(data))
    return result


@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__)
def test_a_huge_call_position_is_a_key_not_an_allocation(build: Callable[[int], bytes]) -> None:
    small = assemble(build(0))
    tracemalloc.start()
    try:
        result = assemble(build(HUGE))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000
    (call,) = result.calls
    assert (call.call_id, call.state, call.arguments) == ("c1", CallState.COMMITTED, {"a": 1})
    assert [(c.call_id, c.state) for c in small.calls] == [(call.call_id, call.state)]
