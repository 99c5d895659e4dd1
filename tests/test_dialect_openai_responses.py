"""OpenAI Responses API adapter: inline event lists through the whole pipeline."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch import Pipeline
from toollatch.wire.capture import ProviderEvent, read_capture
from toollatch.core.config import AssembleConfig
from toollatch.dialects import detect
from toollatch.dialects.openai_responses import OpenAIResponsesAdapter
from toollatch.core.model import ArgsFragment, BlockStop, CallState, Quirk, StreamEnd, StreamResult

RESP = {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-test", "status": "in_progress"}}
COMPLETED = {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}}


def fc_item(call_id: str, name: str, item_id: str, arguments: str = "", status: str = "in_progress") -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments, "status": status}


def function_call(index: int, call_id: str, name: str, deltas: list[str], done: str | None = None) -> list[dict[str, Any]]:
    """The four-step flow of one function_call item; ``done`` defaults to the joined deltas."""
    item_id = f"fc_{index}"
    text = "".join(deltas) if done is None else done
    return [
        {"type": "response.output_item.added", "output_index": index, "item": fc_item(call_id, name, item_id)},
        *(
            {"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": index, "delta": d}
            for d in deltas
        ),
        {"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": index, "arguments": text},
        {"type": "response.output_item.done", "output_index": index, "item": fc_item(call_id, name, item_id, text, "completed")},
    ]


def run(events: list[dict[str, Any]]) -> StreamResult:
    pipeline = Pipeline("openai-responses")
    for i, data in enumerate(events, 1):
        pipeline.feed(ProviderEvent(data.get("type"), data, i, 0))
    pipeline.close()
    (result,) = pipeline.results()
    return result


def adapter_ops(events: list[dict[str, Any]]) -> list[Any]:
    adapter = OpenAIResponsesAdapter()
    ops: list[Any] = []
    for i, data in enumerate(events, 1):
        ops.extend(adapter.feed(ProviderEvent(None, data, i, 0)))
    return ops + adapter.close()


def test_single_tool_commits_with_call_id_not_item_id() -> None:
    result = run([RESP, *function_call(0, "call_A", "get_capital", ['{"coun', 'try":"Fra', 'nce"}']), COMPLETED])
    assert result.end == "complete"
    (call,) = result.calls
    assert call.state is CallState.COMMITTED
    assert (call.call_id, call.name, call.arguments) == ("call_A", "get_capital", {"country": "France"})
    assert (call.key, call.fragments, call.bytes) == ((0,), 3, len('{"country":"France"}'))
    assert result.results == [] and result.quirks == {}


def test_two_parallel_tools_keyed_by_output_index() -> None:
    # a reasoning item sits at output_index 0; the calls are at 1 and 2
    reasoning = {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_0"}}
    result = run([RESP, reasoning, *function_call(1, "call_A", "add", ['{"a":2,', '"b":3}']),
                  *function_call(2, "call_B", "multiply", ['{"a":4,"b":5}']), COMPLETED])
    assert [(c.key, c.call_id, c.name, c.arguments) for c in result.calls] == [
        ((1,), "call_A", "add", {"a": 2, "b": 3}),
        ((2,), "call_B", "multiply", {"a": 4, "b": 5}),
    ]
    assert all(c.state is CallState.COMMITTED for c in result.calls)


def test_interleaved_deltas_follow_item_id_not_arrival_order() -> None:
    events = [
        RESP,
        {"type": "response.output_item.added", "output_index": 0, "item": fc_item("call_A", "add", "fc_a")},
        {"type": "response.output_item.added", "output_index": 1, "item": fc_item("call_B", "mul", "fc_b")},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_b", "output_index": 1, "delta": '{"x":'},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_a", "output_index": 0, "delta": '{"y":'},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_a", "delta": "1}"},  # no output_index
        {"type": "response.function_call_arguments.delta", "item_id": "fc_b", "output_index": 1, "delta": "2}"},
        COMPLETED,
    ]
    result = run(events)
    assert [c.arguments for c in result.calls] == [{"y": 1}, {"x": 2}]


def test_tool_with_no_arguments_finalizes_as_empty_object() -> None:
    result = run([RESP, *function_call(0, "call_A", "list_files", []), COMPLETED])
    (call,) = result.calls
    assert call.state is CallState.COMMITTED and call.arguments == {} and call.bytes == 0


def test_missing_response_completed_is_truncated() -> None:
    events = [RESP, *function_call(0, "call_A", "add", ['{"a":2,"b":3}'])]
    result = run(events)
    assert result.end == "truncated"
    (call,) = result.calls
    assert call.state is CallState.FAILED and call.reason is not None and call.reason.startswith("stream_truncated")
    assert [(r.tool_call_id, r.is_error) for r in result.results] == [("call_A", True)]


def test_response_incomplete_is_truncated_with_reason() -> None:
    incomplete = {"type": "response.incomplete", "response": {"incomplete_details": {"reason": "max_output_tokens"}}}
    result = run([RESP, *function_call(0, "call_A", "add", ['{"a":2,"b":3}']), incomplete])
    assert result.end == "truncated" and "max_output_tokens" in (result.end_detail or "")
    assert result.calls[0].state is CallState.FAILED


def test_error_event_and_response_failed_fail_open_calls() -> None:
    start = function_call(0, "call_A", "add", ['{"a":'])[:2]
    error = {"type": "error", "code": "server_error", "message": "boom", "sequence_number": 5}
    result = run([RESP, *start, error])
    assert result.end == "error" and result.end_detail == "error: server_error"
    assert result.calls[0].reason == "stream_error: error: server_error"  # the free text only when revealed
    failed = {"type": "response.failed", "response": {"error": {"code": "rate_limit_exceeded", "message": "slow down"}}}
    result = run([RESP, *start, failed])
    assert result.end == "error" and "rate_limit_exceeded" in (result.end_detail or "")
    assert result.calls[0].state is CallState.FAILED


def test_lmstudio_arguments_only_in_done() -> None:
    events = function_call(0, "call_A", "weather", [], done='{"location":"San Francisco"}')
    result = run([RESP, *events, COMPLETED])
    (call,) = result.calls
    assert call.state is CallState.COMMITTED and call.arguments == {"location": "San Francisco"}
    assert result.quirks == {"arguments_only_in_done": 1}
    # the .done text is used once, not again from output_item.done
    assert call.fragments == 1


def test_arguments_only_in_output_item_done() -> None:
    item = fc_item("call_A", "weather", "fc_0")
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.output_item.done", "output_index": 0, "item": {**item, "arguments": '{"q":1}'}},
    ]
    call = run([RESP, *events, COMPLETED]).calls[0]
    assert call.state is CallState.COMMITTED and call.arguments == {"q": 1}


def test_done_text_differing_from_deltas_replaces_them_and_is_a_quirk() -> None:
    events = function_call(0, "call_A", "add", ['{"a":', "1}"], done='{"a": 2}')
    result = run([RESP, *events, COMPLETED])
    assert result.calls[0].state is CallState.COMMITTED and result.calls[0].arguments == {"a": 2}
    assert result.quirks == {"done_arguments_differ": 1}
    assert result.calls[0].bytes == len('{"a": 2}')


def test_dropped_deltas_commit_the_final_text() -> None:
    """A gateway that drops deltas: the preview does not parse, the final text does."""
    events = function_call(0, "call_A", "add", ['{"a":', "1"], done='{"a":1}')
    result = run([RESP, *events, COMPLETED])
    assert result.calls[0].state is CallState.COMMITTED and result.calls[0].arguments == {"a": 1}
    assert result.quirks == {"done_arguments_differ": 1}


def test_invalid_final_text_fails_even_when_deltas_were_valid() -> None:
    events = function_call(0, "call_A", "add", ['{"a":1}'], done='{"a":1')
    call = run([RESP, *events, COMPLETED]).calls[0]
    assert call.state is CallState.FAILED and (call.reason or "").startswith("invalid_json")


def test_equal_done_text_is_no_quirk_and_adapter_never_resends_it() -> None:
    ops = adapter_ops([RESP, *function_call(0, "call_A", "add", ['{"a":', "1}"]), COMPLETED])
    assert [op.text for op in ops if isinstance(op, ArgsFragment)] == ['{"a":', "1}"]
    assert not [op for op in ops if isinstance(op, Quirk)]
    assert [type(op) for op in ops[-2:]] == [BlockStop, StreamEnd]


def test_delta_after_output_item_done_fails_the_call() -> None:
    events = [*function_call(0, "call_A", "add", ['{"a":1}']),
              {"type": "response.function_call_arguments.delta", "item_id": "fc_0", "output_index": 0, "delta": "x"}]
    call = run([RESP, *events, COMPLETED]).calls[0]
    assert call.state is CallState.FAILED and "after the block stopped" in (call.reason or "")


def test_mcp_call_is_server_executed_and_owes_no_result() -> None:
    item = {"type": "mcp_call", "id": "mcp_1", "server_label": "docs", "name": "search", "arguments": ""}
    events = [
        RESP,
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.mcp_call_arguments.delta", "item_id": "mcp_1", "output_index": 0, "delta": '{"q":"x"}'},
        {"type": "response.mcp_call_arguments.done", "item_id": "mcp_1", "output_index": 0, "arguments": '{"q":"x"}'},
        {"type": "response.output_item.done", "output_index": 0, "item": {**item, "arguments": '{"q":"x"}'}},
        COMPLETED,
    ]
    result = run(events)
    (call,) = result.calls
    assert (call.executor, call.call_id, call.state, call.arguments) == ("server", "mcp_1", CallState.COMMITTED, {"q": "x"})
    truncated = run(events[:-2])
    assert truncated.calls[0].state is CallState.FAILED and truncated.results == []


def test_custom_tool_free_text_is_wrapped_as_input() -> None:
    text = 'print("a\\b")\nline 2 é'
    item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_C", "name": "code_exec", "input": ""}
    events = [
        RESP,
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.custom_tool_call_input.delta", "item_id": "ctc_1", "output_index": 0, "delta": text[:7]},
        {"type": "response.custom_tool_call_input.delta", "item_id": "ctc_1", "output_index": 0, "delta": text[7:]},
        {"type": "response.custom_tool_call_input.done", "item_id": "ctc_1", "output_index": 0, "input": text},
        {"type": "response.output_item.done", "output_index": 0, "item": {**item, "input": text}},
        COMPLETED,
    ]
    result = run(events)
    (call,) = result.calls
    assert call.state is CallState.COMMITTED and call.arguments == {"input": text}
    assert result.quirks == {"custom_tool_input_wrapped": 1}
    # no output_item.done: the wrapper is still closed at response.completed
    assert run([*events[:5], COMPLETED]).calls[0].arguments == {"input": text}
    # input only in .done
    no_deltas = [events[0], events[1], events[4], events[5], COMPLETED]
    assert run(no_deltas).calls[0].arguments == {"input": text}


def test_new_response_created_starts_a_second_stream() -> None:
    second = {**RESP, "response": {"id": "resp_2"}}
    pipeline = Pipeline("openai-responses")
    events = [RESP, *function_call(0, "call_1", "a", ["{}"]), COMPLETED, second, *function_call(0, "call_1", "b", ["{}"]), COMPLETED]
    for i, data in enumerate(events, 1):
        pipeline.feed(ProviderEvent(None, data, i, 0))
    pipeline.close()
    results = pipeline.results()
    assert [(r.end, [c.name for c in r.calls]) for r in results] == [("complete", ["a"]), ("complete", ["b"])]


def test_sse_with_data_line_before_event_line_is_detected_and_read() -> None:
    events = [RESP, *function_call(0, "call_1", "second_tool", ["{}"]), COMPLETED]
    raw = "".join(f"data: {json.dumps(e)}\nevent: {e['type']}\n\n" for e in events).encode()
    parsed = read_capture(raw)
    assert detect(parsed[0]) == "openai-responses"
    pipeline = Pipeline()
    for ev in parsed:
        pipeline.feed(ev)
    pipeline.close()
    (result,) = pipeline.results()
    assert pipeline.dialect == "openai-responses"
    assert [(c.call_id, c.state, c.arguments) for c in result.calls] == [("call_1", CallState.COMMITTED, {})]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=40), max_size=8))
def test_any_split_of_the_argument_text_assembles_the_same(cuts: list[int]) -> None:
    text = '{"path":"/tmp/ü file","lines":[1,2,3],"ok":true}'
    bounds = [0, *sorted({c % (len(text) + 1) for c in cuts}), len(text)]
    deltas = [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    call = run([RESP, *function_call(0, "call_A", "edit", deltas, done=text), COMPLETED]).calls[0]
    assert call.state is CallState.COMMITTED
    assert call.arguments == json.loads(text) and call.bytes == len(text.encode())


def test_oversized_arguments_fail_while_streaming() -> None:
    pipeline = Pipeline("openai-responses", config=AssembleConfig(max_tool_argument_bytes=16))
    for i, data in enumerate([RESP, *function_call(0, "call_A", "write", ['{"text":"', "x" * 20, '"}']), COMPLETED], 1):
        pipeline.feed(ProviderEvent(None, data, i, 0))
    pipeline.close()
    call = pipeline.results()[0].calls[0]
    assert call.state is CallState.FAILED and (call.reason or "").startswith("arguments_exceed_max_bytes")


def test_cancel_mid_stream_cancels_the_open_call() -> None:
    pipeline = Pipeline("openai-responses")
    for i, data in enumerate([RESP, *function_call(0, "call_A", "add", ['{"a":'])[:2]], 1):
        pipeline.feed(ProviderEvent(None, data, i, 0))
    pipeline.cancel()
    (result,) = pipeline.results()
    assert result.end == "cancelled" and result.calls[0].state is CallState.CANCELLED
    assert [(r.tool_call_id, r.is_error) for r in result.results] == [("call_A", True)]


# ------------------------------------------------------------------ the finalized text is authoritative


def test_custom_tool_done_text_differing_from_its_deltas_replaces_them() -> None:
    item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_C", "name": "code_exec", "input": ""}
    events = [
        RESP,
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.custom_tool_call_input.delta", "item_id": "ctc_1", "output_index": 0, "delta": 'print("a'},
        {"type": "response.custom_tool_call_input.done", "item_id": "ctc_1", "output_index": 0, "input": 'print("a", "b")'},
        {"type": "response.output_item.done", "output_index": 0, "item": {**item, "input": 'print("a", "b")'}},
        COMPLETED,
    ]
    result = run(events)
    assert result.calls[0].arguments == {"input": 'print("a", "b")'}
    assert result.quirks == {"custom_tool_input_wrapped": 1, "done_arguments_differ": 1}


def completed_with(*items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": list(items)}}


def test_response_completed_output_is_final_where_no_done_event_came() -> None:
    added = {"type": "response.output_item.added", "output_index": 0, "item": fc_item("call_A", "add", "fc_0")}
    delta = {"type": "response.function_call_arguments.delta", "item_id": "fc_0", "output_index": 0, "delta": '{"a":'}
    result = run([RESP, added, delta, completed_with(fc_item("call_A", "add", "fc_0", '{"a":3}', "completed"))])
    assert result.calls[0].state is CallState.COMMITTED and result.calls[0].arguments == {"a": 3}
    assert result.quirks == {"done_arguments_differ": 1}


def test_item_only_in_response_completed_is_a_call() -> None:
    result = run([RESP, completed_with(fc_item("call_A", "add", "fc_0", '{"a":3}', "completed"))])
    (call,) = result.calls
    assert (call.call_id, call.state, call.arguments) == ("call_A", CallState.COMMITTED, {"a": 3})
    assert result.quirks == {"item_only_in_response_completed": 1}
    # a streamed item repeated in response.completed is the same call, matched by item or call id
    events = function_call(0, "call_A", "add", ['{"a":3}'])
    for repeated in (fc_item("call_A", "add", "fc_0", '{"a":3}'), fc_item("call_A", "add", "other_id", '{"a":3}')):
        again = run([RESP, *events, completed_with(repeated)])
        assert len(again.calls) == 1 and again.quirks == {}


def test_a_later_final_text_that_differs_is_a_quirk_and_the_first_stays() -> None:
    events = function_call(0, "call_A", "add", ['{"a":1}'])
    events[-1] = {**events[-1], "item": fc_item("call_A", "add", "fc_0", '{"a":2}', "completed")}
    result = run([RESP, *events, completed_with(fc_item("call_A", "add", "fc_0", '{"a":2}', "completed"))])
    assert result.calls[0].arguments == {"a": 1}
    assert result.quirks == {"final_arguments_differ": 2}


def test_delta_after_the_final_text_is_ignored() -> None:
    events = function_call(0, "call_A", "add", ['{"a":1}'])
    late = {"type": "response.function_call_arguments.delta", "item_id": "fc_0", "output_index": 0, "delta": "xx"}
    result = run([RESP, *events[:3], late, *events[3:], COMPLETED])
    assert result.calls[0].state is CallState.COMMITTED and result.calls[0].arguments == {"a": 1}
    assert result.quirks == {"delta_after_done": 1}


def test_empty_final_text_is_no_text() -> None:
    result = run([RESP, *function_call(0, "call_A", "add", ['{"a":1}'], done=""), COMPLETED])
    assert result.calls[0].arguments == {"a": 1} and result.quirks == {}
