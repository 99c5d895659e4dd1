"""Reading a JSON array body an element at a time (Gemini's default streaming body).

Run: ``.venv/bin/python benchmarks/json_array.py [--quick]``.

Compares :class:`toollatch.wire.intake.PushDecoder` on a pretty-printed array (``,\\r\\n`` between
elements, as ``streamGenerateContent`` sends it) with the same events sent as SSE (``alt=sse``),
both fed in 64 KiB reads, and reports the longest single ``feed``: a live session runs it on
the event loop, which no input may hold for more than about 100 ms.

Each line: ``workload=<name> seconds=<float> ratio_to_sse=<float> longest_feed_ms=<float>``.
Targets (on an idle machine): the array read within 5x the SSE read (a Python loop turns per bracket); for the Gemini-shaped
workloads the longest feed below 100 ms (exit status 1 otherwise). ``tiny-elements`` (thousands
of events per read) is reported only: its cost is per event, as for SSE.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toollatch.wire.intake import PushDecoder  # noqa: E402

READ = 64 * 1024


def elements(chunks: int, text: int) -> list[str]:
    chunk: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": [
        {"text": "lorem ipsum, [dolor] {sit} \"amet\" " * text},
        {"functionCall": {"name": "f", "args": {"a": [1, 2, 3], "b": {"c": "d"}}}}]}, "index": 0}]}
    return [json.dumps(chunk, indent=2)] * chunks


def as_array(items: list[str]) -> bytes:
    return ("[" + "\r\n,\r\n".join(i.replace("\n", "\r\n") for i in items) + "]").encode()


def as_sse(items: list[str]) -> bytes:
    return "".join(f"data: {json.dumps(json.loads(i))}\r\n\r\n" for i in items).encode()


def run(data: bytes) -> tuple[float, float]:
    decoder = PushDecoder("bench.json")
    longest, events = 0.0, 0
    t0 = time.perf_counter()
    for i in range(0, len(data), READ):
        t = time.perf_counter()
        events += len(decoder.feed(data[i : i + READ]))
        longest = max(longest, time.perf_counter() - t)
    events += len(decoder.close())
    return time.perf_counter() - t0, longest


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    scale = 1 if args.quick else 10
    workloads = {"small-chunks": elements(2000 * scale, 1), "large-chunks": elements(50 * scale, 400),
                 "tiny-elements": ['[[[[[[[[{"a": 1}]]]]]]]]'] * (5000 * scale)}
    ok = True
    for name, items in workloads.items():
        seconds, longest = min(run(as_array(items)) for _ in range(3))
        sse_seconds, _ = min(run(as_sse(items)) for _ in range(3))
        ratio = seconds / sse_seconds
        print(f"workload={name} seconds={seconds:.4f} ratio_to_sse={ratio:.2f} longest_feed_ms={longest * 1000:.1f}")
        ok = ok and ratio < 5 and (name == "tiny-elements" or longest < 0.1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
