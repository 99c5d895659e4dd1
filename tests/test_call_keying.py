"""Two calls never share one buffer, whatever position the provider gives them.

Every dialect keys a call by the provider's position (content block index, output_index,
tool-call index, candidate). A gateway that reuses a position for another call must not
get the two calls' argument text concatenated: each call gets its own verdict and exactly
one result.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from toollatch import assemble_events, read_capture
from toollatch.core.model import CallState, StreamResult

MERGED = {"cmd": "ls", "extra": {"cmd": "rm -rf /"}}
FIRST, SECOND, CLOSE = '{"cmd":"ls","extra":', '{"cmd":"rm -rf /"}', "}"


def sse(*events: dict[str, Any], typed: bool = True) -> bytes:
    out = []
    for ev in events:
        kind = ev.get("type")
        head = f"event: {kind}\n" if typed and isinstance(kind, str) else ""
        out.append(f"{head}data: {json.dumps(ev)}\n\n")
    return "".join(out).encode()


def jsonl(*events: dict[str, Any]) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in events).encode()


def assemble(data: bytes) -> StreamResult:
    (result,) = assemble_events(read_capture(data))
    return result


def answered(result: StreamResult) -> list[str | None]:
    """Each call's id, once per committed call and once per error result."""
    committed = [c.call_id for c in result.calls if c.state is CallState.COMMITTED and c.executor == "client"]
    return sorted(committed + [r.tool_call_id for r in result.results], key=str)


def never_merged(result: StreamResult) -> None:
    assert all(c.arguments != MERGED for c in result.calls), "argument text of two calls was concatenated"


# ------------------------------------------------------------------ Anthropic (and Bedrock Invoke)


def _a_start(index: int, tool_id: str | None, **block: Any) -> dict[str, Any]:
    content: dict[str, Any] = {"type": "tool_use", "name": "run", "input": {}, **block}
    if tool_id is not None:
        content["id"] = tool_id
    return {"type": "content_block_start", "index": index, "content_block": content}


def _a_delta(index: int, text: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": text}}


def _a_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


A_BEGIN = {"type": "message_start", "message": {"id": "msg_1", "content": []}}
A_END = {"type": "message_stop"}


def _anthropic_interleaved(second_id: str | None) -> list[dict[str, Any]]:
    return [A_BEGIN, _a_start(0, "tu_A"), _a_delta(0, FIRST), _a_start(0, second_id), _a_delta(0, SECOND), _a_delta(0, CLOSE), _a_stop(0), A_END]


@pytest.mark.parametrize("second_id", [None, "tu_B"], ids=["second-without-id", "second-with-id"])
def test_anthropic_block_started_again_at_an_open_index_fails_both_calls(second_id: str | None) -> None:
    result = assemble(sse(*_anthropic_interleaved(second_id)))
    never_merged(result)
    assert result.end == "error" and "content block 0 started again" in (result.end_detail or "")
    assert [(c.key, c.state) for c in result.calls] == [((0,), CallState.FAILED), ((0, 1), CallState.FAILED)]
    assert answered(result) == sorted(["tu_A", second_id], key=str)


def test_anthropic_index_reused_after_its_block_stop_is_a_separate_call() -> None:
    events = [A_BEGIN, _a_start(0, "tu_A"), _a_delta(0, '{"a":1}'), _a_stop(0), _a_start(0, None), _a_delta(0, '{"b":2}'), _a_stop(0), A_END]
    result = assemble(sse(*events))
    assert result.end == "complete" and result.quirks.get("block_index_reused") == 1
    assert [(c.key, c.call_id, c.state, c.arguments) for c in result.calls] == [
        ((0,), "tu_A", CallState.COMMITTED, {"a": 1}),
        ((0, 1), None, CallState.FAILED, None),
    ]
    assert [r.tool_call_id for r in result.results] == [None]  # the id-less call is still answered


def test_anthropic_text_block_at_a_tool_index_takes_no_argument_text() -> None:
    text_block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    events = [A_BEGIN, _a_start(0, "tu_A"), _a_delta(0, '{"a":1}'), _a_stop(0), text_block, _a_delta(0, "{}"), _a_stop(0), A_END]
    result = assemble(sse(*events))
    assert [(c.call_id, c.state, c.arguments) for c in result.calls] == [("tu_A", CallState.COMMITTED, {"a": 1})]
    assert result.quirks.get("input_json_delta_for_non_tool_block") == 1


def test_anthropic_same_block_started_twice_stays_one_call() -> None:
    events = [A_BEGIN, _a_start(0, "tu_A"), _a_delta(0, '{"a":'), _a_start(0, "tu_A"), _a_delta(0, "1}"), _a_stop(0), A_END]
    result = assemble(sse(*events))
    assert [(c.call_id, c.state, c.arguments) for c in result.calls] == [("tu_A", CallState.COMMITTED, {"a": 1})]
    assert result.quirks.get("call_start_repeated") == 1


def test_bedrock_invoke_block_started_again_at_an_open_index_fails_both_calls() -> None:
    def chunk(event: dict[str, Any]) -> dict[str, Any]:
        return {"chunk": {"bytes": base64.b64encode(json.dumps(event).encode()).decode()}}

    result = assemble(jsonl(*(chunk(e) for e in _anthropic_interleaved(None))))
    never_merged(result)
    assert result.dialect == "bedrock-invoke" and result.end == "error"
    assert answered(result) == sorted(["tu_A", None], key=str)


# ------------------------------------------------------------------ Bedrock Converse


def _b_start(index: int, tool_id: str | None) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": "run"}
    if tool_id is not None:
        tool["toolUseId"] = tool_id
    return {"contentBlockStart": {"contentBlockIndex": index, "start": {"toolUse": tool}}}


def _b_delta(index: int, text: str) -> dict[str, Any]:
    return {"contentBlockDelta": {"contentBlockIndex": index, "delta": {"toolUse": {"input": text}}}}


def _b_stop(index: int) -> dict[str, Any]:
    return {"contentBlockStop": {"contentBlockIndex": index}}


B_BEGIN, B_END = {"messageStart": {"role": "assistant"}}, {"messageStop": {"stopReason": "tool_use"}}


@pytest.mark.parametrize("second_id", [None, "tb_B"], ids=["second-without-id", "second-with-id"])
def test_bedrock_converse_block_started_again_at_an_open_index_fails_both_calls(second_id: str | None) -> None:
    events = [B_BEGIN, _b_start(0, "tb_A"), _b_delta(0, FIRST), _b_start(0, second_id), _b_delta(0, SECOND), _b_delta(0, CLOSE), _b_stop(0), B_END]
    result = assemble(jsonl(*events))
    never_merged(result)
    assert result.dialect == "bedrock-converse" and result.end == "error"
    assert answered(result) == sorted(["tb_A", second_id], key=str)


def test_bedrock_converse_index_reused_after_its_block_stop_is_a_separate_call() -> None:
    events = [B_BEGIN, _b_start(0, "tb_A"), _b_delta(0, '{"a":1}'), _b_stop(0), _b_start(0, "tb_B"), _b_delta(0, '{"b":2}'), _b_stop(0), B_END]
    result = assemble(jsonl(*events))
    assert [(c.key, c.call_id, c.state, c.arguments) for c in result.calls] == [
        ((0,), "tb_A", CallState.COMMITTED, {"a": 1}),
        ((0, 1), "tb_B", CallState.COMMITTED, {"b": 2}),
    ]


# ------------------------------------------------------------------ Cohere


def _c_start(index: int, call_id: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "function", "function": {"name": "run", "arguments": ""}}
    if call_id is not None:
        entry["id"] = call_id
    return {"type": "tool-call-start", "index": index, "delta": {"message": {"tool_calls": entry}}}


def _c_delta(index: int, text: str) -> dict[str, Any]:
    return {"type": "tool-call-delta", "index": index, "delta": {"message": {"tool_calls": {"function": {"arguments": text}}}}}


C_BEGIN = {"type": "message-start", "id": "m"}
C_END = {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL"}}


@pytest.mark.parametrize("second_id", [None, "B"], ids=["second-without-id", "second-with-id"])
def test_cohere_call_started_again_at_an_open_index_fails_both_calls(second_id: str | None) -> None:
    events = [C_BEGIN, _c_start(0, "A"), _c_delta(0, FIRST), _c_start(0, second_id), _c_delta(0, SECOND), _c_delta(0, CLOSE), {"type": "tool-call-end", "index": 0}, C_END]
    result = assemble(sse(*events))
    never_merged(result)
    assert result.dialect == "cohere" and result.end == "error"
    assert answered(result) == sorted(["A", second_id], key=str)


def test_cohere_index_reused_after_tool_call_end_is_a_separate_call() -> None:
    end = {"type": "tool-call-end", "index": 0}
    events = [C_BEGIN, _c_start(0, "A"), _c_delta(0, '{"a":1}'), end, _c_start(0, "B"), _c_delta(0, '{"b":2}'), end, C_END]
    result = assemble(sse(*events))
    assert [(c.key, c.call_id, c.state, c.arguments) for c in result.calls] == [
        ((0,), "A", CallState.COMMITTED, {"a": 1}),
        ((0, 1), "B", CallState.COMMITTED, {"b": 2}),
    ]


# ------------------------------------------------------------------ OpenAI Responses


def _r(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def _r_item(item_id: str | None, call_id: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call", "name": "run", "arguments": ""}
    if item_id is not None:
        item["id"] = item_id
    if call_id is not None:
        item["call_id"] = call_id
    return item


def _r_delta(text: str, item_id: str | None = None, index: int = 0) -> dict[str, Any]:
    fields: dict[str, Any] = {"output_index": index, "delta": text}
    if item_id is not None:
        fields["item_id"] = item_id
    return _r("response.function_call_arguments.delta", **fields)


R_BEGIN = _r("response.created", response={"id": "resp_1"})
R_END = _r("response.completed", response={"id": "resp_1"})


def test_responses_items_at_one_output_index_follow_their_item_ids() -> None:
    events = [
        R_BEGIN,
        _r("response.output_item.added", output_index=0, item=_r_item("fc_1", "call_A")),
        _r("response.output_item.added", output_index=0, item=_r_item("fc_2", "call_B")),
        _r_delta('{"a":', "fc_1"),
        _r_delta('{"b":2}', "fc_2"),
        _r_delta("1}", "fc_1"),
        _r("response.output_item.done", output_index=0, item={**_r_item("fc_2", "call_B"), "arguments": '{"b":2}'}),
        _r("response.output_item.done", output_index=0, item={**_r_item("fc_1", "call_A"), "arguments": '{"a":1}'}),
        R_END,
    ]
    result = assemble(sse(*events))
    assert [(c.key, c.call_id, c.state, c.arguments) for c in result.calls] == [
        ((0,), "call_A", CallState.COMMITTED, {"a": 1}),
        ((0, 1), "call_B", CallState.COMMITTED, {"b": 2}),
    ]
    assert result.quirks.get("output_index_reused") == 1 and "done_arguments_differ" not in result.quirks


def test_responses_second_item_without_call_id_is_answered_not_merged() -> None:
    events = [
        R_BEGIN,
        _r("response.output_item.added", output_index=0, item=_r_item("fc_1", "call_A")),
        _r("response.output_item.added", output_index=0, item=_r_item("fc_2", None)),
        _r_delta(FIRST, "fc_1"),
        _r_delta(SECOND, "fc_2"),
        _r_delta(CLOSE, "fc_1"),
        R_END,
    ]
    result = assemble(sse(*events))
    never_merged(result)
    assert answered(result) == sorted(["call_A", None], key=str)


def test_responses_delta_for_an_item_never_added_starts_its_own_call() -> None:
    events = [
        R_BEGIN,
        _r("response.output_item.added", output_index=0, item=_r_item("fc_1", "call_A")),
        _r_delta(FIRST, "fc_1"),
        _r_delta(SECOND, "fc_9"),
        _r_delta(CLOSE, "fc_1"),
        R_END,
    ]
    result = assemble(sse(*events))
    never_merged(result)
    assert [(c.key, c.call_id, c.state) for c in result.calls] == [((0,), "call_A", CallState.FAILED), ((0, 1), None, CallState.FAILED)]
    assert [(c.reason or "").split(":")[0] for c in result.calls] == ["invalid_json", "missing_id_or_name"]
    assert result.quirks.get("delta_before_output_item_added") == 1


def test_responses_delta_without_item_id_where_two_items_are_open_fails_the_stream() -> None:
    events = [
        R_BEGIN,
        _r("response.output_item.added", output_index=0, item=_r_item("fc_1", "call_A")),
        _r("response.output_item.added", output_index=0, item=_r_item("fc_2", "call_B")),
        _r_delta('{"a":1}'),
        R_END,
    ]
    result = assemble(sse(*events))
    assert result.end == "error" and "output_index 0" in (result.end_detail or "")
    assert [c.state for c in result.calls] == [CallState.FAILED, CallState.FAILED]
    assert answered(result) == ["call_A", "call_B"]


def test_responses_item_added_without_id_adopts_the_item_id_of_its_deltas() -> None:
    events = [
        R_BEGIN,
        _r("response.output_item.added", output_index=0, item=_r_item(None, "call_A")),
        _r_delta('{"a":', "fc_1"),
        _r_delta("1}", "fc_1"),
        _r("response.output_item.done", output_index=0, item={**_r_item("fc_1", "call_A"), "arguments": '{"a":1}'}),
        R_END,
    ]
    result = assemble(sse(*events))
    assert [(c.key, c.call_id, c.state, c.arguments) for c in result.calls] == [((0,), "call_A", CallState.COMMITTED, {"a": 1})]
    assert result.quirks == {}


def test_responses_item_added_twice_is_one_call() -> None:
    added = _r("response.output_item.added", output_index=0, item=_r_item("fc_1", "call_A"))
    events = [R_BEGIN, added, _r_delta('{"a":', "fc_1"), added, _r_delta("1}", "fc_1"), R_END]
    result = assemble(sse(*events))
    assert [(c.call_id, c.state, c.arguments) for c in result.calls] == [("call_A", CallState.COMMITTED, {"a": 1})]
    assert result.quirks.get("output_item_added_repeated") == 1


# ------------------------------------------------------------------ Gemini


def _g(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


def _g_partial(path: str, value: str) -> dict[str, Any]:
    return {"jsonPath": path, "stringValue": value, "willContinue": True}


def test_gemini_part_with_another_call_id_is_not_merged_into_the_open_call() -> None:
    events = [
        _g([{"functionCall": {"id": "X", "name": "run", "willContinue": True}}]),
        _g([{"functionCall": {"id": "X", "partialArgs": [_g_partial("$.cmd", "ls")], "willContinue": True}}]),
        _g([{"functionCall": {"id": "Y", "partialArgs": [_g_partial("$.extra", "rm -rf /")], "willContinue": True}}]),
        _g([{"functionCall": {}}], "STOP"),
    ]
    result = assemble(sse(*events, typed=False))
    assert all(c.arguments != {"cmd": "ls", "extra": "rm -rf /"} for c in result.calls)
    # X promised more (willContinue) and was cut by Y: what it had never commits
    assert [(c.call_id, c.state) for c in result.calls] == [("X", CallState.FAILED), ("Y", CallState.FAILED)]
    assert result.calls[0].reason == "stream_truncated: another functionCall began before this call's last part"
    assert answered(result) == ["X", "Y"]


def test_gemini_nameless_part_with_whole_args_is_its_own_call() -> None:
    events = [
        _g([{"functionCall": {"id": "X", "name": "run", "willContinue": True}}]),
        _g([{"functionCall": {"id": "Y", "args": {"cmd": "rm -rf /"}}}]),
        _g([{"functionCall": {}}], "STOP"),
    ]
    result = assemble(sse(*events, typed=False))
    assert [(c.call_id, c.state) for c in result.calls] == [("X", CallState.FAILED), ("Y", CallState.FAILED)]
    assert result.calls[0].reason.startswith("stream_truncated")  # cut by Y before its last part
    assert result.calls[1].reason == "missing_id_or_name: no name"


def test_gemini_continuation_repeating_its_own_id_continues_the_call() -> None:
    events = [
        _g([{"functionCall": {"id": "X", "name": "run", "willContinue": True}}]),
        _g([{"functionCall": {"id": "X", "partialArgs": [_g_partial("$.cmd", "l")], "willContinue": True}}]),
        _g([{"functionCall": {"partialArgs": [{"jsonPath": "$.cmd", "stringValue": "s"}], "willContinue": True}}]),
        _g([{"functionCall": {}}], "STOP"),
    ]
    result = assemble(sse(*events, typed=False))
    assert [(c.call_id, c.state, c.arguments) for c in result.calls] == [("X", CallState.COMMITTED, {"cmd": "ls"})]
