"""Latency and CPU the recording proxy adds per chunk, over loopback, against the built-in mock.

    .venv/bin/python benchmarks/proxy.py [--streams 20] [--rate 200] [--chunks 1000] [--rounds 3] [--quick]

Processes: the mock provider (the toollatch mock app, with each write stamped), two
dashboards (``toollatch serve --upstream bench=<mock>``), a bare TCP relay, and this client.
One dashboard runs as served, its **tee on**: every proxied stream is also recorded,
assembled into a live session and broadcast to its viewers. The other has its **tee off**:
the same server and proxy, but no live session is made for a request, so it only forwards.
The CPU each spends per proxied chunk, and their ratio, is what the tee costs (target:
tee on ≤ :data:`TARGET_CPU_RATIO` × tee off, the ``check=`` line).

Latency: the mock prefixes every write with an SSE ``id: t=<CLOCK_MONOTONIC ns>`` line (a
field SSE readers keep as the last event id, and the assembler ignores: the stream is
assembled as the same stream without stamps would be). With ``--comment-stamps`` the stamp
is a comment line ``: t=<ns>`` instead, as earlier runs of this benchmark had it: the
assembler counts each as a ``comment_line`` quirk, so every event takes its slower path for
events with framing notes, which a provider's stream seldom does. The client
reads ``streams`` concurrent streams of ``chunks`` chunks at ``rate`` chunks/s each, records
for every chunk ``arrival - stamp`` (CLOCK_MONOTONIC is one clock for every process on the
machine; the client reads each stream off a plain socket, so that its own CPU use competes
little with what it measures), directly against the mock, through the relay and through
both dashboards' ``/proxy/bench/...`` in alternating rounds of the same run. Streams start
spread over one chunk interval, as independent agents do (``--lockstep`` starts them at
once). What a path adds is the difference of the percentiles against the direct path; the
relay's (one more process on the path, no HTTP: waking it per chunk, the cores it shares
with the client and the mock) is printed next to the proxy's, for reference: there is no
absolute target, as the figure depends on the machine.

``--quick``: fewer, shorter streams and two rounds of each (under a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from procs import cpu_seconds, free_port, wait_up  # noqa: E402  (benchmarks/procs.py)

STAMP = re.compile(rb": t=(\d+)\n")  # in an id field or a comment line alike
#: Most the tee may cost: tee-on CPU per proxied chunk ≤ this × tee-off CPU per chunk.
TARGET_CPU_RATIO = 1.2
#: Seconds of pause after each proxied round: the dashboard checks and saves that round's
#: recordings meanwhile, so that work never lands in the next round's measurements.
SETTLE_S = 3.0


def run_upstream(port: int, captures: Path, delay: float, field: bytes = b"id") -> None:
    """The mock provider with every write stamped (runs in its own process); ``field``:
    ``id`` (an SSE id field) or empty (a comment line)."""
    import uvicorn
    from starlette.types import Message, Receive, Scope, Send

    from toollatch.web.live.mock import MockProvider, create_mock_app

    inner = create_mock_app(MockProvider(captures, delay=delay), ["127.0.0.1"])

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        streaming = False

        async def stamped(message: Message) -> None:
            nonlocal streaming
            if message["type"] == "http.response.start":
                streaming = any(k == b"content-type" and v.startswith(b"text/event-stream") for k, v in message["headers"])
            elif streaming and message["type"] == "http.response.body" and message.get("body"):
                message = {**message, "body": b"%s: t=%d\n" % (field, time.monotonic_ns()) + message["body"]}
            await send(message)

        await inner(scope, receive, stamped if scope["type"] == "http" else send)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def run_dashboard(tee: str, serve_args: list[str]) -> int:
    """``toollatch serve serve_args`` (runs in its own process); ``tee`` ``off``: no live
    session is made for a proxied request, so the proxy only forwards. With
    ``TOOLLATCH_BENCH_PROFILE=<file>`` set, the process is profiled (cProfile) and the
    statistics written there when it stops."""
    from toollatch.cli import main as cli_main
    from toollatch.web.live.store import LiveSessionStore

    if tee == "off":
        LiveSessionStore.create_live = lambda self, source, session_class=None: None  # type: ignore[assignment,method-assign,misc]
    profile_to = os.environ.get("TOOLLATCH_BENCH_PROFILE")
    if not profile_to:
        return int(cli_main(["serve", *serve_args]) or 0)
    import cProfile

    profiler = cProfile.Profile()
    shutdown = LiveSessionStore.shutdown

    async def shutdown_and_dump(self: LiveSessionStore) -> None:  # uvicorn ends the process by the signal it got
        await shutdown(self)
        profiler.disable()
        profiler.dump_stats(profile_to)

    LiveSessionStore.shutdown = shutdown_and_dump  # type: ignore[method-assign]
    return int(profiler.runcall(cli_main, ["serve", *serve_args]) or 0)


def run_relay(port: int, upstream_port: int) -> None:
    """A bare TCP relay to the mock (runs in its own process): bytes piped both ways, no HTTP."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    try:
        import uvloop  # the event loop the dashboard runs on (uvicorn picks it)

        uvloop.run(serve())
    except ImportError:
        asyncio.run(serve())


async def one_stream(url: str, payload: bytes, latencies: list[float], start_after: float = 0.0) -> int:
    """One streamed POST read off a plain socket: the client's own CPU use stays small, so it
    competes little with the paths it measures for the machine's cores."""
    await asyncio.sleep(start_after)
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(
        b"POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
        % (parts.path.encode(), parts.hostname.encode(), parts.port, len(payload)) + payload
    )
    head = await reader.readuntil(b"\r\n\r\n")
    if head.split(b" ", 2)[1] != b"200":
        raise SystemExit(f"{url}: {head.splitlines()[0].decode()}")
    chunks, tail = 0, b""
    while data := await reader.read(65536):
        now = time.monotonic_ns()
        buf = tail + data
        end = 0
        for match in STAMP.finditer(buf):
            latencies.append((now - int(match.group(1))) / 1e6)
            chunks += 1
            end = match.end()
        tail = buf[max(end, len(buf) - 32) :]  # a stamp cut by this read is completed by the next
    writer.close()
    return chunks


async def round_of(url: str, streams: int, body: dict[str, object], spread: float = 0.0) -> tuple[list[float], float, int]:
    """``streams`` concurrent streams, started ``spread / streams`` seconds apart (0: all at once)."""
    latencies: list[float] = []
    payload = json.dumps(body).encode()
    started = time.monotonic()
    counts = await asyncio.gather(*(one_stream(url, payload, latencies, n * spread / streams) for n in range(streams)))
    elapsed = time.monotonic() - started - spread * (streams - 1) / streams
    return latencies, elapsed, sum(counts)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


class Path_:
    """One path measured: its latencies, rates, and (for a dashboard) CPU seconds per round."""

    def __init__(self, name: str, url: str, pid: int | None = None) -> None:
        self.name, self.url, self.pid = name, url, pid
        self.latencies: list[float] = []
        self.rates: list[float] = []
        self.cpu: list[float] = []  # seconds of the dashboard's CPU while its round streamed
        self.cpu_after: list[float] = []  # ... and in the pause after it (the recordings saved)
        self.chunks = 0
        self.added_p99: list[float] = []  # p99 added in each round, against that round's direct p99


def measure(path: Path_, args: argparse.Namespace, body: dict[str, object], spread: float, direct_p99: float | None) -> float:
    """One round on ``path``; returns its p99 (ms)."""
    before = cpu_seconds(path.pid) if path.pid else None
    got, elapsed, count = asyncio.run(round_of(path.url, args.streams, body, spread))
    after = cpu_seconds(path.pid) if path.pid else None
    if path.pid:  # the dashboard saves the round's recordings: not during the next round
        time.sleep(args.settle)
    settled = cpu_seconds(path.pid) if path.pid else None
    if before is not None and after is not None and settled is not None:
        path.cpu.append(after - before)
        path.cpu_after.append(settled - after)
    path.latencies.extend(got)
    path.chunks += count
    path.rates.append(count / args.streams / elapsed)
    p99 = pct(got, 99)
    if direct_p99 is not None:
        path.added_p99.append(p99 - direct_p99)
    return p99


def report(args: argparse.Namespace, paths: dict[str, Path_]) -> int:
    print(f"toollatch proxy benchmark: {args.streams} concurrent streams x {args.chunks} chunks at {args.rate:g} chunks/s each, "
          f"loopback, {args.rounds} round(s) of each path, starts {'in lockstep' if args.lockstep else 'spread over one chunk interval'}, "
          f"stamps in {'SSE comment lines' if args.comment_stamps else 'SSE id fields'} "
          f"(Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f})")
    print(f"{'path':<13} {'chunks':>8} {'chunks/s/stream':>16} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'mean ms':>8}")
    for path in paths.values():
        v = path.latencies
        print(f"{path.name:<13} {len(v):>8} {statistics.mean(path.rates):>16.1f} {pct(v, 50):>8.3f} {pct(v, 99):>8.3f} "
              f"{max(v):>8.3f} {statistics.mean(v):>8.3f}")
    direct = paths["direct"].latencies
    for name in ("relay", "tee on", "tee off"):
        path = paths[name]
        label = "bare TCP relay" if name == "relay" else f"proxy, {name}"
        print(f"p99 added by the {label}: {pct(path.latencies, 99) - pct(direct, 99):.3f} ms "
              f"(p50 {pct(path.latencies, 50) - pct(direct, 50):.3f} ms; per round: "
              + ", ".join(f"{value:.3f}" for value in path.added_p99) + ")")
    on, off = paths["tee on"], paths["tee off"]
    if not (on.cpu and off.cpu and on.chunks and off.chunks):
        print("check=SKIP dashboard CPU time not readable (/proc)")
        return 0
    us_on, us_off = 1e6 * sum(on.cpu) / on.chunks, 1e6 * sum(off.cpu) / off.chunks
    after_on, after_off = 1e6 * sum(on.cpu_after) / on.chunks, 1e6 * sum(off.cpu_after) / off.chunks
    print(f"dashboard CPU per proxied chunk while streaming: tee on {us_on:.1f} us, tee off {us_off:.1f} us")
    print(f"  plus after the streams (recordings checked and saved; idle otherwise): tee on {after_on:.1f} us, tee off {after_off:.1f} us")
    ratio = us_on / us_off
    verdict = "PASS" if ratio <= TARGET_CPU_RATIO else "FAIL"
    print(f"tee on / tee off CPU per chunk: {ratio:.2f}x (with the after-stream work: {(us_on + after_on) / (us_off + after_off):.2f}x)")
    print(f"check={verdict} tee-on CPU per chunk <= {TARGET_CPU_RATIO:g}x tee-off ({ratio:.3f}x)")
    return 0 if verdict == "PASS" else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--rate", type=float, default=200.0, help="chunks per second per stream")
    parser.add_argument("--chunks", type=int, default=1000, help="chunks per stream")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each path (direct, relay, tee on, tee off)")
    parser.add_argument("--settle", type=float, default=SETTLE_S, help="seconds of pause after each dashboard round")
    parser.add_argument("--quick", action="store_true", help="10 streams x 400 chunks, 2 rounds, 2 s pauses (under a minute)")
    parser.add_argument("--lockstep", action="store_true",
                        help="start every stream at once, so all streams' chunks arrive in the same instant (default: "
                             "independent agents, their starts spread over one chunk interval)")
    parser.add_argument("--comment-stamps", action="store_true",
                        help="stamp each write with an SSE comment line (a quirk for the assembler) instead of an id field")
    parser.add_argument("--upstream-server", nargs=4, metavar=("PORT", "CAPTURES", "DELAY", "FIELD"), help=argparse.SUPPRESS)
    parser.add_argument("--relay-server", nargs=2, metavar=("PORT", "UPSTREAM_PORT"), type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dashboard-server", choices=("on", "off"), help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.upstream_server:
        port, captures, delay, field = args.upstream_server
        run_upstream(int(port), Path(captures), float(delay), b"" if field == "comment" else field.encode())
        return 0
    if args.relay_server:
        run_relay(*args.relay_server)
        return 0
    if args.dashboard_server:
        return run_dashboard(args.dashboard_server, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.quick:
        args.streams, args.chunks, args.rounds, args.settle = 10, 400, 2, 2.0  # two: each dashboard measured first once

    from toollatch.demo.stress import stress_demo

    work = Path(tempfile.mkdtemp(prefix="toollatch-bench-"))
    (work / "caps").mkdir()
    (work / "caps" / "stress.sse").write_bytes(stress_demo(events=args.chunks, calls=4).wire)
    mock_port, relay_port, on_port, off_port = free_port(), free_port(), free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env, "cwd": ROOT}
    me = [sys.executable, __file__]
    processes = [
        subprocess.Popen([*me, "--upstream-server", str(mock_port), str(work / "caps"), str(1 / args.rate),
                          "comment" if args.comment_stamps else "id"], **quiet),  # type: ignore[call-overload]
        subprocess.Popen([*me, "--relay-server", str(relay_port), str(mock_port)], **quiet),  # type: ignore[call-overload]
    ]
    dashboards = {}
    for tee, port in (("on", on_port), ("off", off_port)):
        dashboards[tee] = subprocess.Popen(
            [*me, "--dashboard-server", tee, "--port", str(port), "--data-dir", str(work / f"data-{tee}"),
             "--captures", str(work / "caps"), "--upstream", f"bench=http://127.0.0.1:{mock_port}"],
            **{**quiet, "env": {**env, **({"TOOLLATCH_BENCH_PROFILE": f"{os.environ['TOOLLATCH_BENCH_PROFILE']}.{tee}"}
                                          if os.environ.get("TOOLLATCH_BENCH_PROFILE") else {})}},  # type: ignore[call-overload]
        )
        processes.append(dashboards[tee])
    try:
        wait_up(f"http://127.0.0.1:{mock_port}/api/scenarios", processes[0])
        wait_up(f"http://127.0.0.1:{relay_port}/api/scenarios", processes[1])
        for tee, port in (("on", on_port), ("off", off_port)):
            wait_up(f"http://127.0.0.1:{port}/api/sources", dashboards[tee])
        body = {"model": "stress.sse", "stream": True, "messages": [{"role": "user", "content": "bench"}]}
        endpoint = "/v1/chat/completions"
        paths = {
            "direct": Path_("direct", f"http://127.0.0.1:{mock_port}{endpoint}"),
            "relay": Path_("relay", f"http://127.0.0.1:{relay_port}{endpoint}"),
            "tee on": Path_("tee on", f"http://127.0.0.1:{on_port}/proxy/bench{endpoint}", dashboards["on"].pid),
            "tee off": Path_("tee off", f"http://127.0.0.1:{off_port}/proxy/bench{endpoint}", dashboards["off"].pid),
        }
        for path in paths.values():  # warm up every path
            asyncio.run(round_of(path.url, 2, body))
        time.sleep(args.settle)  # the warm-up's recordings are saved before the first round
        spread = 0.0 if args.lockstep else 1.0 / args.rate
        for n in range(args.rounds):
            order = ["tee on", "tee off"] if n % 2 == 0 else ["tee off", "tee on"]  # neither always runs first
            direct_p99 = measure(paths["direct"], args, body, spread, None)
            for name in ("relay", *order):
                measure(paths[name], args, body, spread, direct_p99)
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
    return report(args, paths)


if __name__ == "__main__":
    raise SystemExit(main())
