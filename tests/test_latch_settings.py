"""Each latch setting changes behaviour, both values of each choice (driven through wire bytes)."""

from __future__ import annotations

import json

import pytest

from toollatch import AssembleConfig, CallState, Pipeline, iter_capture, read_capture
from toollatch.core.calls import RunBudget
from toollatch.core.history import build_history, check_protocol
from toollatch.observe.metrics import Metrics
from toollatch.core.model import StreamResult, ToolResult

from .test_fixture_classes import (
    anthropic_end,
    anthropic_message_start,
    anthropic_sse,
    anthropic_tool_block,
    assemble_bytes,
    wire,
)

DIALECTS = ["openai-chat", "anthropic"]


def states(result: StreamResult) -> list[str]:
    return [c.state.value for c in result.calls]


# ------------------------------------------------------------------ budget


@pytest.mark.parametrize("dialect", DIALECTS)
def test_budget_counts_committed_calls_across_the_streams_of_a_run(dialect: str) -> None:
    turn = wire(dialect, [("c1", "f", ['{"a":1}']), ("c2", "g", ["{}"])])
    config = AssembleConfig(max_tool_calls_per_run=3)
    budget = RunBudget(config.max_tool_calls_per_run)
    turns = []
    for _ in range(2):  # two turns of one run share the budget
        turns.append(assemble_bytes(turn, config=config, budget=budget)[0])
    assert budget.committed == 3
    assert states(turns[0]) == ["committed", "committed"]
    assert states(turns[1]) == ["committed", "failed"]
    assert (turns[1].calls[1].reason or "").startswith("budget_exceeded")
    assert [r.tool_call_id for r in turns[1].results] == ["c2"]


def test_budget_spans_several_streams_in_one_input() -> None:
    one = anthropic_sse([anthropic_message_start("m1"), *anthropic_tool_block(0, "t1", "f", ["{}"]), *anthropic_end()])
    two = anthropic_sse([anthropic_message_start("m2"), *anthropic_tool_block(0, "t2", "f", ["{}"]), *anthropic_end()])
    results = assemble_bytes(one + two, config=AssembleConfig(max_tool_calls_per_run=1))
    assert [states(r) for r in results] == [["committed"], ["failed"]]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_budget_by_default(dialect: str) -> None:
    (result,) = assemble_bytes(wire(dialect, [(f"c{i}", "f", ["{}"]) for i in range(10)]))
    assert states(result) == ["committed"] * 10


# ------------------------------------------------------------------ pipelined commit


def _anthropic_two_blocks_then_truncated() -> bytes:
    events = [anthropic_message_start()]
    events += anthropic_tool_block(0, "toolu_fast", "get_weather", ['{"city":', '"Oslo"}'])
    events += anthropic_tool_block(1, "toolu_slow", "write_file", ['{"path":"a"}'])
    return anthropic_sse(events)  # no message_delta / message_stop: truncated


@pytest.mark.parametrize("enabled", [True, False])
def test_pipelined_commit_only_for_allow_listed_tools_at_their_block_end(enabled: bool) -> None:
    config = AssembleConfig(execute_before_stream_end=enabled, allow_pipelined_execute=("get_weather",))
    pipeline = Pipeline(config=config)
    committed_before_end = []
    for event in iter_capture([_anthropic_two_blocks_then_truncated()]):
        for ev in pipeline.feed(event):
            if ev.kind == "state" and ev.call and ev.call.state is CallState.COMMITTED:
                committed_before_end.append(ev.call.name)
    pipeline.close()
    (result,) = pipeline.results()
    assert result.end == "truncated"
    if enabled:
        assert committed_before_end == ["get_weather"]
        assert states(result) == ["committed", "failed"]
        assert result.calls[0].arguments == {"city": "Oslo"}
    else:
        assert committed_before_end == []
        assert states(result) == ["failed", "failed"]
    assert (result.calls[1].reason or "").startswith("stream_truncated")


def test_allow_list_without_the_switch_commits_nothing_early() -> None:
    config = AssembleConfig(execute_before_stream_end=False, allow_pipelined_execute=("get_weather", "write_file"))
    (result,) = assemble_bytes(_anthropic_two_blocks_then_truncated(), config=config)
    assert states(result) == ["failed", "failed"]


# ------------------------------------------------------------------ protocol repair


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("policy", ["error_result", "drop_with_protocol_repair"])
def test_on_invalid_json(dialect: str, policy: str) -> None:
    data = wire(dialect, [("c1", "f", ['{"a":1}']), ("c2", "g", ['{"a":'])])
    (result,) = assemble_bytes(data, config=AssembleConfig(on_invalid_json=policy))
    assert states(result) == ["committed", "failed"]
    doc = result.to_json()
    if policy == "error_result":
        assert [r.tool_call_id for r in result.results] == ["c2"]
        assert doc["repairs"] == []
    else:
        assert result.results == []
        assert [r["call_id"] for r in doc["repairs"]] == ["c2"]
        assert doc["repairs"][0]["repair"] == "dropped_from_history"


@pytest.mark.parametrize("policy", ["error_result", "drop_with_protocol_repair"])
def test_on_args_overflow(policy: str) -> None:
    data = wire("openai-chat", [("c1", "f", ['{"a":"' + "x" * 50 + '"}']), ("c2", "g", ["{}"])])
    config = AssembleConfig(max_tool_argument_bytes=20, on_args_overflow=policy)
    (result,) = assemble_bytes(data, config=config)
    assert states(result) == ["failed", "committed"]
    assert (result.calls[0].reason or "").startswith("arguments_exceed_max_bytes")
    assert [r.tool_call_id for r in result.results] == (["c1"] if policy == "error_result" else [])


def test_overflow_policy_does_not_apply_to_invalid_json() -> None:
    data = wire("openai-chat", [("c1", "f", ["{"])])
    (result,) = assemble_bytes(data, config=AssembleConfig(on_args_overflow="drop_with_protocol_repair"))
    assert [r.tool_call_id for r in result.results] == ["c1"]


# ------------------------------------------------------------------ order and object rule


@pytest.mark.parametrize(("order", "expected"), [("provider_index", ["first", "second"]), ("arrival", ["second", "first"])])
def test_finalize_order(order: str, expected: list[str]) -> None:
    events = [anthropic_message_start()]
    events += anthropic_tool_block(3, "toolu_b", "second", ["{}"])  # arrives first, higher index
    events += anthropic_tool_block(1, "toolu_a", "first", ["{}"])
    events += anthropic_end()
    (result,) = assemble_bytes(anthropic_sse(events), config=AssembleConfig(finalize_order=order))
    assert [c.name for c in result.calls] == expected


@pytest.mark.parametrize("must", [True, False])
def test_arguments_must_be_object(must: bool) -> None:
    (result,) = assemble_bytes(wire("openai-chat", [("c1", "f", ["[1,", "2]"])]), config=AssembleConfig(arguments_must_be_object=must))
    if must:
        assert states(result) == ["failed"] and (result.calls[0].reason or "").startswith("arguments_not_object")
    else:
        assert states(result) == ["committed"] and result.calls[0].arguments == [1, 2]


# ------------------------------------------------------------------ metrics


@pytest.mark.parametrize("tool_label", [False, True])
def test_metrics_are_counted_with_low_cardinality_labels(tool_label: bool) -> None:
    metrics = Metrics(tool_name_label=tool_label)
    data = wire("openai-chat", [("c1", "ok_tool", ['{"a":1}']), ("c2", "bad_tool", ['{"sk-secret":']), ("c3", "big", ["x" * 40])])
    assemble_bytes(data, config=AssembleConfig(max_tool_argument_bytes=30), metrics=metrics)
    text = metrics.exposition().decode()
    label = '{provider="openai-chat",tool_name="bad_tool"}' if tool_label else '{provider="openai-chat"}'
    assert f"tool_assemble_invalid_json_total{label} 1.0" in text
    big = '{provider="openai-chat",tool_name="big"}' if tool_label else '{provider="openai-chat"}'
    assert f"tool_assemble_overflow_total{big} 1.0" in text
    assert "tool_assemble_args_bytes_count" in text and "tool_assemble_to_commit_seconds_count" in text
    assert "tool_execute_rejected_not_committed_total 0.0" in text
    assert ("tool_name=" in text) is tool_label
    assert "sk-secret" not in text


@pytest.mark.parametrize("end", ["complete", "truncated"])
def test_a_pipelined_commit_keeps_its_tool_call_id_to_itself(end: str) -> None:
    # The first call commits at its block stop (and may be running): a later call with the
    # same id must never commit too, and the id gets exactly one result: the execution's.
    events = [anthropic_message_start()]
    events += anthropic_tool_block(0, "toolu_same", "get_weather", ['{"city":"Oslo"}'])
    events += anthropic_tool_block(1, "toolu_same", "get_weather", ['{"city":"Rome"}'])
    events += anthropic_end() if end == "complete" else []
    config = AssembleConfig(execute_before_stream_end=True, allow_pipelined_execute=("get_weather",))
    (result,) = assemble_bytes(anthropic_sse(events), config=config)
    assert states(result) == ["committed", "failed"]
    assert result.calls[0].arguments == {"city": "Oslo"}
    # the reason of any call whose id another call of the stream carries, committed first or not
    assert result.calls[1].reason == "stream_error: call id used by more than one call"
    assert result.calls[1].repaired and result.results == []
    history = build_history(result, {"toolu_same": ToolResult("toolu_same", False, "12 °C")})
    assert check_protocol(history) == []
    assert json.dumps(history).count('"toolu_same"') == 2  # one tool_use and its result: the execution's


def test_a_pipelined_call_whose_id_a_later_open_call_carries_does_not_commit() -> None:
    # Block 1 starts with block 0's id before block 0 stops: at block 0's latch two calls
    # carry the id, so running it could run the id twice. Both fail; one result answers it.
    # (Before, block 0 committed; the verdict then hung on which of the two stopped first.)
    b0 = anthropic_tool_block(0, "toolu_same", "get_weather", ['{"city":"Oslo"}'])
    b1 = anthropic_tool_block(1, "toolu_same", "get_weather", ['{"city":"Rome"}'])
    events = [anthropic_message_start(), b0[0], b1[0], *b0[1:], *b1[1:], *anthropic_end()]
    config = AssembleConfig(execute_before_stream_end=True, allow_pipelined_execute=("get_weather",))
    (result,) = assemble_bytes(anthropic_sse(events), config=config)
    assert states(result) == ["failed", "failed"]
    assert {c.reason for c in result.calls} == {"stream_error: call id used by more than one call"}
    assert [r.tool_call_id for r in result.results] == ["toolu_same"]


@pytest.mark.parametrize("order", ["provider_index", "arrival"])
def test_the_budget_goes_to_the_calls_that_opened_first_whatever_the_finalize_order(order: str) -> None:
    events = [anthropic_message_start()]
    events += anthropic_tool_block(3, "toolu_b", "second", ["{}"])  # opens first, higher index
    events += anthropic_tool_block(1, "toolu_a", "first", ["{}"])
    (result,) = assemble_bytes(anthropic_sse(events + anthropic_end()), config=AssembleConfig(finalize_order=order, max_tool_calls_per_run=1))
    verdicts = {c.call_id: (c.state.value, (c.reason or "").split(":")[0]) for c in result.calls}
    assert verdicts == {"toolu_b": ("committed", ""), "toolu_a": ("failed", "budget_exceeded")}


@pytest.mark.parametrize(("budget", "expected"), [(1, ["committed", "failed"]), (2, ["committed", "committed"])])
def test_a_pipelined_call_leaves_the_budget_to_calls_opened_before_it(budget: int, expected: list[str]) -> None:
    # Block 0 (not pipelined) waits for the stream end; block 1 (pipelined) stops first.
    # With room for one call only, block 1 waits for the end too, where block 0, opened
    # first, takes the room. (Before, block 1 took it at its stop and block 0 failed.)
    b0 = anthropic_tool_block(0, "toolu_a", "slow", ["{}"])
    b1 = anthropic_tool_block(1, "toolu_b", "get_weather", ['{"city":"Oslo"}'])
    events = [anthropic_message_start(), *b0, *b1, *anthropic_end()]
    config = AssembleConfig(execute_before_stream_end=True, allow_pipelined_execute=("get_weather",), max_tool_calls_per_run=budget)
    pipeline = Pipeline(config=config)
    seen: list[str] = []  # each verdict, and whether the stream had ended when it came
    ended = False
    for event in read_capture(anthropic_sse(events), "cap"):
        for ev in pipeline.feed(event):
            ended = ended or ev.kind == "stream_end"
            if ev.kind == "state" and ev.call is not None and ev.call.state in (CallState.COMMITTED, CallState.FAILED):
                seen.append(f"{ev.call.call_id} {ev.call.state.value} {'end' if ended or event.event == 'message_stop' else 'early'}")
    pipeline.close()
    (result,) = pipeline.results()
    assert states(result) == expected
    if budget == 1:  # both judged at the end, block 0 first
        assert seen == ["toolu_a committed end", "toolu_b failed end"]
    else:  # room for both: block 1 commits at its stop
        assert seen == ["toolu_b committed early", "toolu_a committed end"]


def test_without_pipelining_two_calls_with_one_id_both_fail_with_one_result() -> None:
    events = [anthropic_message_start()]
    events += anthropic_tool_block(0, "toolu_same", "get_weather", ['{"city":"Oslo"}'])
    events += anthropic_tool_block(1, "toolu_same", "get_weather", ['{"city":"Rome"}'])
    (result,) = assemble_bytes(anthropic_sse(events + anthropic_end()))
    assert states(result) == ["failed", "failed"]
    assert [r.tool_call_id for r in result.results] == ["toolu_same"]
