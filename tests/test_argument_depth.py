"""``max_tool_argument_depth``: arguments nested deeper than the limit FAIL ``arguments_too_deep``
at finalization, before their text is parsed, so every committed value has a bounded depth."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toollatch import Reason, assemble_events, read_capture
from toollatch.core import finalize
from toollatch.core.config import ARGUMENT_DEPTH_CEILING, AssembleConfig
from toollatch.core.finalize import check_arguments
from toollatch.core.model import CallState


def nested(depth: int) -> str:
    """An object whose arguments nest exactly ``depth`` levels: ``{"a": [[...]]}``."""
    return '{"a":' + ("[" * (depth - 1) + "]" * (depth - 1) if depth > 1 else "0") + "}"


def chat(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def openai_call(args: str) -> bytes:
    start = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}
    events = [chat({"tool_calls": [start]}), chat({}, "tool_calls")]
    return ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()


def run(data: bytes, config: AssembleConfig | None = None) -> Any:
    (result,) = assemble_events(read_capture(data), config=config)
    return result


def test_the_default_limit_is_64_and_the_reason_is_named() -> None:
    assert AssembleConfig().max_tool_argument_depth == 64
    assert Reason.ARGUMENTS_TOO_DEEP.value == "arguments_too_deep"


@pytest.mark.parametrize("limit", [1, 2, 64, ARGUMENT_DEPTH_CEILING])
def test_exactly_the_limit_commits_one_more_fails(limit: int) -> None:
    ok = check_arguments(nested(limit), "f", registry=None, max_depth=limit)
    assert ok.reason is None and ok.arguments is not None
    too_deep = check_arguments(nested(limit + 1), "f", registry=None, max_depth=limit)
    assert too_deep.arguments is None
    assert too_deep.reason == f"arguments_too_deep: nested {limit + 1} levels deep; the limit is {limit}"


def test_no_limit_when_none_is_given() -> None:
    assert check_arguments(nested(100), "f", registry=None).reason is None


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"a": "[" * 500 + "{" * 500, "b": ['x"]]]\\[[['], "c": "\\\\"})
    verdict = check_arguments(text, "f", registry=None, max_depth=2)
    assert verdict.reason is None and verdict.arguments == json.loads(text)


def test_many_shallow_containers_are_not_deep() -> None:
    text = json.dumps({"rows": [{"id": i, "tags": [str(i)]} for i in range(500)]})
    assert check_arguments(text, "f", registry=None, max_depth=4).reason is None  # 1,001 containers, 4 deep
    assert check_arguments(text, "f", registry=None, max_depth=3).reason == "arguments_too_deep: nested 4 levels deep; the limit is 3"


def test_too_deep_text_is_never_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str) -> Any:
        raise AssertionError("parsed")

    monkeypatch.setattr(finalize, "strict_loads", refuse)
    verdict = check_arguments(nested(100_000), "f", registry=None, max_depth=64)
    assert verdict.reason is not None and verdict.reason.startswith("arguments_too_deep: nested 100000 levels deep")


def test_depth_is_checked_before_json_validity_but_after_the_tool_name() -> None:
    cut = "[" * 200  # too deep and not valid JSON either
    assert (check_arguments(cut, "f", registry=None, max_depth=64).reason or "").startswith("arguments_too_deep")
    shallow_cut = "[" * 10
    assert (check_arguments(shallow_cut, "f", registry=None, max_depth=64).reason or "").startswith("invalid_json")
    from toollatch.core.registry import ToolRegistry

    registry = ToolRegistry.from_tools([{"name": "g"}])
    assert (check_arguments(cut, "f", registry=registry, max_depth=64).reason or "").startswith("unknown_tool")


@pytest.mark.parametrize("depth", [65, 950, 5000])
def test_a_deep_call_fails_with_exactly_one_error_result(depth: int) -> None:
    result = run(openai_call(nested(depth)))
    (call,) = result.calls
    assert call.state is CallState.FAILED and call.arguments is None
    assert call.reason == f"arguments_too_deep: nested {depth} levels deep; the limit is 64"
    assert [(r.tool_call_id, r.is_error, r.content) for r in result.results] == [("c1", True, call.reason)]
    assert call.bytes == len(nested(depth))


def test_the_configured_limit_applies() -> None:
    assert run(openai_call(nested(200)), AssembleConfig(max_tool_argument_depth=200)).calls[0].state is CallState.COMMITTED
    assert run(openai_call(nested(10)), AssembleConfig(max_tool_argument_depth=9)).calls[0].reason == (
        "arguments_too_deep: nested 10 levels deep; the limit is 9"
    )
