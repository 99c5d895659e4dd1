"""Full-speed replay of a 100,000-event capture, through the dashboard, into a real browser.

    .venv/bin/python benchmarks/ui_replay.py [--events 100000] [--calls 8] [--replays 1] [--no-stalled]

What it does:

1. starts a server process (this script with ``--serve``) that generates an OpenAI Chat
   stream in memory (:func:`toollatch.demo.stress.stress_demo`: ``--calls`` parallel calls, many
   3–8 character fragments), creates a session for it at full speed ("max"), and serves the
   dashboard with uvicorn on a loopback port;
2. optionally connects a *stalled* WebSocket viewer that never reads (small receive
   buffer), to show that a stuck consumer neither stalls the replay nor grows memory;
3. opens the session page in headless Chromium (``/usr/bin/chromium``), presses Space and
   waits until the page shows FINISHED, probing the page's main thread meanwhile; with
   ``--replays N`` it then presses R (restart) and does it again, N times in all (a
   stalled viewer only fills up once the kernel's socket buffers, a few MiB, are full);
4. prints events/second through to the browser, WebSocket messages received by the page,
   renders on the server, per-viewer queue counters, the server's RSS (after loading, peak
   sampled from ``/proc``, kernel high-water mark, ``getrusage``), page responsiveness and
   whether every final verdict arrived.

A script, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]

PAGE_PROBES = """
window.__messages = 0; window.__longest = 0; window.__gap = 0;
document.addEventListener('htmx:ws:after:message:incoming', () => { window.__messages += 1; }, true);
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__longest = Math.max(window.__longest, e.duration);
}).observe({type: 'longtask', buffered: true});
let last = performance.now();
const tick = (now) => { window.__gap = Math.max(window.__gap, now - last); last = now; requestAnimationFrame(tick); };
requestAnimationFrame(tick);
"""


# ------------------------------------------------------------------ server process


def serve(port: int, events: int, calls: int) -> None:
    """The server side: build the stream and its session, print them, serve until killed."""
    import uvicorn

    from toollatch.demo.stress import stress_demo
    from toollatch.web import Settings, create_app
    from toollatch.web.settings import FULL_SPEED
    from toollatch.web.triage.sources import from_demo

    demo = stress_demo(events, calls)
    app = create_app(Settings(port=port))
    session = app.state.store.create(from_demo(demo), speed=FULL_SPEED, autoplay=False)
    print(json.dumps({"sid": session.id, "events": demo.events, "bytes": len(demo.wire), "calls": calls}), flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


# ------------------------------------------------------------------ measuring helpers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proc_kib(pid: int, field: str) -> int:
    """``VmRSS`` / ``VmHWM`` of a process, in KiB, from ``/proc/<pid>/status`` (0 if gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class RssSampler(threading.Thread):
    """Samples a process's RSS every ``interval`` seconds; ``peak`` in KiB."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak, self.stop = pid, interval, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, proc_kib(self.pid, "VmRSS"))
            self.stop.wait(self.interval)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def wait_until_up(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            get_json(url)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def stalled_viewer(port: int, sid: str) -> socket.socket:
    """A WebSocket viewer that completes the handshake and then never reads."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # backpressure reaches the server soon
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /ws/sessions/{sid} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: http://127.0.0.1:{port}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    if b" 101 " not in head.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"WebSocket handshake refused: {head[:80]!r}")
    return sock


# ------------------------------------------------------------------ the run


def replay_once(page: Any, key: str, total: int, timeout: float) -> float:
    """Press ``key`` (Space: play, R: restart) and wait for FINISHED; returns the slowest
    ``evaluate()`` round trip to the page meanwhile, in seconds."""
    page.keyboard.press(key)
    page.wait_for_function(f"+document.querySelector('#status').dataset.position < {total} || document.querySelector('.pill.status-playing')")
    start, slowest = time.monotonic(), 0.0
    while not page.locator(".pill.status-finished, .pill.status-error").count():
        t = time.monotonic()
        page.evaluate("document.querySelectorAll('.card').length")  # a task on the page's main thread
        slowest = max(slowest, time.monotonic() - t)
        if time.monotonic() - start > timeout:
            raise SystemExit(f"the replay did not finish within {timeout:.0f} s")
    return slowest


def run(events: int, calls: int, replays: int, stalled: bool, timeout: float) -> int:
    from playwright.sync_api import sync_playwright

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--port", str(port), "--events", str(events), "--calls", str(calls)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert server.stdout is not None
    started = time.monotonic()
    info = json.loads(server.stdout.readline())
    sid, base = info["sid"], f"http://127.0.0.1:{port}"
    wait_until_up(f"{base}/api/sessions/{sid}")
    load_s = time.monotonic() - started
    rss_loaded, hwm_loaded = proc_kib(server.pid, "VmRSS"), proc_kib(server.pid, "VmHWM")
    sampler = RssSampler(server.pid)
    sampler.start()
    viewer = stalled_viewer(port, sid) if stalled else None

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(PAGE_PROBES)
        page.goto(f"{base}/sessions/{sid}")
        page.wait_for_function("window.__messages > 0")  # the WebSocket is up: full state received
        t0 = time.monotonic()
        probe_max = 0.0
        for n in range(replays):  # Space plays (at full speed); R restarts
            probe_max = max(probe_max, replay_once(page, " " if n == 0 else "r", info["events"], timeout))
        elapsed = time.monotonic() - t0
        page.wait_for_function(f"document.querySelectorAll('#verdict-log li').length >= {calls + 1}", timeout=10_000)
        committed = page.locator('.card[data-state="committed"]').count()
        verdicts = page.locator("#verdict-log li").count()
        status = page.locator("#status").get_attribute("data-status")
        messages, longest, gap = page.evaluate("[window.__messages, window.__longest, window.__gap]")
        doc = get_json(f"{base}/api/sessions/{sid}")
        sampler.stop.set()
        sampler.join()
        hwm = proc_kib(server.pid, "VmHWM")
        if viewer is not None:
            viewer.close()
        server.terminate()
        server.wait(10)
        children_maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux: the server, just reaped
        browser.close()

    delivery = doc["delivery"]
    mib = 1024.0
    fed = info["events"] * replays
    print(f"capture            {info['events']:,} provider events, {info['bytes'] / 2**20:.1f} MiB of OpenAI Chat SSE, {calls} parallel calls")
    print(f"server startup     {load_s:.2f} s (generate the stream in memory, dry run, uvicorn)")
    print(f"replay             {replays} × at full speed in {elapsed:.2f} s, Space to FINISHED on the page: {fed / elapsed:,.0f} events/s through to the browser")
    print(f"server renders     {delivery['renders']} (cap {delivery['max_renders_per_second']:g}/s; {delivery['renders'] / elapsed:.1f}/s here)")
    print(f"browser frames     {messages} WebSocket messages swapped in by htmx (incl. the initial full state)")
    for stats in delivery["viewers"]:
        role = "stalled viewer" if stalled and stats["viewer"] == 1 else "browser viewer"
        print(f"  {role:<16} {json.dumps(stats)}")
    print(f"server RSS         {rss_loaded / mib:.1f} MiB after loading (high-water {hwm_loaded / mib:.1f} MiB, from generating the stream); "
          f"peak sampled during the replay {sampler.peak / mib:.1f} MiB (+{(sampler.peak - rss_loaded) / mib:.1f} MiB); "
          f"high-water at the end {hwm / mib:.1f} MiB; getrusage(RUSAGE_CHILDREN).ru_maxrss {children_maxrss / mib:.1f} MiB")
    print(f"page               longest task {longest:.0f} ms, longest gap between animation frames {gap:.0f} ms, "
          f"slowest evaluate() round trip during the replay {probe_max * 1000:.0f} ms")
    ok = status == "finished" and committed == calls and verdicts == calls + 1
    print(f"final verdicts     {'arrived' if ok else 'MISSING'}: status {status}, {committed}/{calls} cards COMMITTED, {verdicts} verdicts in the aria-live log")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description="Full-speed replay of a large capture through the dashboard into headless Chromium.")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--replays", type=int, default=1, help="replay N times back to back (R restarts)")
    parser.add_argument("--no-stalled", dest="stalled", action="store_false", help="do not connect a viewer that never reads")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.port, args.events, args.calls)
        return 0
    return run(args.events, args.calls, max(1, args.replays), args.stalled, args.timeout)


if __name__ == "__main__":
    raise SystemExit(main())
