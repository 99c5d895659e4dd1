"""How a stream ends, one rule for every dialect (assembler/dialects/ends.py).

Each dialect gets one complete, valid client call and then the provider's stop reason:
a normal end commits it, a cut for length ends ``truncated`` and an end the provider chose
(policy, refusal, malformed call, guardrail) ends ``error``; in both nothing commits and
the call still gets exactly one error result.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch import Pipeline
from toollatch.wire.capture import DONE, ProviderEvent
from toollatch.dialects.ends import COMPLETE, ERROR, TRUNCATED, end_ops, kind_of
from toollatch.core.model import CallState, Quirk, StreamEnd, StreamError, StreamResult, StreamTruncated

ARGS = '{"a": 2}'


def chat(reason: str) -> list[Any]:
    head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    entry = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "add", "arguments": ARGS}}
    return [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [entry]}, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]},
        DONE,
    ]


def responses(reason: str) -> list[Any]:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add", "arguments": ""}
    done = {**item, "arguments": ARGS, "status": "completed"}
    if reason.lower() == "completed":  # the response.completed event
        end: dict[str, Any] = {"type": "response.completed", "response": {"id": "r", "status": "completed"}}
    else:
        end = {"type": "response.incomplete", "response": {"id": "r", "incomplete_details": {"reason": reason}}}
    return [
        {"type": "response.created", "response": {"id": "r", "model": "m"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": ARGS},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": ARGS},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        end,
    ]


def anthropic(reason: str) -> list[Any]:
    return [
        {"type": "message_start", "message": {"id": "msg", "model": "m", "content": [], "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "call_1", "name": "add", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ARGS}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]


def bedrock_invoke(reason: str) -> list[Any]:
    return [{"chunk": {"bytes": base64.b64encode(json.dumps(e).encode()).decode()}} for e in anthropic(reason)]


def bedrock_converse(reason: str) -> list[Any]:
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "call_1", "name": "add"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": ARGS}}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": reason}},
        {"metadata": {"usage": {"outputTokens": 9}}},
    ]


def gemini(reason: str) -> list[Any]:
    part = {"functionCall": {"id": "call_1", "name": "add", "args": {"a": 2}}}
    return [
        {"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]},
        {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": reason, "index": 0}]},
    ]


def cohere(reason: str) -> list[Any]:
    start = {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": {
        "id": "call_1", "type": "function", "function": {"name": "add", "arguments": ""}}}}}
    return [
        {"id": "m", "type": "message-start", "delta": {"message": {"role": "assistant"}}},
        start,
        {"type": "tool-call-delta", "index": 0, "delta": {"message": {"tool_calls": {"function": {"arguments": ARGS}}}}},
        {"type": "tool-call-end", "index": 0},
        {"type": "message-end", "delta": {"finish_reason": reason}},
    ]


#: dialect -> (stream builder, normal reasons, cut-for-length reasons, provider-stop reasons)
DIALECTS: dict[str, tuple[Callable[[str], list[Any]], list[str], list[str], list[str]]] = {
    "openai-chat": (chat, ["tool_calls", "stop", "STOP"], ["length", "MAX_TOKENS", "model_length"],
                    ["content_filter", "error", "abort", "insufficient_system_resource"]),
    "openai-responses": (responses, ["completed"], ["max_output_tokens"], ["content_filter"]),
    "anthropic": (anthropic, ["tool_use", "end_turn"], ["max_tokens", "model_context_window_exceeded"], ["refusal"]),
    "bedrock-invoke": (bedrock_invoke, ["tool_use"], ["max_tokens"], ["refusal", "guardrail_intervened"]),
    "bedrock-converse": (bedrock_converse, ["tool_use", "end_turn"], ["max_tokens"], ["guardrail_intervened", "content_filtered"]),
    "gemini": (gemini, ["STOP"], ["MAX_TOKENS"], [
        "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "OTHER"]),
    "cohere": (cohere, ["TOOL_CALL", "COMPLETE"], ["MAX_TOKENS"], ["ERROR"]),
}


def run(dialect: str, events: list[Any]) -> StreamResult:
    pipeline = Pipeline(dialect)
    for i, data in enumerate(events, 1):
        pipeline.feed(ProviderEvent(data.get("type") if isinstance(data, dict) else None, data, i, 0))
    pipeline.close()
    (result,) = pipeline.results()
    return result


def cases(column: int) -> list[tuple[str, str]]:
    return [(dialect, reason) for dialect, row in DIALECTS.items() for reason in row[column]]


@pytest.mark.parametrize(("dialect", "reason"), cases(1))
def test_a_normal_end_commits(dialect: str, reason: str) -> None:
    result = run(dialect, DIALECTS[dialect][0](reason))
    assert result.end == "complete"
    (call,) = result.calls
    assert call.state is CallState.COMMITTED and call.arguments == {"a": 2} and result.results == []


def assert_nothing_commits(result: StreamResult, end: str, reason: str) -> None:
    assert result.end == end
    (call,) = result.calls
    prefix = "stream_truncated: " if end == "truncated" else "stream_error: "
    assert call.state is CallState.FAILED and call.reason is not None
    assert call.reason.startswith(prefix) and reason in call.reason
    assert [(r.tool_call_id, r.is_error) for r in result.results] == [("call_1", True)]


@pytest.mark.parametrize(("dialect", "reason"), cases(2))
def test_cut_for_length_is_truncated_and_nothing_commits(dialect: str, reason: str) -> None:
    assert_nothing_commits(run(dialect, DIALECTS[dialect][0](reason)), "truncated", reason)


@pytest.mark.parametrize(("dialect", "reason"), cases(3))
def test_stopped_by_the_provider_is_an_error_and_nothing_commits(dialect: str, reason: str) -> None:
    assert_nothing_commits(run(dialect, DIALECTS[dialect][0](reason)), "error", reason)


@settings(max_examples=150, deadline=None)
@given(
    dialect=st.sampled_from(sorted(DIALECTS)),
    reason=st.one_of(
        st.sampled_from(sorted(COMPLETE | TRUNCATED | ERROR)).map(lambda r: r.upper() if len(r) % 2 else r),
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12),
    ),
)
def test_any_end_gives_every_call_one_verdict_and_commits_only_when_normal(dialect: str, reason: str) -> None:
    if dialect == "openai-responses" and reason.lower() != "completed":
        kind = kind_of(reason) if kind_of(reason) == "error" else "truncated"  # response.incomplete
    else:
        kind = kind_of(reason) or "complete"
    result = run(dialect, DIALECTS[dialect][0](reason))
    assert result.end == kind
    committed = [c for c in result.calls if c.state is CallState.COMMITTED]
    owed = [r.tool_call_id for r in result.results]
    assert len(result.calls) == 1 and sorted(owed + [c.call_id for c in committed]) == ["call_1"]
    assert (committed != []) == (kind == "complete")


def test_chat_choices_the_worst_end_decides() -> None:
    head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    events = [
        *chat("tool_calls")[:1],
        {**head, "choices": [{"index": 1, "delta": {"content": "hi"}, "finish_reason": "length"}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        DONE,
    ]
    result = run("openai-chat", events)
    assert result.end == "truncated" and result.calls[0].reason == "stream_truncated: finish_reason length"


def test_gemini_content_after_an_early_finish_reason_is_kept() -> None:
    empty_stop = {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP", "index": 0}]}
    result = run("gemini", [empty_stop, empty_stop, *gemini("STOP")])
    assert result.end == "complete" and result.quirks.get("content_after_finish_reason") == 1
    (call,) = result.calls
    assert call.state is CallState.COMMITTED and call.arguments == {"a": 2}


@pytest.mark.parametrize(("first", "last", "end"), [("STOP", "MAX_TOKENS", "truncated"), ("SAFETY", "STOP", "complete")])
def test_gemini_the_last_finish_reason_decides(first: str, last: str, end: str) -> None:
    early = {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": first, "index": 0}]}
    assert run("gemini", [early, *gemini(last)]).end == end


def test_gemini_malformed_function_call_without_a_call_is_an_error() -> None:
    events = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "index": 0}]},
        {"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL", "finishMessage": "Malformed function call: f(x='s')", "index": 0}]},
    ]
    result = run("gemini", events)
    assert (result.end, result.end_detail, result.calls) == ("error", "finishReason MALFORMED_FUNCTION_CALL", [])


def test_end_ops_table() -> None:
    assert end_ops("finish_reason", [], "[DONE]") == [StreamEnd("[DONE]")]
    assert end_ops("finish_reason", ["stop", "length"], "[DONE]") == [StreamTruncated("finish_reason length")]
    assert end_ops("finishReason", ["MAX_TOKENS", "SAFETY"], None) == [StreamError("finishReason SAFETY")]
    assert end_ops("finish_reason", ["eos"], "[DONE]") == [Quirk("unknown_finish_reason"), StreamEnd("[DONE]")]
    assert end_ops("response.incomplete:", [], None, floor="truncated") == [StreamTruncated("response.incomplete: no reason given")]
    assert end_ops("response.incomplete:", ["x" * 100], None, floor="truncated") == [
        StreamTruncated("response.incomplete: (hidden reason, 100 characters)")]


def sse_of(events: list[Any]) -> bytes:
    return b"".join(b"data: " + (e if isinstance(e, str) else json.dumps(e)).encode() + b"\n\n" for e in events)


@pytest.mark.parametrize("dialect", ["openai-chat", "openai-responses", "anthropic", "gemini", "cohere", "bedrock-converse"])
def test_an_unreadable_first_data_line_ends_the_one_stream_in_error(dialect: str) -> None:
    # a gateway's keep-alive comment wrapped as data, before the stream's own start event
    from toollatch import read_capture

    build = DIALECTS[dialect][0]
    pipeline = Pipeline(name="k.sse")
    for event in read_capture(b"data: : OPENROUTER PROCESSING\n\n" + sse_of(build(DIALECTS[dialect][1][0])), "k.sse"):
        pipeline.feed(event)
    pipeline.close()
    (result,) = pipeline.results()
    assert result.dialect == dialect and result.end == "error"
    assert (result.end_detail or "").startswith("k.sse:1 (byte 0): event data is not JSON")
    assert not any(c.state is CallState.COMMITTED for c in result.calls)


FREE = '{"q": "hunter2-SECRET"}'


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_stop_reason_holding_free_text_is_not_shown(dialect: str) -> None:
    # a stop reason is a word from the provider's fixed list; anything else (it could quote
    # the arguments) is named as unrecognised, in the end detail of every dialect
    result = run(dialect, DIALECTS[dialect][0](FREE))
    assert "hunter2" not in (result.end_detail or ""), result.end_detail
    assert not any(c.state is CallState.COMMITTED for c in result.calls) or result.end == "complete"


def test_gemini_an_unknown_finish_reason_is_not_shown_on_a_normal_end() -> None:
    result = run("gemini", gemini("STOP")[:1] + [{"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "x" * 300, "index": 0}]}])
    assert "x" * 65 not in (result.end_detail or ""), result.end_detail
