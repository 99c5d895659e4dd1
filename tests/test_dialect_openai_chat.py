"""OpenAI Chat Completions adapter, from inline chunks (provider doc: "The chat completion chunk object")."""

from __future__ import annotations

from typing import Any

import pytest

from toollatch import CallState, Pipeline
from toollatch.wire.capture import ProviderEvent
from toollatch.dialects.openai_chat import OpenAIChatAdapter
from toollatch.core.model import ArgsFragment, CallIdentity, CallStart, Op, Quirk, StreamEnd, StreamError, StreamResult, StreamTruncated

from .test_fixture_classes import openai_choice, openai_chunk, openai_tool_call

TC = openai_tool_call


def ev(data: Any, line: int = 1) -> ProviderEvent:
    return ProviderEvent(None, data, line, 0)


def chunk_with(*entries: dict[str, Any], choice: int = 0, finish: str | None = None) -> dict[str, Any]:
    return openai_chunk([openai_choice(choice, tool_calls=list(entries), finish_reason=finish)])


def feed_all(*datas: Any) -> tuple[list[Op], OpenAIChatAdapter]:
    adapter = OpenAIChatAdapter()
    ops: list[Op] = []
    for i, data in enumerate(datas):
        ops += adapter.feed(ev(data, i + 1))
    return ops, adapter


def assemble(*datas: Any) -> StreamResult:
    pipeline = Pipeline("openai-chat")
    for i, data in enumerate(datas):
        pipeline.feed(ev(data, i + 1))
    pipeline.close()
    (result,) = pipeline.results()
    return result


def finish(*choices: int) -> dict[str, Any]:
    return openai_chunk([openai_choice(c, finish_reason="tool_calls") for c in choices or (0,)])


def fragments_by_key(ops: list[Op]) -> dict[tuple[int, ...], str]:
    out: dict[tuple[int, ...], str] = {}
    for op in ops:
        if isinstance(op, ArgsFragment):
            out[op.key] = out.get(op.key, "") + op.text
    return out


# ------------------------------------------------------------------ keying


def test_calls_are_keyed_by_choice_and_index() -> None:
    ops, _ = feed_all(
        openai_chunk(
            [
                openai_choice(0, tool_calls=[TC(0, call_id="c00", name="f", arguments='{"x":')]),
                openai_choice(1, tool_calls=[TC(0, call_id="c10", name="g", arguments='{"y":')]),
            ]
        ),
        chunk_with(TC(0, arguments="1}"), choice=1),
        chunk_with(TC(0, arguments="0}"), choice=0),
    )
    starts = [op for op in ops if isinstance(op, CallStart)]
    assert [(s.key, s.call_id, s.name) for s in starts] == [((0, 0, 0), "c00", "f"), ((1, 0, 0), "c10", "g")]
    assert fragments_by_key(ops) == {(0, 0, 0): '{"x":0}', (1, 0, 0): '{"y":1}'}


def test_fragments_follow_index_not_position_in_array() -> None:
    ops, _ = feed_all(
        chunk_with(TC(0, call_id="a", name="f", arguments=""), TC(1, call_id="b", name="g", arguments="")),
        chunk_with(TC(1, arguments='{"b":'), TC(0, arguments='{"a":')),  # index 1 first in the array
        chunk_with(TC(1, arguments="2}")),
        chunk_with(TC(0, arguments="1}")),
    )
    assert fragments_by_key(ops) == {(0, 0, 0): '{"a":1}', (0, 1, 0): '{"b":2}'}


def test_different_id_at_same_index_is_a_new_call() -> None:
    ops, _ = feed_all(
        chunk_with(TC(0, call_id="call_A", name="f", arguments='{"n":1}')),
        chunk_with(TC(0, call_id="call_B", name="f", arguments='{"n":')),
        chunk_with(TC(0, arguments="2}")),  # continuation belongs to the newest call at index 0
    )
    starts = [(op.key, op.call_id) for op in ops if isinstance(op, CallStart)]
    assert starts == [((0, 0, 0), "call_A"), ((0, 0, 1), "call_B")]
    assert Quirk("same_index_new_id") in ops
    assert fragments_by_key(ops) == {(0, 0, 0): '{"n":1}', (0, 0, 1): '{"n":2}'}


def test_same_id_repeated_at_same_index_is_the_same_call() -> None:
    result = assemble(
        chunk_with(TC(0, call_id="call_A", name="f", arguments='{"n":')),
        chunk_with(TC(0, call_id="call_A", name="f", arguments="1}")),
        finish(),
    )
    assert [(c.call_id, c.name, c.arguments) for c in result.calls] == [("call_A", "f", {"n": 1})]


def test_entry_without_index_binds_by_id() -> None:
    ops, _ = feed_all(
        chunk_with(TC(None, call_id="id_1", name="f", arguments='{"a":')),
        chunk_with(TC(None, call_id="id_2", name="g", arguments='{"b":')),
        chunk_with(TC(None, call_id="id_1", arguments="1}")),
        chunk_with(TC(None, call_id="id_2", arguments="2}")),
    )
    starts = [(op.key, op.call_id) for op in ops if isinstance(op, CallStart)]
    assert starts == [((0, 0, 0), "id_1"), ((0, 1, 0), "id_2")]
    assert fragments_by_key(ops) == {(0, 0, 0): '{"a":1}', (0, 1, 0): '{"b":2}'}
    assert Quirk("missing_index") in ops


def test_entry_without_index_or_id_binds_to_the_single_call() -> None:
    result = assemble(
        chunk_with(TC(None, call_id="id_1", name="f", arguments='{"a"')),
        chunk_with(TC(None, arguments=":")),
        chunk_with(TC(None, arguments="1}")),
        finish(),
    )
    assert [(c.call_id, c.state, c.arguments) for c in result.calls] == [("id_1", CallState.COMMITTED, {"a": 1})]


def test_entry_without_index_or_id_while_two_calls_are_open_fails_not_guessed() -> None:
    datas = (
        chunk_with(TC(0, call_id="a", name="f", arguments='{"a":')),
        chunk_with(TC(1, call_id="b", name="g", arguments='{"b":')),
        chunk_with(TC(None, arguments="1}")),
    )
    ops, _ = feed_all(*datas)
    errors = [op for op in ops if isinstance(op, StreamError)]
    assert len(errors) == 1 and "2 calls" in (errors[0].detail or "")
    assert fragments_by_key(ops) == {(0, 0, 0): '{"a":', (0, 1, 0): '{"b":'}  # "1}" went nowhere
    result = assemble(*datas, chunk_with(TC(1, arguments="2}")), finish())
    assert result.end == "error"
    assert [(c.state, (c.reason or "").split(":")[0]) for c in result.calls] == [(CallState.FAILED, "stream_error")] * 2
    assert len(result.results) == 2


def test_several_entries_in_one_chunk_apply_in_order() -> None:
    ops, _ = feed_all(
        chunk_with(
            TC(0, call_id="a", name="list_dir"),
            TC(0, arguments='{"d'),
            TC(1, call_id="b", name="g", arguments="{}"),
            TC(0, arguments='ir": "./src"}'),
        ),
    )
    kinds = [type(op).__name__ for op in ops if not isinstance(op, Quirk)]
    assert kinds == ["CallStart", "ArgsFragment", "CallStart", "ArgsFragment", "ArgsFragment"]
    assert fragments_by_key(ops) == {(0, 0, 0): '{"dir": "./src"}', (0, 1, 0): "{}"}


def test_name_and_id_on_continuation_are_identity_not_text() -> None:
    result = assemble(
        chunk_with(TC(0, call_id="c1", name="get_weather", arguments="")),
        chunk_with(TC(0, call_id="", name="get_weather", arguments='{"a":')),  # some gateways repeat the name
        chunk_with(TC(0, call_id="", name="", arguments="1}")),
        finish(),
    )
    (call,) = result.calls
    assert (call.call_id, call.name, call.arguments) == ("c1", "get_weather", {"a": 1})
    assert result.quirks.get("empty_id_on_continuation") == 2
    assert result.quirks.get("name_repeated") == 1


def test_identity_arriving_after_the_first_entry() -> None:
    ops, _ = feed_all(chunk_with(TC(0, arguments="{")), chunk_with(TC(0, call_id="late", name="f", arguments="}")))
    assert [op for op in ops if not isinstance(op, Quirk)][0] == CallStart((0, 0, 0), None, None)
    assert CallIdentity((0, 0, 0), "late", "f") in ops


def test_arguments_as_json_value_is_a_quirk() -> None:
    ops, _ = feed_all(chunk_with(TC(0, call_id="c", name="f", arguments={"k": "é"})))
    assert Quirk("arguments_as_json_value") in ops
    assert fragments_by_key(ops) == {(0, 0, 0): '{"k": "é"}'}


# ------------------------------------------------------------------ metadata and the end

AZURE_PROMPT_FILTER = {
    "id": "",
    "object": "",
    "created": 0,
    "model": "",
    "choices": [],
    "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {"hate": {"filtered": False, "severity": "safe"}}}],
}
AZURE_CONTENT_FILTER = {
    "id": "",
    "object": "",
    "created": 0,
    "model": "",
    "choices": [{"index": 0, "finish_reason": None, "content_filter_results": {"hate": {"filtered": False, "severity": "safe"}}}],
}
USAGE_ONLY = openai_chunk([], usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})


@pytest.mark.parametrize("data", [AZURE_PROMPT_FILTER, AZURE_CONTENT_FILTER, USAGE_ONLY, {"choices": None}, {"object": "x"}], ids=["prompt-filter", "content-filter", "usage", "null-choices", "no-choices"])
def test_metadata_chunks_make_no_ops(data: dict[str, Any]) -> None:
    ops, adapter = feed_all(chunk_with(TC(0, call_id="c", name="f", arguments="{")), data)
    assert not [op for op in ops if isinstance(op, (StreamEnd, StreamError, StreamTruncated))]
    assert adapter.close() == [StreamTruncated("input ended before finish_reason or [DONE]")]


def test_usage_on_a_running_choice_does_not_end() -> None:
    usage_chunk = openai_chunk([openai_choice(0, tool_calls=[TC(0, arguments="}")])], usage={"total_tokens": 3})
    ops, _ = feed_all(chunk_with(TC(0, call_id="c", name="f", arguments="{")), usage_chunk)
    assert not [op for op in ops if isinstance(op, StreamEnd)]


def test_done_ends_after_finish_reason_and_only_once() -> None:
    ops, adapter = feed_all(chunk_with(TC(0, call_id="c", name="f", arguments="{}")), finish(), USAGE_ONLY)
    assert [op for op in ops if isinstance(op, StreamEnd)] == []  # more may come before [DONE]
    assert [op for op in adapter.feed(ev("[DONE]")) if isinstance(op, StreamEnd)] == [StreamEnd("[DONE]")]
    assert adapter.close() == []


def test_finish_reason_without_done_ends_at_end_of_input() -> None:
    _, adapter = feed_all(chunk_with(TC(0, call_id="c", name="f", arguments="{}")), finish())
    assert [op for op in adapter.close() if isinstance(op, StreamEnd)] == [StreamEnd("finish_reason")]


def test_done_alone_ends() -> None:
    ops, adapter = feed_all(chunk_with(TC(0, call_id="c", name="f", arguments="{}")), "[DONE]")
    assert [op for op in ops if not isinstance(op, Quirk)][-1] == StreamEnd("[DONE]")
    assert adapter.close() == []


def test_finish_reason_with_tool_calls_in_the_same_chunk() -> None:
    result = assemble(chunk_with(TC(None, call_id="gSIMJ", name="weather", arguments='{"location": "SF"}'), finish="tool_calls"))
    assert result.end == "complete"
    assert [(c.call_id, c.arguments) for c in result.calls] == [("gSIMJ", {"location": "SF"})]


def test_n_choices_end_only_when_every_seen_choice_finished() -> None:
    both = openai_chunk(
        [
            openai_choice(0, tool_calls=[TC(0, call_id="a", name="f", arguments="{}")]),
            openai_choice(1, tool_calls=[TC(0, call_id="b", name="f", arguments='{"x":')]),
        ]
    )
    ops, adapter = feed_all(both, finish(0))
    assert not [op for op in ops if isinstance(op, StreamEnd)]
    late = adapter.feed(ev(chunk_with(TC(0, arguments="1}"), choice=1)))
    assert [op for op in late if not isinstance(op, Quirk)] == [ArgsFragment((1, 0, 0), "1}")]
    assert [op for op in adapter.feed(ev(finish(1))) if not isinstance(op, Quirk)] == []
    assert [op for op in adapter.close() if not isinstance(op, Quirk)] == [StreamEnd("finish_reason")]
    result = assemble(both, finish(0), chunk_with(TC(0, arguments="1}"), choice=1), finish(1))
    assert [(c.call_id, c.state, c.arguments) for c in result.calls] == [
        ("a", CallState.COMMITTED, {}),
        ("b", CallState.COMMITTED, {"x": 1}),
    ]


def test_truncated_when_only_one_of_two_choices_finished() -> None:
    both = openai_chunk([openai_choice(0, tool_calls=[TC(0, call_id="a", name="f", arguments="{}")]), openai_choice(1, tool_calls=[TC(0, call_id="b", name="f", arguments="{}")])])
    result = assemble(both, finish(0))
    assert result.end == "truncated"
    assert all(c.state is CallState.FAILED for c in result.calls)


def test_error_chunk_is_a_stream_error() -> None:
    ops, _ = feed_all(chunk_with(TC(0, call_id="c", name="f", arguments="{")), {"error": {"type": "server_error", "message": "boom"}})
    assert [op for op in ops if not isinstance(op, Quirk)][-1] == StreamError("server_error", "boom")
    result = assemble(chunk_with(TC(0, call_id="c", name="f", arguments="{}")), {"error": {"message": "boom"}})
    assert result.end == "error" and result.calls[0].state is CallState.FAILED


def test_error_chunk_then_end_of_input_records_no_op_after_end() -> None:
    _, adapter = feed_all(chunk_with(TC(0, call_id="c", name="f", arguments="{")), {"error": {"message": "boom"}})
    assert adapter.close() == []
    result = assemble(chunk_with(TC(0, call_id="c", name="f", arguments="{")), {"error": {"message": "boom"}})
    assert "op_after_stream_end" not in result.quirks


def test_no_end_is_truncated_and_nothing_commits() -> None:
    result = assemble(chunk_with(TC(0, call_id="c", name="f", arguments='{"a":1}')))
    assert result.end == "truncated"
    assert result.calls[0].state is CallState.FAILED and result.calls[0].arguments is None
    assert (result.calls[0].reason or "").startswith("stream_truncated")


def test_sparse_index_is_a_quirk_and_still_keyed() -> None:
    ops, _ = feed_all(chunk_with(TC(1, call_id="c", name="f", arguments="{}")))
    assert Quirk("sparse_index") in ops
    assert [op.key for op in ops if isinstance(op, CallStart)] == [(0, 1, 0)]


def test_malformed_entry_index_does_not_crash_the_stream() -> None:
    result = assemble(
        chunk_with(TC(0, call_id="c1", name="f", arguments='{"a":1}')),
        chunk_with({"index": [0], "function": {"arguments": ""}}),
        finish(),
    )
    assert result.end == "complete"
    assert result.calls[0].state is CallState.COMMITTED


def test_calls_whole_in_their_first_delta_are_counted_in_one_quirk_op() -> None:
    # c0, c2 and c3 arrive whole in their start entry, c1 in part; c3 then gets a second
    # fragment (a plain continuation), c1 its rest
    starts = [openai_tool_call(i, call_id=f"c{i}", name="f", arguments='{"a":1}' if i != 1 else '{"a":') for i in range(4)]
    more = [{"index": 1, "function": {"arguments": "1}"}}, {"index": 3, "function": {"arguments": " "}}]
    ops, _ = feed_all(chunk_with(*starts), chunk_with(*more), finish(), "[DONE]")
    quirks = [op for op in ops if isinstance(op, Quirk) and op.name == "whole_call_in_one_delta"]
    assert quirks == [Quirk("whole_call_in_one_delta", 2)]  # c0 and c2; c3 took a second fragment
