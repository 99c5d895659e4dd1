"""The longest single garbage collection while one event of 100,000 tool calls is read.

    .venv/bin/python benchmarks/collector_pauses.py [--calls N]

Reads one event of N tool calls (an OpenAI Chat chunk, and a Gemini chunk of as many
``functionCall`` parts) as the dashboard does (:class:`toollatch.core.large.CappedPipeline`,
the payload left unparsed by its decoder), then closes the input, and times every
collection of Python's cyclic garbage collector meanwhile (``gc.callbacks``): a collection
holds the GIL, so every other thread (the dashboard's event loop) waits for it whole. Each
workload runs with the collector's steps during the read (:mod:`toollatch.wire.collector`)
and without them (``STEP_OBJECTS`` out of reach), in turns, three times; the line gives the
worst single collection (ms) and the total (ms) of each run, best run first.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toollatch.core.large import CappedPipeline  # noqa: E402
from toollatch.wire import collector  # noqa: E402
from toollatch.wire.capture import UNPARSED, ProviderEvent  # noqa: E402


def chat(calls: int) -> str:
    entries = [{"index": i, "id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in range(calls)]
    return json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": entries}}]})


def gemini(calls: int) -> str:
    parts = [{"functionCall": {"name": "f", "args": {"a": [i]}}} for i in range(calls)]
    return json.dumps({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]})


def one_run(raw: str, steps: bool) -> tuple[float, float]:
    """(worst single collection, all collections) in ms, for one read of ``raw`` and close."""
    saved = collector.STEP_OBJECTS
    collector.STEP_OBJECTS = saved if steps else sys.maxsize
    gc.collect()
    started: list[float] = []
    pauses: list[float] = []

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            pauses.append(time.perf_counter() - started.pop())

    gc.callbacks.append(timed)
    try:
        pipeline = CappedPipeline(name="bench")
        pipeline.feed(ProviderEvent(None, UNPARSED, 1, 0, raw=raw))
        garbage = [[i] for i in range(20_000)]  # the allocations that follow a read, whose collections walk what it left
        del garbage
        pipeline.close()
        del pipeline
    finally:
        gc.callbacks.remove(timed)
        collector.STEP_OBJECTS = saved
    return 1e3 * max(pauses, default=0.0), 1e3 * sum(pauses)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    args = parser.parse_args()
    for name, make in (("openai-chat", chat), ("gemini", gemini)):
        raw = make(args.calls)
        runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for _ in range(3):
            for steps in (False, True):
                runs[steps].append(one_run(raw, steps))
        for steps in (False, True):
            shown = " ".join(f"{worst:.1f}/{total:.1f}" for worst, total in sorted(runs[steps]))
            print(f"workload={name} calls={args.calls} steps={'on' if steps else 'off'} worst/total collection ms: {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
