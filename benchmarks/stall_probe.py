"""The event loop's worst stall, and the server's memory, while the worst inputs run.

    .venv/bin/python benchmarks/stall_probe.py [--quick]

Starts ``toollatch serve`` (a process of its own, on loopback) with a fake upstream served
by this script, then feeds it, one scenario at a time: a tool schema whose ``pattern``
backtracks catastrophically on the call's arguments (through the proxy), a large tools array
(through the proxy), a non-streaming ``chat.completion`` body holding 100,000 tool calls and
one SSE event holding as many (through the proxy, and uploaded), as many events of one call each (through the proxy), uploads of 20 and 50 MiB of blank lines before one event, of comment
lines, of one huge line and of deeply nested JSON, and a 500 MiB chunked POST to the proxy.
The event loop is timed from inside the server: it records how late each 20 ms sleep of a
watcher task ends (``toollatch_event_loop_lag_seconds`` at ``/metrics``, read before and
after each scenario; the worst lag is the top of the highest bucket that gained a count).
Meanwhile a process of its own sends a tiny request (``GET /api/live``) every 5 ms on its own connection
and times each answer, as a client would see it (an answer also waits for worker threads
and the machine's other processes, so it can be slow while the loop is not held). The
server's resident memory (``VmRSS`` from ``/proc``) is sampled with each answer.

Prints one row per scenario: the event loop's worst lag (ms, a bucket's upper bound),
answers, median and worst answer latency (ms), peak RSS (MiB) and the outcome. The target:
the loop's worst lag at most 100 ms in every row (the ``check=`` line), RSS bounded (no
row grows it by the size of its input). Traffic goes to 127.0.0.1 only; every loop is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
MiB = 1024 * 1024
HOSTILE = "a" * 40 + "!"
FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n' + FINISH


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _chat_calls(*calls: tuple[str, str, str]) -> bytes:
    entries = [{"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": args}} for i, (cid, name, args) in enumerate(calls)]
    docs = [{"choices": [{"index": 0, "delta": {"tool_calls": entries}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    return ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n").encode()


# ------------------------------------------------------------------ the fake upstream


class Upstream:
    """A loopback HTTP server answering every request with ``self.body``, as an SSE stream
    (``self.content_type``)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.body = EVENT
        self.content_type = b"text/event-stream"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
            if length:
                await reader.readexactly(length)
            body = self.body
            head = b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (self.content_type, len(body))
            writer.write(head + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()


# ------------------------------------------------------------------ the watcher


def _rss(pid: int) -> int:
    """The resident memory (bytes) of process ``pid``, 0 when it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _watch(base: str, pid: int, ready: Any, stop: Any, out: Any) -> None:
    """The watcher's process: a tiny request every 5 ms until ``stop`` is set, then its
    latencies (seconds) and RSS samples (bytes) sent through ``out``."""
    latencies: list[float] = []
    rss = [_rss(pid)]
    with httpx.Client(timeout=120) as client:
        ready.set()
        while not stop.is_set():
            started = time.perf_counter()
            try:
                client.get(base + "/api/live")
            except httpx.HTTPError:
                pass
            latencies.append(time.perf_counter() - started)
            rss.append(_rss(pid))
            time.sleep(0.005)
    out.send((latencies, rss))


class Watcher:
    """Times a tiny request every 5 ms and samples the server's RSS, in a process of its
    own: a thread of this script would share its interpreter lock with the scenario's own
    work (building and sending a 50 MiB upload, the fake upstream), and its latencies would
    count this script's pauses as the server's."""

    def __init__(self, base: str, pid: int) -> None:
        self.base, self.pid = base, pid
        self.latencies: list[float] = []
        self.rss: list[int] = []
        self._context = multiprocessing.get_context("spawn")
        self._process: Any = None

    def start(self) -> None:
        self._ready, self._stop = self._context.Event(), self._context.Event()
        self._receive, send = self._context.Pipe(duplex=False)
        self._process = self._context.Process(target=_watch, args=(self.base, self.pid, self._ready, self._stop, send), daemon=True)
        self._process.start()
        self._ready.wait(60)

    def stop(self) -> None:
        self._stop.set()
        self.latencies, self.rss = self._receive.recv() if self._receive.poll(60) else ([], [0])
        self._process.join(30)


def loop_lag_buckets(client: httpx.Client, base: str) -> dict[float, float]:
    """The server's ``toollatch_event_loop_lag_seconds`` bucket counts, by upper bound (seconds)."""
    buckets: dict[float, float] = {}
    for line in client.get(base + "/metrics").text.splitlines():
        if line.startswith('toollatch_event_loop_lag_seconds_bucket{le="'):
            bound = line.split('"')[1]
            buckets[math.inf if bound == "+Inf" else float(bound)] = float(line.rsplit(" ", 1)[1])
    return buckets


def worst_lag(before: dict[float, float], after: dict[float, float]) -> float:
    """The upper bound (seconds) of the highest bucket that gained a count between two readings."""
    grew = [bound for bound, count in after.items() if count > before.get(bound, 0.0)]
    total = after.get(math.inf, 0.0) - before.get(math.inf, 0.0)
    # cumulative buckets: the worst lag lies under the lowest bound holding every new count
    return min((b for b in grew if after[b] - before.get(b, 0.0) >= total), default=0.0)


# ------------------------------------------------------------------ scenarios


def upload(client: httpx.Client, base: str, name: str, data: bytes) -> str:
    """Upload ``data`` and wait (bounded) for its session to end; returns the outcome."""
    response = client.post(base + "/sessions/upload", files={"file": (name, data, "application/octet-stream")}, data={"rate": "max"})
    if response.status_code != 303:
        return f"upload answered {response.status_code}"
    sid = response.headers["location"].rsplit("/", 1)[-1]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        doc = client.get(f"{base}/api/sessions/{sid}").json()
        if doc["status"] in ("finished", "cancelled", "error"):
            return f"session {doc['status']} at event {doc['position']}/{doc['total']}"
        time.sleep(0.05)
    return "session still running after 300 s"


def _spread_calls(count: int) -> bytes:
    """An OpenAI Chat stream of ``count`` tool calls, each in a chunk of its own."""
    entry = '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"c%d","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}'
    events = "".join(f"data: {entry % (i, i)}\n\n" for i in range(count))
    return (events + 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n').encode()


def _chat_completion(count: int) -> bytes:
    """A non-streaming ``chat.completion`` body holding ``count`` tool calls."""
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}} for i in range(count)]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    return json.dumps({"object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}).encode()


def proxied(client: httpx.Client, base: str, upstream: Upstream, tools: list[dict[str, Any]], body: bytes, times: int, *, stream: bool = True) -> str:
    upstream.body = body
    upstream.content_type = b"text/event-stream" if stream else b"application/json"
    reasons: dict[str, int] = {}
    for _ in range(times):
        response = client.post(base + "/proxy/up/v1/chat/completions", json={"model": "m", "stream": stream, "tools": tools})
        if response.status_code != 200 or response.content != body:
            return f"proxy answered {response.status_code}"
    sessions = client.get(base + "/api/live").json()["sessions"]
    for s in sessions[:times]:
        deadline = time.monotonic() + 300
        while (doc := client.get(f"{base}/api/sessions/{s['id']}").json())["status"] == "playing" and time.monotonic() < deadline:
            time.sleep(0.05)
        offset = 0
        while True:  # the session document is paged by call: every page, one request each
            for c in doc["calls"]:
                reason = (c["reason"] or c["state"]).split(":")[0]
                reasons[reason] = reasons.get(reason, 0) + 1
            offset += len(doc["calls"])
            if not doc["calls"] or offset >= doc["page"]["total"]:
                break
            doc = client.get(f"{base}/api/sessions/{s['id']}", params={"offset": offset, "limit": 5000}).json()
    return "calls: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))


def chunked_post(base: str, total: int) -> str:
    def body() -> Iterator[bytes]:
        chunk = b"x" * MiB
        for _ in range(total // MiB):
            yield chunk

    try:
        with httpx.Client(timeout=120) as client:
            response = client.post(base + "/proxy/up/v1/chat/completions", content=body(), headers={"content-type": "application/json"})
        return f"proxy answered {response.status_code}"
    except httpx.HTTPError as exc:  # the server answered 413 and closed while the body was still being sent
        return f"connection closed by the server mid-body ({type(exc).__name__})"


def scenarios(quick: bool, upstream: Upstream) -> list[tuple[str, Callable[[httpx.Client, str], str]]]:
    big = 20 * MiB if not quick else 4 * MiB
    huge = 50 * MiB - 64 * 1024 if not quick else 8 * MiB
    calls = 100_000 if not quick else 20_000
    catastrophic = [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|a)*$"}}}}},
        {"type": "function", "function": {"name": "g", "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}}},
    ]
    hostile = _chat_calls(("c1", "f", json.dumps({"s": HOSTILE})), ("c2", "g", json.dumps({"s": HOSTILE})))
    many = [
        {"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object", "properties": {f"p{j}": {"type": "string", "description": "x" * 40, "enum": ["a", "b"]} for j in range(20)}}}}
        for i in range(50)
    ]
    deep = b'data: {"choices":[{"index":0,"delta":{"content":' + b"[" * 200_000 + b"]" * 200_000 + b"}}]}\n\n" + FINISH
    deep_args = _chat_calls(("c1", "f", "[" * 1_000_000 + "]" * 1_000_000))
    line = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"x" * big + b'"}}]}\n\n' + FINISH
    return [
        ("idle", lambda c, b: (time.sleep(2), "-")[1]),
        ("catastrophic pattern via proxy x5", lambda c, b: proxied(c, b, upstream, catastrophic, hostile, 5)),
        ("50 tools x 20 properties via proxy x5", lambda c, b: proxied(c, b, upstream, many, EVENT, 5)),
        (f"non-streaming body, {calls // 1000}k tool calls via proxy", lambda c, b: proxied(c, b, upstream, [], _chat_completion(calls), 1, stream=False)),
        (f"one SSE event, {calls // 1000}k tool calls via proxy", lambda c, b: proxied(c, b, upstream, [], _chat_calls(*((f"c{i}", "f", '{"a":1}') for i in range(calls))), 1)),
        (f"{calls // 1000}k SSE events of one tool call each via proxy", lambda c, b: proxied(c, b, upstream, [], _spread_calls(calls), 1)),
        (f"upload one SSE event, {calls // 1000}k tool calls", lambda c, b: upload(c, b, "many.sse", _chat_calls(*((f"c{i}", "f", '{"a":1}') for i in range(calls))))),
        (f"upload {big // MiB} MiB blank lines + event", lambda c, b: upload(c, b, "blank.sse", b"\n" * big + EVENT)),
        (f"upload {huge / MiB:.0f} MiB blank lines + event", lambda c, b: upload(c, b, "blank50.sse", b"\n" * huge + EVENT)),
        (f"upload {big // MiB} MiB comment lines + event", lambda c, b: upload(c, b, "comments.sse", b":k\n" * (big // 3) + EVENT)),
        (f"upload one {big // MiB} MiB line", lambda c, b: upload(c, b, "line.sse", line)),
        ("upload event nested 200k deep", lambda c, b: upload(c, b, "deep.sse", deep)),
        ("upload arguments nested 1M deep", lambda c, b: upload(c, b, "deepargs.sse", deep_args)),
        (f"chunked POST {500 if not quick else 100} MiB to proxy", lambda c, b: chunked_post(b, (500 if not quick else 100) * MiB)),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs (4/8 MiB uploads, 20k calls, 100 MiB POST)")
    parser.add_argument("--only", metavar="TEXT", help="run only the scenarios whose name contains TEXT")
    args = parser.parse_args()
    upstream = Upstream()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data_dir:
        command = [sys.executable, "-m", "toollatch.cli", "serve", "--port", str(port), "--data-dir", data_dir,
                   "--upstream", f"up=http://127.0.0.1:{upstream.port}"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            with httpx.Client(timeout=300) as client:
                for _ in range(200):
                    try:
                        client.get(base + "/api/live")
                        break
                    except httpx.HTTPError:
                        time.sleep(0.1)
                watcher = Watcher(base, server.pid)
                rows = []
                for name, run in scenarios(args.quick, upstream):
                    if args.only and args.only not in name:
                        continue
                    before = loop_lag_buckets(client, base)
                    watcher.start()
                    try:
                        outcome = run(client, base)
                    finally:
                        watcher.stop()
                    lag = worst_lag(before, loop_lag_buckets(client, base))
                    lat = sorted(watcher.latencies) or [0.0]
                    rows.append((name, lag * 1000, len(lat), statistics.median(lat) * 1000, lat[-1] * 1000, max(watcher.rss) / MiB, outcome))
                hwm = next((int(line.split()[1]) // 1024 for line in Path(f"/proc/{server.pid}/status").read_text().splitlines() if line.startswith("VmHWM:")), 0)
        finally:
            server.terminate()
            server.wait(30)
    width = max(len(r[0]) for r in rows)
    print(f"{'scenario':<{width}}  loop lag ms  answers  median ms  worst ms  peak RSS MiB  outcome")
    for name, lag, count, median, worst, rss, outcome in rows:
        shown = f"<= {lag:g}" if lag != math.inf else "> 5000"
        print(f"{name:<{width}}  {shown:>11}  {count:>7}  {median:>9.1f}  {worst:>8.1f}  {rss:>12.0f}  {outcome}")
    print(f"server VmHWM (peak RSS over the run): {hwm} MiB")
    worst_row = max(rows, key=lambda r: r[1])
    held = worst_row[1] <= 100
    print(f"check={'PASS' if held else 'FAIL'} event loop's worst lag <= 100 ms in every row (worst: {worst_row[1]:g} ms, {worst_row[0]})")
    return 0 if held else 1


if __name__ == "__main__":
    raise SystemExit(main())
