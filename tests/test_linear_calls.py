"""Many calls in one stream cost about linear time, in every dialect adapter and in the
assembler: no per-call lookup scans a list of the calls seen so far.

Each test times ``n`` and ``8n`` calls (the fastest of a few runs) and allows well under
the 64x a quadratic cost would take, so a loaded machine does not make them flaky.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from assembler.assembler import Assembler
from assembler.capture import ProviderEvent
from assembler.dialects import make_adapter
from assembler.model import ArgsFragment, CallStart, StreamEnd

SMALL, FACTOR = 1000, 8


def _fastest(run: Callable[[], Any], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def _adapter_seconds(dialect: str, events: list[dict[str, Any]]) -> float:
    wrapped = [ProviderEvent(e.get("type"), e, i + 1, 0) for i, e in enumerate(events)]

    def feed() -> None:
        adapter = make_adapter(dialect)
        for event in wrapped:
            adapter.feed(event)

    return _fastest(feed)


def _chat(delta: dict[str, Any]) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def openai_chat_without_index(n: int) -> list[dict[str, Any]]:
    """Every entry names its call by id only: each new id takes the next index."""
    return [_chat({"tool_calls": [{"id": f"c{i}", "function": {"name": "f", "arguments": "{}"}}]}) for i in range(n)]


def openai_chat_one_index_new_ids(n: int) -> list[dict[str, Any]]:
    """A gateway that puts every call at index 0, each with its own id."""
    return [_chat({"tool_calls": [{"index": 0, "id": f"c{i}", "function": {"name": "f", "arguments": "{}"}}]}) for i in range(n)]


def cohere_open_calls(n: int) -> list[dict[str, Any]]:
    """Calls started without an index and left open, then each ended by its index."""
    start = [
        {"type": "tool-call-start", "delta": {"message": {"tool_calls": {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}}}}
        for i in range(n)
    ]
    return [{"type": "message-start", "id": "m"}, *start, *({"type": "tool-call-end", "index": i} for i in range(n))]


def responses_one_index(n: int) -> list[dict[str, Any]]:
    """Items that all reuse output_index 0, their deltas naming no item_id."""
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": "r"}}]
    for i in range(n):
        item = {"type": "function_call", "id": f"fc{i}", "call_id": f"c{i}", "name": "f", "arguments": ""}
        events += [
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}"},
            {"type": "response.output_item.done", "output_index": 0, "item": {**item, "arguments": "{}"}},
        ]
    return events


@pytest.mark.parametrize(
    ("dialect", "build"),
    [
        ("openai-chat", openai_chat_without_index),
        ("openai-chat", openai_chat_one_index_new_ids),
        ("cohere", cohere_open_calls),
        ("openai-responses", responses_one_index),
    ],
    ids=["openai-chat-no-index", "openai-chat-one-index", "cohere-open-calls", "responses-one-index"],
)
def test_an_adapter_costs_about_linear_time_in_its_calls(dialect: str, build: Callable[[int], list[dict[str, Any]]]) -> None:
    small, large = _adapter_seconds(dialect, build(SMALL)), _adapter_seconds(dialect, build(SMALL * FACTOR))
    assert large / small < 20, f"{FACTOR}x the calls took {large / small:.0f}x the time ({small:.3f}s -> {large:.3f}s)"


def test_the_assembler_costs_about_linear_time_when_calls_restart_at_one_key() -> None:
    """Every call starts at the key of the one before, with another id (each fails the older)."""

    def ops(n: int) -> list[Any]:
        out: list[Any] = []
        for i in range(n):
            out += [CallStart((0,), f"c{i}", "f"), ArgsFragment((0,), "{}")]
        return out + [StreamEnd()]

    def seconds(n: int) -> float:
        stream = ops(n)

        def run() -> None:
            assembler = Assembler("anthropic", emit_events=False)
            for op in stream:
                assembler.apply(op)

        return _fastest(run)

    small, large = seconds(SMALL), seconds(SMALL * FACTOR)
    assert large / small < 20, f"{FACTOR}x the calls took {large / small:.0f}x the time ({small:.3f}s -> {large:.3f}s)"
