"""Many calls in one stream cost linear work, in every dialect adapter and in the assembler:
no per-call lookup scans a list of the calls seen so far.

Work is counted, not timed: the lines of Python executed (``sys.settrace``) for ``n`` and
``8n`` calls. Linear work grows 8x (plus a constant), a scan per call 64x; the count is the
same on every run and every machine. The timing of the same workloads is
``benchmarks/linear_calls.py``.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

import pytest

from toollatch.core.assembler import Assembler
from toollatch.wire.capture import ProviderEvent
from toollatch.dialects import make_adapter

from .conftest import ROOT

SMALL, FACTOR = 150, 8
#: Linear work gives 8; a scan of the calls seen so far per call pushes past 8 at these sizes
#: by far more than this allows (64 in the limit).
LIMIT = 10


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_linear_calls", ROOT / "benchmarks" / "linear_calls.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


BENCH = _bench()


def lines_run(run: Callable[[], Any]) -> int:
    """Lines of Python executed by ``run()`` (every frame, the project's and the libraries')."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        run()
    finally:
        sys.settrace(previous)
    return count


def adapter_lines(dialect: str, events: list[dict[str, Any]]) -> int:
    wrapped = [ProviderEvent(e.get("type"), e, i + 1, 0) for i, e in enumerate(events)]

    def feed() -> None:
        adapter = make_adapter(dialect)
        for event in wrapped:
            adapter.feed(event)

    return lines_run(feed)


@pytest.mark.parametrize("workload", list(BENCH.WORKLOADS))
def test_an_adapter_does_linear_work_in_its_calls(workload: str) -> None:
    dialect, build = BENCH.WORKLOADS[workload]
    small, large = adapter_lines(dialect, build(SMALL)), adapter_lines(dialect, build(SMALL * FACTOR))
    assert large / small < LIMIT, f"{FACTOR}x the calls ran {large / small:.1f}x the lines ({small} -> {large})"


@pytest.mark.parametrize("workload", ["restart_ops", "pipelined_under_budget"])
def test_the_assembler_does_linear_work(workload: str) -> None:
    """Calls restarting at one key; pipelined calls stopping under a run budget (each asks
    how many calls opened before it still await a verdict)."""

    def lines(n: int) -> int:
        built = getattr(BENCH, workload)(n)
        stream, config = built if isinstance(built, tuple) else (built, None)

        def run() -> None:
            assembler = Assembler("anthropic", config=config, emit_events=False)
            for op in stream:
                assembler.apply(op)

        return lines_run(run)

    small, large = lines(SMALL), lines(SMALL * FACTOR)
    assert large / small < LIMIT, f"{FACTOR}x the calls ran {large / small:.1f}x the lines ({small} -> {large})"


def test_the_count_sees_a_scan_per_call() -> None:
    """The measure itself: a lookup that scans a list per call is caught."""

    def scanning(n: int) -> int:
        def run() -> None:
            seen: list[int] = []
            for i in range(n):
                for j in seen:
                    if j == i:
                        break
                seen.append(i)

        return lines_run(run)

    assert scanning(SMALL * FACTOR) / scanning(SMALL) > LIMIT


def test_a_capped_pipeline_does_linear_work_in_the_streams_of_an_input() -> None:
    """The dashboard's pipeline over an input of many empty streams (each a message_start
    and a message_stop): the calls of the streams before the current one are counted as
    they end, not summed again at each new stream."""
    from toollatch.core.large import CappedPipeline
    from toollatch.wire.capture import read_capture

    one = b'event: message_start\ndata: {"type": "message_start", "message": {"id": "m", "content": []}}\n\nevent: message_stop\ndata: {"type": "message_stop"}\n\n'

    def lines(n: int) -> int:
        events = read_capture(one * n)

        def run() -> None:
            pipeline = CappedPipeline(name="in", keep=2, emit_events=False)
            for event in events:
                pipeline.feed(event)
            pipeline.close()

        return lines_run(run)

    small, large = lines(SMALL), lines(SMALL * FACTOR)
    assert large / small < LIMIT, f"{FACTOR}x the streams ran {large / small:.1f}x the lines ({small} -> {large})"
