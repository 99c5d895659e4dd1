"""A later chunk naming a different tool for the same call fails that call (reason
``name_conflict``); the same name repeated is harmless. In every dialect where a call's
name can arrive more than once: OpenAI Chat (a name on continuation chunks) and the
Responses API (``output_item.added`` and ``output_item.done``)."""

from __future__ import annotations

from typing import Any

import pytest

from toollatch import CallState, Pipeline
from toollatch.wire.capture import DONE, ProviderEvent
from toollatch.core.model import StreamResult
from toollatch.core.registry import ToolRegistry

HEAD = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def run(dialect: str, events: list[Any], tools: tuple[str, ...] = ()) -> StreamResult:
    pipeline = Pipeline(dialect, registry=ToolRegistry({name: None for name in tools}) if tools else None)
    for i, data in enumerate(events, 1):
        pipeline.feed(ProviderEvent(None, data, i, 0))
    pipeline.close()
    (result,) = pipeline.results()
    return result


def chat(later_name: str) -> list[Any]:
    def entry(**fn: str) -> dict[str, Any]:
        return {**HEAD, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": fn}]}, "finish_reason": None}]}

    first = {"index": 0, "id": "call_A", "type": "function", "function": {"name": "lookup", "arguments": ""}}
    return [
        {**HEAD, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [first]}, "finish_reason": None}]},
        entry(name=later_name, arguments='{"q":'),
        entry(arguments='"alpha"}'),
        {**HEAD, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        DONE,
    ]


def responses(later_name: str) -> list[Any]:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_A", "name": "lookup", "arguments": ""}
    return [
        {"type": "response.created", "response": {"id": "r"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": '{"q":"alpha"}'},
        {"type": "response.output_item.done", "output_index": 0, "item": {**item, "name": later_name, "arguments": '{"q":"alpha"}'}},
        {"type": "response.completed", "response": {"id": "r"}},
    ]


@pytest.mark.parametrize(("dialect", "build"), [("openai-chat", chat), ("openai-responses", responses)])
def test_a_different_name_later_fails_the_call(dialect: str, build: Any) -> None:
    result = run(dialect, build("null"))
    (call,) = result.calls
    assert call.state is CallState.FAILED and call.name == "lookup"
    # no declared tool is named "null": provider text, shown by its length only
    assert call.reason == "name_conflict: a later chunk named a different tool for this call ('lookup', then a name of 4 characters that is no declared tool)"
    assert [(r.tool_call_id, r.is_error) for r in result.results] == [("call_A", True)]
    assert result.quirks.get("name_conflict") == 1


@pytest.mark.parametrize(("dialect", "build"), [("openai-chat", chat), ("openai-responses", responses)])
def test_a_later_declared_tool_name_is_quoted(dialect: str, build: Any) -> None:
    (call,) = run(dialect, build("search"), tools=("lookup", "search")).calls
    assert call.reason == "name_conflict: a later chunk named a different tool for this call ('lookup', then 'search')"


@pytest.mark.parametrize(("dialect", "build"), [("openai-chat", chat), ("openai-responses", responses)])
def test_the_same_name_repeated_stays_fine(dialect: str, build: Any) -> None:
    (call,) = run(dialect, build("lookup")).calls
    assert call.state is CallState.COMMITTED and call.arguments == {"q": "alpha"}


def test_a_long_name_is_cut_in_the_reason() -> None:
    (call,) = run("openai-chat", chat("n" * 500), tools=("lookup", "n" * 500)).calls
    assert call.reason is not None and call.reason.endswith("then '" + "n" * 64 + "…')")
