"""Assembly speed and memory: toollatch against a floor and public stream accumulators.

Run: ``.venv/bin/python benchmarks/assemble.py [--quick]`` (needs the ``[bench]`` extra).

Every implementation gets the same input in the same run: the SSE bytes already in
memory. Implementations:

* ``floor`` - decode SSE (the project's WHATWG decoder, the only correct one here: CR
  and CRLF line ends, multi-line ``data``, split reads), ``json.loads`` each event, append
  argument fragments to per-call lists, join once. No state machine, no checks. The floor
  keeps the full decoder (:class:`~toollatch.wire.sse.SSEDecoder`); toollatch reads with
  :class:`~toollatch.wire.ssefast.FastSSEDecoder`, which gives its results faster.
* ``naive-split`` - for reference only: ``bytes.split(b"\n")`` and ``data:`` prefixes, which
  mis-reads CR line ends and multi-line data; no target is set against it.
* ``toollatch`` - :class:`toollatch.Pipeline` end to end, verdicts included.
* ``reader+adapter`` - for reference only: toollatch's own reading (framing detection, SSE
  decoding, envelope parse) and its dialect adapter's ops, with no state machine, latch or
  results: how much of toollatch's time the layers before the assembler take.
* ``openai-python`` - ``ChatCompletionStreamState.handle_chunk`` (OpenAI workloads).
* ``langchain-core`` - ``AIMessageChunk`` ``+`` merging of ``tool_call_chunks`` (OpenAI workloads).
* ``anthropic-sdk`` - ``accumulate_event`` as ``MessageStream`` uses it (Anthropic workloads).

Each line: ``workload=<name> impl=<name> seconds=<float> ratio_to_floor=<float>`` where
``seconds`` is the best of several repeats of the whole workload (each repeat runs it as
often as it takes to last 20 ms at least; the implementations take turns between repeats). Then one ``check=`` line
per target, each ending PASS or FAIL: toollatch at or under the floor (ratio <= 1.0) on
every synthetic workload and on all the captures together, no single capture above
1.25x; linear growth (one call of 256 KiB against one of 64 KiB, timed in turns: <= 4.5x)
and peak memory (<= 3x the argument bytes).
Captures are read from ``$TOOLLATCH_SHARED/captures`` (default: ``../shared``).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toollatch import Pipeline, iter_capture  # noqa: E402
from toollatch.dialects import make_adapter  # noqa: E402
from toollatch.wire.sse import SSEDecoder  # noqa: E402

Impl = Callable[[bytes], Any]
READ = 16 * 1024  # bytes per read, as toollatch.wire.capture.iter_file reads files
SHARED = Path(os.environ.get("TOOLLATCH_SHARED", ROOT.parent / "shared"))  # holds captures/


# ------------------------------------------------------------------ workloads


def _sse(payloads: list[Any], *, anthropic: bool) -> bytes:
    out = []
    for p in payloads:
        if anthropic:
            out.append(f"event: {p['type']}\ndata: {json.dumps(p, separators=(',', ':'))}\n\n")
        else:
            out.append(f"data: {p if isinstance(p, str) else json.dumps(p, separators=(',', ':'))}\n\n")
    return "".join(out).encode()


def synthetic_args(size: int, seed: int) -> str:
    """A JSON object of about ``size`` bytes: one long string value plus a few fields."""
    body = "".join(chr(97 + (i * 7 + seed) % 26) for i in range(max(size - 40, 1)))
    return json.dumps({"path": f"/tmp/f{seed}.txt", "mode": "w", "body": body}, separators=(",", ":"))


def split(text: str, n: int) -> list[str]:
    return [text[i : i + n] for i in range(0, len(text), n)]


def openai_stream(calls: int, size: int, frag: int = 4) -> bytes:
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks: list[Any] = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}]}]
    for c in range(calls):
        start = {"index": c, "id": f"call_{c}", "type": "function", "function": {"name": "write_file", "arguments": ""}}
        chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [start]}, "finish_reason": None}]})
        for piece in split(synthetic_args(size, c), frag):
            entry = {"index": c, "function": {"arguments": piece}}
            chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [entry]}, "finish_reason": None}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    chunks.append("[DONE]")
    return _sse(chunks, anthropic=False)


def anthropic_stream(calls: int, size: int, frag: int = 4) -> bytes:
    message = {"id": "msg_bench", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": None,
               "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    events: list[Any] = [{"type": "message_start", "message": message}]
    for c in range(calls):
        block = {"type": "tool_use", "id": f"toolu_{c}", "name": "write_file", "input": {}}
        events.append({"type": "content_block_start", "index": c, "content_block": block})
        for piece in split(synthetic_args(size, c), frag):
            events.append({"type": "content_block_delta", "index": c, "delta": {"type": "input_json_delta", "partial_json": piece}})
        events.append({"type": "content_block_stop", "index": c})
    events.append({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 1}})
    events.append({"type": "message_stop"})
    return _sse(events, anthropic=True)


# ------------------------------------------------------------------ implementations


def _naive_lines(data: bytes) -> list[bytes]:
    return [line[5:] for line in data.split(b"\n") if line.startswith(b"data:")]


def _data_lines(data: bytes) -> list[str]:
    """Every SSE event's data, decoded correctly; shared by all implementations but one."""
    decoder = SSEDecoder()
    return [event.data for event in decoder.decode(data)]


def naive_split(data: bytes) -> dict[Any, str]:
    parts: dict[Any, list[str]] = {}
    for raw in _naive_lines(data):
        if raw.strip() == b"[DONE]":
            break
        event = json.loads(raw)
        for choice in event.get("choices") or ():
            for tc in (choice.get("delta") or {}).get("tool_calls") or ():
                args = (tc.get("function") or {}).get("arguments")
                if args:
                    parts.setdefault((choice.get("index", 0), tc.get("index")), []).append(args)
        delta = event.get("delta")
        if event.get("type") == "content_block_delta" and delta.get("type") == "input_json_delta":
            parts.setdefault(event["index"], []).append(delta["partial_json"])
    return {k: "".join(v) for k, v in parts.items()}


def floor_openai(data: bytes) -> dict[Any, str]:
    parts: dict[Any, list[str]] = {}
    for raw in _data_lines(data):
        if raw.strip() == "[DONE]":
            break
        chunk = json.loads(raw)
        for choice in chunk.get("choices") or ():
            for tc in (choice.get("delta") or {}).get("tool_calls") or ():
                args = (tc.get("function") or {}).get("arguments")
                if args:
                    parts.setdefault((choice.get("index", 0), tc.get("index")), []).append(args)
    return {k: "".join(v) for k, v in parts.items()}


def floor_anthropic(data: bytes) -> dict[Any, str]:
    parts: dict[Any, list[str]] = {}
    for raw in _data_lines(data):
        event = json.loads(raw)
        delta = event.get("delta")
        if event.get("type") == "content_block_delta" and delta.get("type") == "input_json_delta":
            parts.setdefault(event["index"], []).append(delta["partial_json"])
    return {k: "".join(v) for k, v in parts.items()}


def _reads(data: bytes) -> Any:
    """``data`` in the reads ``toollatch assemble`` makes of a file."""
    return (data[i : i + READ] for i in range(0, len(data), READ))


def toollatch(data: bytes) -> Any:
    pipeline = Pipeline(emit_events=False)  # as `toollatch assemble` runs it: 16 KiB reads
    for event in iter_capture(_reads(data)):
        pipeline.feed(event)
    pipeline.close()
    return pipeline.results()


def reader_and_adapter(data: bytes, dialect: str) -> list[Any]:
    adapter = make_adapter(dialect)
    ops: list[Any] = []
    for event in iter_capture(_reads(data)):
        ops += adapter.feed(event)
    ops += adapter.close()
    return ops


def openai_python(data: bytes) -> Any:
    from openai._models import construct_type
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    state: Any = ChatCompletionStreamState()
    for raw in _data_lines(data):
        if raw.strip() == "[DONE]":
            break
        # as the SDK's Stream does: build the typed chunk without validation
        state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=json.loads(raw)))
    return state.get_final_completion()


def langchain_core(data: bytes) -> Any:
    from langchain_core.messages import AIMessageChunk

    merged: Any = None
    for raw in _data_lines(data):
        if raw.strip() == "[DONE]":
            break
        chunk = json.loads(raw)
        for choice in chunk.get("choices") or ():
            calls = [
                {"name": (tc.get("function") or {}).get("name"), "args": (tc.get("function") or {}).get("arguments"),
                 "id": tc.get("id"), "index": tc.get("index")}
                for tc in (choice.get("delta") or {}).get("tool_calls") or ()
            ]
            piece = AIMessageChunk(content="", tool_call_chunks=calls)
            merged = piece if merged is None else merged + piece
    return merged.tool_calls if merged is not None else []


def anthropic_sdk(data: bytes) -> Any:
    from anthropic.lib.streaming._messages import accumulate_event

    snapshot: Any = None
    bufs: dict[int, bytes] = {}
    for raw in _data_lines(data):
        snapshot = accumulate_event(event=json.loads(raw), current_snapshot=snapshot, json_bufs=bufs)
    return snapshot


# ------------------------------------------------------------------ measuring


#: Each timed repeat runs the workload as many times as it takes to last at least this long
#: (a repeat of a 2 KiB capture run 20 times lasts about 2 ms, mostly timer and scheduler noise).
MIN_REPEAT_S = 0.02


def passes_per_repeat(fn: Impl, data: bytes, times: int) -> int:
    """How many passes of ``fn`` over ``data`` one timed repeat makes: ``times``, or more, so
    that the repeat lasts :data:`MIN_REPEAT_S` seconds at least (measured by a short loop)."""
    passes, spent = 0, 0.0
    start = time.perf_counter()
    while spent < MIN_REPEAT_S / 4:
        fn(data)
        passes += 1
        spent = time.perf_counter() - start
    return max(times, math.ceil(passes * MIN_REPEAT_S / spent))


def best_of(fns: dict[str, Impl], data: bytes, times: int, repeats: int) -> dict[str, float]:
    """Seconds ``times`` passes of each implementation take: the best of ``repeats`` timed
    repeats, each of :func:`passes_per_repeat` passes (scaled to ``times``). The
    implementations take turns within each round of repeats, so a burst of load on a shared
    machine falls on all of them alike."""
    loops = {name: passes_per_repeat(fn, data, times) for name, fn in fns.items()}
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            n = loops[name]
            gc.collect()
            start = time.perf_counter()
            for _ in range(n):
                fn(data)
            best[name] = min(best[name], (time.perf_counter() - start) / n * times)
    return best


BASELINES = frozenset({"openai-python", "langchain-core", "anthropic-sdk"})
REFERENCES = frozenset({"naive-split", "reader+adapter"})  # measured, no target


def run_workload(
    name: str,
    data: bytes,
    dialect: str,
    times: int,
    repeats: int,
    slow_cap_s: float,
    skip: dict[str, str] | None = None,
) -> dict[str, float]:
    """Measure every implementation on ``data``; ``skip`` maps an implementation to why it is not run."""
    floor = floor_openai if dialect == "openai" else floor_anthropic
    adapter_dialect = "openai-chat" if dialect == "openai" else "anthropic"
    impls: dict[str, Impl] = {
        "floor": floor,
        "naive-split": naive_split,
        "toollatch": toollatch,
        "reader+adapter": lambda data: reader_and_adapter(data, adapter_dialect),
    }
    if dialect == "openai":
        impls["openai-python"] = openai_python
        impls["langchain-core"] = langchain_core
    else:
        impls["anthropic-sdk"] = anthropic_sdk
    seconds: dict[str, float] = {}
    timed: dict[str, Impl] = {}
    for impl, fn in impls.items():
        if skip and impl in skip:
            print(f"workload={name} impl={impl} skipped={skip[impl]}", flush=True)
            continue
        try:
            start = time.perf_counter()
            fn(data)  # warm up, and learn whether a baseline is too slow to repeat
            once = time.perf_counter() - start
        except Exception as exc:  # noqa: BLE001 - a baseline that cannot take the input is reported, not fatal
            print(f"workload={name} impl={impl} error={type(exc).__name__}")
            continue
        if impl in BASELINES and once * times > slow_cap_s:
            start = time.perf_counter()
            fn(data)  # again: the first call of a baseline also imported its SDK
            once = time.perf_counter() - start
        if impl in BASELINES and once * times > slow_cap_s:
            seconds[impl] = once * times  # quadratic baselines: one pass, scaled
        else:
            timed[impl] = fn
    seconds.update(best_of(timed, data, times, repeats))
    for impl in impls:
        if impl in seconds:
            ratio = seconds[impl] / seconds["floor"]
            print(f"workload={name} impl={impl} seconds={seconds[impl]:.6f} ratio_to_floor={ratio:.2f}", flush=True)
    return seconds


def growth(build: Callable[[int, int], bytes], repeats: int = 7) -> float:
    """toollatch's time on one call of 256 KiB over its time on one of 64 KiB (4.0: linear):
    the best of ``repeats`` timed repeats of each, taken in turns (4 passes of the smaller
    input, 1 of the larger, so each repeat lasts about as long), a collection before each."""
    small, large = build(1, 65536), build(1, 262144 - 64)
    best = {65536: float("inf"), 262144: float("inf")}
    for _ in range(repeats):
        for size, data, passes in ((65536, small, 4), (262144, large, 1)):
            gc.collect()
            start = time.perf_counter()
            for _ in range(passes):
                toollatch(data)
            best[size] = min(best[size], (time.perf_counter() - start) / passes)
    return best[262144] / best[65536]


def peak_memory(data: bytes) -> int:
    gc.collect()
    tracemalloc.start()
    results = toollatch(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert results[0].calls[0].state.value == "committed"
    return peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a reduced set, under 30 s: public baselines on the 2 KiB workloads only"
    )
    args = parser.parse_args()
    times = 20 if args.quick else 200
    repeats = 5  # each repeat lasts MIN_REPEAT_S at least
    ratios: list[tuple[str, float]] = []

    quick_skip = dict.fromkeys(BASELINES | REFERENCES, "quick (run without --quick to measure)") if args.quick else {}
    capture_totals = {"floor": 0.0, "toollatch": 0.0}

    def record(name: str, secs: dict[str, float]) -> None:
        if "toollatch" in secs:
            ratios.append((name, secs["toollatch"] / secs["floor"]))
            if name.startswith("capture:"):
                for impl in capture_totals:
                    capture_totals[impl] += secs[impl]

    folders = {"openai": SHARED / "captures" / "openai-chat", "anthropic": SHARED / "captures" / "anthropic"}
    for dialect, folder in folders.items():
        files = sorted(p for p in folder.glob("*.sse")) if folder.is_dir() else []
        if args.quick:
            files = files[:3]
        for path in files:
            name = f"capture:{folder.name}/{path.name}"
            record(name, run_workload(name, path.read_bytes(), dialect, times, repeats, slow_cap_s=5, skip=quick_skip))
    synthetic = [("1x2KiB", 1, 2048), ("2x16KiB", 2, 16384), ("1x64KiB", 1, 65536), ("1x256KiB", 1, 262144 - 64)]
    if args.quick:
        synthetic = [s for s in synthetic if s[0] != "2x16KiB"]
    for label, calls, size in synthetic:
        reps = max(1, times // max(1, size // 2048)) if size > 2048 else times
        for dialect, build in (("openai", openai_stream), ("anthropic", anthropic_stream)):
            name = f"synthetic:{dialect}:{label}"
            skip = dict(quick_skip) if size > 2048 else dict.fromkeys(REFERENCES, "quick") if args.quick else {}
            if size > 65536:
                skip["langchain-core"] = "quadratic (one pass would take minutes)"
            secs = run_workload(name, build(calls, size), dialect, reps, repeats, slow_cap_s=1 if args.quick else 20, skip=skip)
            record(name, secs)

    # targets: toollatch at or under the floor on every synthetic workload and on all the
    # captures together; no single (small, set-up dominated) capture above 1.25x
    for name, ratio in ratios:
        if name.startswith("synthetic:"):
            print(f"check=ratio_to_floor_synthetic workload={name} ratio={ratio:.2f} target<=1.0 {'PASS' if ratio <= 1.0 else 'FAIL'}")
    if capture_totals["floor"]:
        together = capture_totals["toollatch"] / capture_totals["floor"]
        print(f"check=ratio_to_floor_all_captures_together ratio={together:.2f} target<=1.0 {'PASS' if together <= 1.0 else 'FAIL'}")
        worst = max((r for r in ratios if r[0].startswith("capture:")), key=lambda r: r[1])
        print(f"check=ratio_to_floor_worst_capture ratio={worst[1]:.2f} workload={worst[0]} target<=1.25 {'PASS' if worst[1] <= 1.25 else 'FAIL'}")
    else:
        print(f"check=ratio_to_floor_captures skipped=no captures under {SHARED} (set TOOLLATCH_SHARED)")
    for dialect, build in (("openai", openai_stream), ("anthropic", anthropic_stream)):
        ratio = growth(build)
        print(f"check=linear_growth dialect={dialect} t256/t64={ratio:.2f} target<=4.5 {'PASS' if ratio <= 4.5 else 'FAIL'}")
    for dialect, build in (("openai", openai_stream), ("anthropic", anthropic_stream)):
        size = 262144 - 64
        data = build(1, size)
        peak = peak_memory(data)
        arg_bytes = len(synthetic_args(size, 0))
        ratio = peak / arg_bytes
        print(f"check=peak_memory dialect={dialect} peak_bytes={peak} argument_bytes={arg_bytes} ratio={ratio:.2f} target<=3 {'PASS' if ratio <= 3 else 'FAIL'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
