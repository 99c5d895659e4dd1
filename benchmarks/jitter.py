"""How evenly this machine runs one fixed piece of Python work: the floor under any latency tail.

    .venv/bin/python benchmarks/jitter.py [--seconds 10]

Runs the same small unit of work (parsing one JSON document ten times, about the cost of
assembling a few provider events) back to back for ``--seconds`` seconds, timing each run
with the wall clock (``time.perf_counter``) and with the thread's CPU clock
(``time.thread_time``). On a quiet machine every run should take about the median. Runs
that take many times the median while the thread's CPU clock advanced about as much as the
wall clock were not descheduled (no other thread or process of this machine ran instead):
the time went to the CPU running the same instructions slowly, as a virtual CPU does when
its host gives the time to others, or to interrupt work charged to the thread. Such windows
delay whatever a process does in them, and no code of the process can avoid them; the p99
that ``benchmarks/proxy.py`` quotes sits on this floor.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

DOCUMENT = json.dumps({"tool_calls": [{"index": 0, "function": {"arguments": "x" * 200}}], "values": list(range(50))})


def unit() -> None:
    """The fixed unit of work."""
    for _ in range(10):
        json.loads(DOCUMENT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to run (seconds)")
    parser.add_argument("--slow", type=float, default=5.0, help="a run is slow at this many times the median")
    args = parser.parse_args()
    walls: list[float] = []
    cpus: list[float] = []
    end = time.perf_counter() + args.seconds
    while time.perf_counter() < end:
        started, cpu = time.perf_counter(), time.thread_time()
        unit()
        walls.append(time.perf_counter() - started)
        cpus.append(time.thread_time() - cpu)
    ordered = sorted(walls)
    median = ordered[len(ordered) // 2]

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]

    slow = [(wall, cpu) for wall, cpu in zip(walls, cpus) if wall > args.slow * median]
    running = sum(1 for wall, cpu in slow if cpu >= 0.8 * wall)
    print(f"toollatch jitter probe: {len(walls)} runs of one fixed unit of work in {args.seconds:g} s "
          f"(Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print(f"wall time per run: median {median * 1e6:.1f} us, p99 {pct(99) * 1e6:.1f} us, p99.9 {pct(99.9) * 1e6:.1f} us, "
          f"max {ordered[-1] * 1e6:.0f} us")
    print(f"runs over {args.slow:g}x the median: {len(slow)} ({100 * len(slow) / len(walls):.3f}%); in {running} of them the "
          f"thread's CPU clock advanced at least 80% as much as the wall clock (not descheduled: the CPU ran slowly)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
