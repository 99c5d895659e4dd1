"""The finalized turn in each dialect's shape, and the protocol check over every capture and case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toollatch import AssembleConfig, CommittedCall
from toollatch.core.history import build_history, check_protocol
from toollatch.core.model import CallState, StreamResult, ToolResult

from .conftest import CAPTURES, CASES, expected_files
from .test_captures import assemble
from .test_fixture_classes import assemble_bytes, wire

ALL_FILES = expected_files(CAPTURES) + expected_files(CASES)


def run_committed(result: StreamResult) -> dict[str, ToolResult]:
    """What an executor would return for every committed client call."""
    return {
        c.call_id: ToolResult(c.call_id, False, "ok")
        for c in result.calls
        if c.state is CallState.COMMITTED and c.executor == "client" and c.call_id
    }


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_history_of_every_capture_and_case_is_protocol_valid(path: Path) -> None:
    for result in assemble(path):
        history = build_history(result, run_committed(result))
        assert check_protocol(history) == []
        client_calls = [c for c in result.calls if c.executor == "client"]
        assert bool(history) == bool(client_calls)
        assert json.loads(json.dumps(history)) == history  # plain JSON, no objects


@pytest.mark.parametrize("dialect", ["openai-chat", "anthropic"])
def test_history_shape(dialect: str) -> None:
    (result,) = assemble_bytes(wire(dialect, [("c1", "f", ['{"a":1}']), ("c2", "g", ['{"sk-secret"'])]))
    history = build_history(result, run_committed(result))
    if dialect == "openai-chat":
        assistant, *tools = history
        assert assistant["role"] == "assistant"
        assert [tc["function"]["arguments"] for tc in assistant["tool_calls"]] == ['{"a":1}', "{}"]
        assert [(t["role"], t["tool_call_id"]) for t in tools] == [("tool", "c1"), ("tool", "c2")]
        assert tools[1]["content"].startswith("invalid_json")
    else:
        assistant, user = history
        assert [b["type"] for b in assistant["content"]] == ["tool_use", "tool_use"]
        assert [b["input"] for b in assistant["content"]] == [{"a": 1}, {}]
        assert [(b["tool_use_id"], b["is_error"]) for b in user["content"]] == [("c1", False), ("c2", True)]
    assert "sk-secret" not in json.dumps(history)


def test_repaired_calls_leave_the_history_and_owe_nothing() -> None:
    data = wire("openai-chat", [("c1", "f", ['{"a":1}']), ("c2", "g", ["{"])])
    (result,) = assemble_bytes(data, config=AssembleConfig(on_invalid_json="drop_with_protocol_repair"))
    history = build_history(result, run_committed(result))
    assert [tc["id"] for tc in history[0]["tool_calls"]] == ["c1"]
    assert check_protocol(history) == []


def test_protocol_check_finds_missing_duplicate_and_orphan_results() -> None:
    assistant = {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]}
    assert check_protocol([assistant, {"role": "tool", "tool_call_id": "a"}]) == ["call 'b' has 0 results"]
    doubled = [assistant, *({"role": "tool", "tool_call_id": x} for x in ("a", "a", "b"))]
    assert check_protocol(doubled) == ["call 'a' has 2 results"]
    orphan = [assistant, *({"role": "tool", "tool_call_id": x} for x in ("a", "b", "zz"))]
    assert check_protocol(orphan) == ["result for unknown call 'zz'"]


def test_committed_call_type_is_what_history_is_built_from() -> None:
    (result,) = assemble_bytes(wire("anthropic", [("t1", "f", ['{"q":"x"}'])]))
    assert result.calls[0].state is CallState.COMMITTED
    call = CommittedCall(result.calls[0].key, "t1", "f", {"q": "x"})
    history = build_history(result, {"t1": ToolResult(call.call_id, False, "done")})
    assert history[1]["content"][0]["content"] == "done"


# ------------------------------------------------------------------ two calls that carry one tool_call_id


def _chat_same_id(arguments: list[str], *, end: bool = True) -> bytes:
    """OpenAI chat: one call per entry of ``arguments``, all with the id ``call_X``."""
    entries = [{"index": i, "id": "call_X", "type": "function", "function": {"name": "pay", "arguments": a}} for i, a in enumerate(arguments)]
    docs: list[dict[str, object]] = [{"choices": [{"index": 0, "delta": {"tool_calls": entries}}]}]
    if end:
        docs.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + ("data: [DONE]\n\n" if end else "")).encode()


def _one_id_one_answer(result: StreamResult) -> None:
    history = build_history(result, run_committed(result))
    assert check_protocol(history) == []
    kept = [c for c in result.calls if not c.repaired]
    assert len(kept) == 1 and all(c.repaired for c in result.calls if c is not kept[0])
    answers = (kept[0].state is CallState.COMMITTED) + sum(r.tool_call_id == "call_X" for r in result.results)
    assert answers == 1


@pytest.mark.parametrize(
    ("data", "config", "end"),
    [
        (_chat_same_id(['{"amount": 1}', '{"amount": 2}']), AssembleConfig(), "complete"),
        (_chat_same_id(['{"amount": 1}', '{"amount": 2}'], end=False), AssembleConfig(), "truncated"),
        (_chat_same_id(['{"amount": 1}', '{"amount": 2}']), AssembleConfig(max_tool_argument_bytes=4), "complete"),
        (_chat_same_id(['{"amount": 1}', "{"]), AssembleConfig(), "complete"),
        (_chat_same_id(["{", '{"amount": 2}', "{"]), AssembleConfig(on_invalid_json="drop_with_protocol_repair"), "complete"),
    ],
    ids=["both-latched", "truncated", "both-overflowed", "one-invalid", "drop-repair"],
)
def test_two_calls_with_one_id_leave_one_entry_and_one_answer(data: bytes, config: AssembleConfig, end: str) -> None:
    (result,) = assemble_bytes(data, config=config)
    assert result.end == end
    assert all(c.state is not CallState.COMMITTED for c in result.calls)
    _one_id_one_answer(result)


def test_two_calls_with_one_id_cancelled_leave_one_entry_and_one_answer() -> None:
    from toollatch import Pipeline, read_capture

    pipeline = Pipeline()
    for event in read_capture(_chat_same_id(['{"amount": 1', '{"amount": 2'], end=False)):
        pipeline.feed(event)
    pipeline.cancel()
    (result,) = pipeline.results()
    assert result.end == "cancelled"
    _one_id_one_answer(result)


def test_a_later_call_with_the_id_of_a_failed_call_fails_too_and_the_id_is_answered_once() -> None:
    """Pipelined: the first call_X fails (too long); the second, valid, reaches its block
    stop while the first still carries the id, so it fails too (it once committed there):
    one record kept, one error result."""
    events = [
        {"type": "message_start", "message": {"id": "m", "content": []}},
        *(
            ev
            for i, args in enumerate(['{"amount": 100000}', '{"a": 1}'])
            for ev in (
                {"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": "call_X", "name": "pay", "input": {}}},
                {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": args}},
                {"type": "content_block_stop", "index": i},
            )
        ),
        {"type": "message_stop"},
    ]
    data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    config = AssembleConfig(execute_before_stream_end=True, allow_pipelined_execute=("pay",), max_tool_argument_bytes=12)
    (result,) = assemble_bytes(data, config=config)
    assert [(c.state, c.repaired) for c in result.calls] == [(CallState.FAILED, False), (CallState.FAILED, True)]
    assert result.calls[1].reason == "stream_error: call id used by more than one call"
    assert [r.tool_call_id for r in result.results] == ["call_X"]
    _one_id_one_answer(result)
