"""Latency the recording proxy adds per chunk, over loopback, against the built-in mock.

    .venv/bin/python benchmarks/proxy.py [--streams 20] [--rate 200] [--chunks 1000] [--rounds 3]

Three processes (four with the relay below): the mock provider (the toollatch mock app, with each write stamped), the
dashboard (``toollatch serve --upstream bench=<mock>``) and this client. The mock
prefixes every write with an SSE comment line ``: t=<CLOCK_MONOTONIC ns>`` (comments are
ignored by SSE readers; the assembler counts them as a quirk). The client reads ``streams``
concurrent streams of ``chunks`` chunks at ``rate`` chunks/s each, records for every chunk
``arrival - stamp`` (CLOCK_MONOTONIC is one clock for every process on the machine; the client reads each
stream off a plain socket, so that its own CPU use competes little with what it measures), and
does so directly against the mock and through ``/proxy/bench/...`` in alternating rounds
of the same run. Streams start spread over one chunk interval, as independent agents do
(``--lockstep`` starts them at once: every stream's chunk then arrives in the same
instant and the proxy forwards the burst one chunk after another). The proxy's added latency is the difference of the percentiles; the
target is p99 added < 2 ms.

For reference, a third path in the same rounds: a bare TCP relay (a process of its own, as
the dashboard is, piping bytes both ways with no HTTP). What it adds is what one more process
on the path costs on this machine (waking it per chunk, and the cores it shares with the
client and the mock); what the proxy adds beyond it is the proxy's own work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STAMP = re.compile(rb": t=(\d+)\n")
TARGET_P99_MS = 2.0
#: Seconds of pause after each proxied round: the dashboard checks and saves that round's
#: recordings meanwhile, so that work never lands in the next round's measurements.
SETTLE_S = 3.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_upstream(port: int, captures: Path, delay: float) -> None:
    """The mock provider with every write stamped (runs in its own process)."""
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
                message = {**message, "body": b": t=%d\n" % time.monotonic_ns() + message["body"]}
            await send(message)

        await inner(scope, receive, stamped if scope["type"] == "http" else send)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


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


def wait_up(url: str, process: subprocess.Popen[bytes]) -> None:
    import httpx

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{url}: server exited with {process.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise SystemExit(f"{url}: server did not start")


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


def cpu_seconds(pid: int) -> float | None:
    """CPU time a process's threads have run, in seconds (Linux ``/proc``; None elsewhere)."""
    try:
        tasks = Path(f"/proc/{pid}/task")
        return sum(int((task / "schedstat").read_text().split()[0]) for task in tasks.iterdir()) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--rate", type=float, default=200.0, help="chunks per second per stream")
    parser.add_argument("--chunks", type=int, default=1000, help="chunks per stream")
    parser.add_argument("--rounds", type=int, default=3, help="direct/relay/proxied round triples")
    parser.add_argument("--lockstep", action="store_true",
                        help="start every stream at once, so all streams' chunks arrive in the same instant (default: "
                             "independent agents, their starts spread over one chunk interval)")
    parser.add_argument("--upstream-server", nargs=3, metavar=("PORT", "CAPTURES", "DELAY"), help=argparse.SUPPRESS)
    parser.add_argument("--relay-server", nargs=2, metavar=("PORT", "UPSTREAM_PORT"), type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream_server:
        port, captures, delay = args.upstream_server
        run_upstream(int(port), Path(captures), float(delay))
        return 0
    if args.relay_server:
        run_relay(*args.relay_server)
        return 0

    from toollatch.demo.stress import stress_demo

    work = Path(tempfile.mkdtemp(prefix="toollatch-bench-"))
    (work / "caps").mkdir()
    (work / "caps" / "stress.sse").write_bytes(stress_demo(events=args.chunks, calls=4).wire)
    mock_port, proxy_port, relay_port = free_port(), free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env, "cwd": ROOT}
    mock = subprocess.Popen([sys.executable, __file__, "--upstream-server", str(mock_port), str(work / "caps"), str(1 / args.rate)], **quiet)  # type: ignore[call-overload]
    relay = subprocess.Popen([sys.executable, __file__, "--relay-server", str(relay_port), str(mock_port)], **quiet)  # type: ignore[call-overload]
    serve = subprocess.Popen(
        [sys.executable, "-m", "toollatch.cli", "serve", "--port", str(proxy_port), "--data-dir", str(work / "data"),
         "--captures", str(work / "caps"), "--upstream", f"bench=http://127.0.0.1:{mock_port}"],
        **quiet,  # type: ignore[call-overload]
    )
    try:
        wait_up(f"http://127.0.0.1:{mock_port}/api/scenarios", mock)
        wait_up(f"http://127.0.0.1:{proxy_port}/api/sources", serve)
        wait_up(f"http://127.0.0.1:{relay_port}/api/scenarios", relay)
        body = {"model": "stress.sse", "stream": True, "messages": [{"role": "user", "content": "bench"}]}
        direct_url = f"http://127.0.0.1:{mock_port}/v1/chat/completions"
        proxy_url = f"http://127.0.0.1:{proxy_port}/proxy/bench/v1/chat/completions"
        relay_url = f"http://127.0.0.1:{relay_port}/v1/chat/completions"
        for url in (direct_url, relay_url, proxy_url):  # warm up every path
            asyncio.run(round_of(url, 2, body))
        spread = 0.0 if args.lockstep else 1.0 / args.rate
        direct: list[float] = []
        proxied: list[float] = []
        relayed: list[float] = []
        rates: dict[str, list[float]] = {"direct": [], "relay": [], "proxied": []}
        dashboard_cpu: list[float] = []  # seconds of the dashboard's CPU per proxied round
        added_by_round: list[float] = []  # p99 added in each triple: how much the figure moves from round to round
        for _ in range(args.rounds):
            for name, url, sink in (("direct", direct_url, direct), ("relay", relay_url, relayed), ("proxied", proxy_url, proxied)):
                before = cpu_seconds(serve.pid)
                got, elapsed, count = asyncio.run(round_of(url, args.streams, body, spread))
                after = cpu_seconds(serve.pid)
                if name == "proxied" and before is not None and after is not None:
                    dashboard_cpu.append(after - before)
                sink.extend(got)
                rates[name].append(count / args.streams / elapsed)
                if name == "direct":
                    direct_p99 = pct(got, 99)
                elif name == "proxied":
                    added_by_round.append(pct(got, 99) - direct_p99)
                if name == "proxied":  # the dashboard saves the round's recordings: not during the next round
                    time.sleep(SETTLE_S)
    finally:
        for process in (serve, relay, mock):
            process.terminate()
            process.wait(timeout=10)

    print(f"toollatch proxy benchmark: {args.streams} concurrent streams x {args.chunks} chunks at {args.rate:g} chunks/s each, "
          f"loopback, {args.rounds} direct/relay/proxied round triples, starts {'in lockstep' if args.lockstep else 'spread over one chunk interval'} "
          f"(Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print(f"{'path':<9} {'chunks':>8} {'chunks/s/stream':>16} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'mean ms':>8}")
    for name, values in (("direct", direct), ("relay", relayed), ("proxied", proxied)):
        print(f"{name:<9} {len(values):>8} {statistics.mean(rates[name]):>16.1f} {pct(values, 50):>8.3f} {pct(values, 99):>8.3f} "
              f"{max(values):>8.3f} {statistics.mean(values):>8.3f}")
    if dashboard_cpu:
        print(f"dashboard CPU during the proxied rounds: {1e6 * sum(dashboard_cpu) / len(proxied):.1f} us per chunk "
              f"({100 * sum(dashboard_cpu) / (len(dashboard_cpu) * args.chunks / args.rate):.0f}% of one core)")
    print("p99 added by the proxy in each round triple: " + ", ".join(f"{value:.3f} ms" for value in added_by_round))
    added50, added99 = pct(proxied, 50) - pct(direct, 50), pct(proxied, 99) - pct(direct, 99)
    verdict = "PASS" if added99 < TARGET_P99_MS else "FAIL"
    hop50, hop99 = pct(relayed, 50) - pct(direct, 50), pct(relayed, 99) - pct(direct, 99)
    print(f"for reference, added by a bare TCP relay (one more process on the path, no HTTP): p50 {hop50:.3f} ms, p99 {hop99:.3f} ms")
    print(f"for reference, added by the proxy beyond that relay: p50 {added50 - hop50:.3f} ms, p99 {added99 - hop99:.3f} ms")
    print(f"added by the proxy per chunk: p50 {added50:.3f} ms, p99 {added99:.3f} ms (target p99 < {TARGET_P99_MS:g} ms: {verdict})")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
