"""Time of many calls in one stream, in the dialect adapters and the assembler: ``n`` and
``8n`` calls, the fastest of a few runs each, and the ratio (about 8 for linear cost, 64 for
quadratic). The target: under 20.

Run: ``.venv/bin/python benchmarks/linear_calls.py``. ``tests/test_linear_calls.py`` checks the
same workloads deterministically, by the lines of Python they execute.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from toollatch.core.assembler import Assembler
from toollatch.wire.capture import ProviderEvent
from toollatch.dialects import make_adapter
from toollatch.core.config import AssembleConfig
from toollatch.core.model import ArgsFragment, BlockStop, CallStart, StreamEnd

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


WORKLOADS: dict[str, tuple[str, Callable[[int], list[dict[str, Any]]]]] = {
    "openai-chat-no-index": ("openai-chat", openai_chat_without_index),
    "openai-chat-one-index": ("openai-chat", openai_chat_one_index_new_ids),
    "cohere-open-calls": ("cohere", cohere_open_calls),
    "responses-one-index": ("openai-responses", responses_one_index),
}


def restart_ops(n: int) -> list[Any]:
    """Every call starts at the key of the one before, with another id (each fails the older)."""
    out: list[Any] = []
    for i in range(n):
        out += [CallStart((0,), f"c{i}", "f"), ArgsFragment((0,), "{}")]
    return out + [StreamEnd()]


def pipelined_under_budget(n: int) -> tuple[list[Any], AssembleConfig]:
    """All calls open, then each stops in turn; pipelined, under a run budget and an in-flight
    limit above ``n``: each stop asks how many calls opened before it await a verdict."""
    out: list[Any] = [CallStart((i,), f"c{i}", "f") for i in range(n)]
    for i in range(n):
        out += [ArgsFragment((i,), "{}"), BlockStop((i,))]
    config = AssembleConfig(
        execute_before_stream_end=True, allow_pipelined_execute=("f",), max_tool_calls_per_run=2 * n, max_tool_calls_in_flight_assemble=n + 1
    )
    return out + [StreamEnd()], config


def _assembler_seconds(stream: list[Any], config: AssembleConfig | None = None) -> float:
    def run() -> None:
        assembler = Assembler("anthropic", config=config, emit_events=False)
        for op in stream:
            assembler.apply(op)

    return _fastest(run)


def main() -> int:
    worst = 0.0
    rows = [(name, lambda n, d=dialect, b=build: _adapter_seconds(d, b(n))) for name, (dialect, build) in WORKLOADS.items()]
    rows.append(("assembler-restart-at-one-key", lambda n: _assembler_seconds(restart_ops(n))))
    rows.append(("assembler-pipelined-under-budget", lambda n: _assembler_seconds(*pipelined_under_budget(n))))
    for name, seconds in rows:
        small, large = seconds(SMALL), seconds(SMALL * FACTOR)
        worst = max(worst, large / small)
        print(f"workload={name} calls={SMALL}->{SMALL * FACTOR} seconds={small:.4f}->{large:.4f} ratio={large / small:.1f} target=<20")
    return 0 if worst < 20 else 1


if __name__ == "__main__":
    raise SystemExit(main())
