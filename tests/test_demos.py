"""Built-in demos: provider-exact wire format, and each assembles to its intended verdicts."""

from __future__ import annotations

import json

import pytest

from toollatch import Pipeline, ToolRegistry, read_capture
from toollatch.core.config import AssembleConfig
from toollatch.demo.demos import CANARY_SECRET, DEMOS, Demo, _all_demos
from toollatch.core.model import StreamResult

SCENARIOS = ("single", "parallel", "noargs", "oversized", "cancel", "truncated", "invalid")


def replay(demo: Demo) -> list[StreamResult]:
    """Feed the demo like the dashboard does: scripted cancel after ``cancel_after`` events."""
    pipeline = Pipeline(registry=ToolRegistry.from_tools(demo.tools), name=demo.name)
    for index, event in enumerate(read_capture(demo.wire, name=demo.name)):
        if demo.cancel_after is not None and index >= demo.cancel_after:
            pipeline.cancel("user stop")
            break
        pipeline.feed(event)
    pipeline.close()
    return pipeline.results()


def openai_fragments(demo: Demo) -> list[str]:
    out = []
    for event in read_capture(demo.wire):
        if isinstance(event.data, dict):
            for call in event.data["choices"][0]["delta"].get("tool_calls", []):
                text = call.get("function", {}).get("arguments")
                if text:
                    out.append(text)
    return out


def test_every_scenario_exists_for_both_dialects() -> None:
    for scenario in SCENARIOS:
        assert DEMOS[f"openai-{scenario}"].dialect == "openai-chat"
        assert DEMOS[f"anthropic-{scenario}"].dialect == "anthropic"
    assert DEMOS["canary"].dialect == "openai-chat"
    assert all(name == demo.name for name, demo in DEMOS.items())


@pytest.mark.parametrize("name", sorted(DEMOS))
def test_demo_reaches_its_verdicts(name: str) -> None:
    demo = DEMOS[name]
    results = replay(demo)
    assert len(results) == 1
    result = results[0]
    assert result.dialect == demo.dialect
    assert result.end == demo.expected_end
    assert len(result.calls) == len(demo.expected)
    for call, expected in zip(result.calls, demo.expected):
        state, _, reason = expected.partition(":")
        assert call.state.value == state
        if reason:
            assert call.reason is not None and call.reason.startswith(reason)
        assert (call.arguments is not None) == (state == "committed")
    # Every non-committed client call gets exactly one error result.
    failed = [c.call_id for c in result.calls if c.state.value != "committed"]
    assert [r.tool_call_id for r in result.results] == failed
    assert all(r.is_error for r in result.results)


@pytest.mark.parametrize("name", sorted(DEMOS))
def test_wire_is_provider_exact_sse(name: str) -> None:
    demo = DEMOS[name]
    text = demo.wire.decode("utf-8")
    blocks = text.split("\n\n")
    assert blocks[-1] == "", "every event ends with a blank line"
    blocks = blocks[:-1]
    assert len(blocks) == demo.events == len(read_capture(demo.wire))
    truncated = demo.expected_end == "truncated"
    if demo.dialect == "openai-chat":
        assert all(b.startswith("data: ") and "\n" not in b for b in blocks)
        assert (blocks[-1] == "data: [DONE]") is not truncated
        chunks = [json.loads(b[6:]) for b in blocks if b != "data: [DONE]"]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        finishes = [c["choices"][0]["finish_reason"] for c in chunks]
        assert finishes[-1] == (None if truncated else "tool_calls")
        assert set(finishes[:-1]) == {None}
    else:
        pairs = [b.split("\n") for b in blocks]
        assert all(len(p) == 2 and p[0].startswith("event: ") and p[1].startswith("data: ") for p in pairs)
        events = [(p[0][7:], json.loads(p[1][6:])) for p in pairs]
        assert all(kind == data["type"] for kind, data in events)
        assert events[0][0] == "message_start"
        kinds = [kind for kind, _ in events]
        assert ("message_stop" in kinds) is not truncated
        if not truncated:
            assert kinds[-2:] == ["message_delta", "message_stop"]
            assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
        for kind, data in events:
            if kind == "content_block_start" and data["content_block"]["type"] == "tool_use":
                assert data["content_block"]["input"] == {}
            if kind == "content_block_delta" and data["delta"]["type"] == "input_json_delta":
                assert isinstance(data["delta"]["partial_json"], str)


def test_fragments_are_small_so_bars_fill_visibly() -> None:
    for name in ("openai-single", "openai-parallel", "canary"):
        fragments = openai_fragments(DEMOS[name])
        assert len(fragments) >= 8
        assert max(len(f) for f in fragments) <= 10


def test_oversized_arguments_exceed_the_default_limit() -> None:
    limit = AssembleConfig().max_tool_argument_bytes
    for dialect in ("openai", "anthropic"):
        result = replay(DEMOS[f"{dialect}-oversized"])[0]
        assert result.calls[0].bytes > limit


def test_cancel_demo_stops_mid_arguments() -> None:
    for dialect in ("openai", "anthropic"):
        demo = DEMOS[f"{dialect}-cancel"]
        assert demo.cancel_after is not None and 0 < demo.cancel_after < demo.events - 2
        call = replay(demo)[0].calls[0]
        assert call.fragments > 5 and call.reason is not None and call.reason.startswith("cancelled")


def test_canary_secret_is_split_across_fragments_and_commits() -> None:
    demo = DEMOS["canary"]
    fragments = openai_fragments(demo)
    assert CANARY_SECRET in "".join(fragments)
    assert not any(CANARY_SECRET in f for f in fragments)
    pieces = [f for f in fragments if f in CANARY_SECRET]
    assert len(pieces) >= 3 and "".join(pieces) == CANARY_SECRET
    assert CANARY_SECRET not in demo.description and CANARY_SECRET not in demo.title
    result = replay(demo)[0]
    assert result.calls[0].arguments is not None
    assert result.calls[0].arguments["password"] == CANARY_SECRET


def test_demos_are_deterministic() -> None:
    again = _all_demos()
    assert {n: d.wire for n, d in again.items()} == {n: d.wire for n, d in DEMOS.items()}


def test_demo_tools_match_the_dialect_shape() -> None:
    for demo in DEMOS.values():
        ToolRegistry.from_tools(demo.tools)
        if demo.dialect == "openai-chat":
            assert all(t["type"] == "function" and "parameters" in t["function"] for t in demo.tools)
        else:
            assert all("input_schema" in t and "name" in t for t in demo.tools)
