"""A large capture uploaded to the dashboard, against the same file through ``toollatch assemble``.

    .venv/bin/python benchmarks/upload.py [--mib 50] [--calls 24] [--quick]

Generates an OpenAI Chat Completions SSE capture of a little under ``--mib`` MiB (at most
the dashboard's upload limit, 50 MiB) in a temporary folder: ``--calls`` parallel tool calls with large
arguments (a JSON object with a long ``body`` string), streamed as many small fragments
interleaved round-robin by ``index``, so the file is mostly event envelopes, as a real
stream's is. Then, one after the other:

1. ``toollatch assemble <file> --json`` in a process of its own: wall time, and its peak
   RSS (``os.wait4``'s resource usage of that one child);
2. ``toollatch serve`` in a process of its own: the file is uploaded to
   ``POST /sessions/upload`` at full speed (``rate=max``), and ``GET /api/sessions/<id>`` is
   polled until the session's status is ``finished``. Printed: the time until the upload is
   answered (read, checked, stored) and until the session is finished (replayed through
   the dashboard's assembly), the server's RSS before the upload, and its peak RSS
   (``VmHWM``) after it.

Then the ratios: dashboard over ``assemble``, for time and for peak memory (the server's
peak less its RSS before the upload, against ``assemble``'s whole peak: that includes the
interpreter, so the ratio flatters the dashboard a little). ``--quick``: an 8 MiB capture.
A script, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from procs import free_port, memory_kib, wait_up  # noqa: E402  (benchmarks/procs.py)

MIB = 1024 * 1024
#: Characters of filler the generated arguments repeat (plain ASCII: one byte a character).
_FILLER = (
    "a streamed tool call's arguments arrive as many small fragments that are joined and "
    "parsed only once the stream ended normally and the text is strict JSON that the schema holds "
)


def generate(path: Path, size: int, calls: int) -> int:
    """Write an OpenAI Chat Completions SSE capture of at most ``size`` bytes (a little under)
    to ``path``: ``calls`` parallel ``write_note`` calls whose arguments (valid JSON objects)
    are cut in fragments of 5 to 40 characters interleaved by ``index``. Returns the number
    of provider events written."""
    envelope = '{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":'

    def event(delta: str, finish: str = "null") -> bytes:
        return f'data: {envelope}{delta},"finish_reason":{finish}}}]}}\n\n'.encode()

    head = [event('{"role":"assistant","content":null}')] + [
        event(f'{{"tool_calls":[{{"index":{i},"id":"call_{i:024d}","type":"function","function":{{"name":"write_note","arguments":""}}}}]}}')
        for i in range(calls)
    ]
    tail = event("{}", '"tool_calls"') + b"data: [DONE]\n\n"
    prefixes = [f'{{"tool_calls":[{{"index":{i},"function":{{"arguments":' for i in range(calls)]

    def events(text_per_call: int) -> list[bytes]:
        texts = []
        for i in range(calls):
            opening = f'{{"path":"notes/{i}.md","body":"'
            body = (_FILLER * (text_per_call // len(_FILLER) + 1))[: max(0, text_per_call - len(opening) - 2)]
            texts.append(opening + body + '"}')
        out, positions, step = list(head), [0] * calls, 0
        while any(p < len(t) for p, t in zip(positions, texts)):
            for i, text in enumerate(texts):
                if positions[i] < len(text):
                    width = 5 + (step * 7 + i * 13) % 36  # 5 to 40 characters, reproducible
                    piece = text[positions[i] : positions[i] + width]
                    positions[i] += len(piece)
                    out.append(event(prefixes[i] + json.dumps(piece) + "}}]}"))
            step += 1
        out.append(tail)
        return out

    text_per_call = 4096
    made = events(text_per_call)
    for _ in range(4):  # scale the arguments until the file fits just under ``size``
        total = sum(map(len, made))
        if 0.97 * size <= total <= size:
            break
        text_per_call = max(64, int(text_per_call * 0.985 * size / total))
        made = events(text_per_call)
    while sum(map(len, made)) > size:
        text_per_call = int(text_per_call * 0.99)
        made = events(text_per_call)
    path.write_bytes(b"".join(made))
    return len(made) - 1  # the [DONE] line is part of the tail's two events


def run_assemble(path: Path) -> tuple[float, int]:
    """``toollatch assemble --json path`` in a process of its own: (wall seconds, peak RSS KiB)."""
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "toollatch.cli", "assemble", "--json", str(path)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):  # 1: some call did not commit (the table says which)
        raise SystemExit(f"toollatch assemble exited with {process.returncode}: {process.stderr.read().decode()[-500:] if process.stderr else ''}")
    return elapsed, int(usage.ru_maxrss)


def run_upload(path: Path, work: Path) -> dict[str, float]:
    """Upload ``path`` to a ``toollatch serve`` of its own and wait for its session to finish."""
    import httpx

    port = free_port()
    serve = subprocess.Popen([sys.executable, "-m", "toollatch.cli", "serve", "--port", str(port), "--data-dir", str(work / "data"),
                              "--captures", str(work / "caps")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_up(f"{base}/api/sources", serve)
        before = memory_kib(serve.pid) or (0, 0)
        with httpx.Client(base_url=base, timeout=600) as client, path.open("rb") as capture:
            started = time.monotonic()
            answer = client.post("/sessions/upload", files={"file": (path.name, capture, "text/event-stream")}, data={"rate": "max"})
            answered = time.monotonic() - started
            location = answer.headers.get("location", "")
            if answer.status_code != 303 or not location.startswith("/sessions/"):
                raise SystemExit(f"upload: {answer.status_code} {answer.text[:500]}")
            sid = location.rsplit("/", 1)[-1]
            while True:
                status = client.get(f"/api/sessions/{sid}").json()["status"]
                if status != "playing":
                    break
                time.sleep(0.05)
            finished = time.monotonic() - started
        after = memory_kib(serve.pid) or (0, 0)
        if status != "finished":
            raise SystemExit(f"upload: the session ended {status}")
        return {"answered_s": answered, "finished_s": finished, "rss_before_kib": before[0], "peak_kib": after[1], "rss_after_kib": after[0]}
    finally:
        serve.terminate()
        serve.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=50.0, help="capture size in MiB (at most the upload limit)")
    parser.add_argument("--calls", type=int, default=24, help="parallel tool calls in the stream")
    parser.add_argument("--quick", action="store_true", help="an 8 MiB capture")
    args = parser.parse_args()
    from toollatch.web.settings import MAX_UPLOAD_BYTES

    size = min(int((8.0 if args.quick else args.mib) * MIB), MAX_UPLOAD_BYTES)
    work = Path(tempfile.mkdtemp(prefix="toollatch-upload-"))
    (work / "caps").mkdir()
    path = work / "caps" / "large.sse"
    events = generate(path, size, args.calls)
    actual = path.stat().st_size
    print(f"toollatch upload benchmark: {actual / MIB:.1f} MiB OpenAI Chat capture, {events} events, {args.calls} parallel calls "
          f"(Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f})")
    assemble_s, assemble_kib = run_assemble(path)
    print(f"toollatch assemble --json:  {assemble_s:7.2f} s   peak RSS {assemble_kib / 1024:7.1f} MiB")
    up = run_upload(path, work)
    added = up["peak_kib"] - up["rss_before_kib"]
    print(f"dashboard upload:           {up['finished_s']:7.2f} s   peak RSS {up['peak_kib'] / 1024:7.1f} MiB "
          f"(before the upload {up['rss_before_kib'] / 1024:.1f} MiB, added {added / 1024:.1f} MiB; after {up['rss_after_kib'] / 1024:.1f} MiB)")
    print(f"  of which until the upload was answered (read, checked, stored): {up['answered_s']:.2f} s; "
          f"the replay to the finished session: {up['finished_s'] - up['answered_s']:.2f} s")
    print(f"ratios, dashboard / assemble: time {up['finished_s'] / assemble_s:.2f}x, "
          f"peak memory {up['peak_kib'] / assemble_kib:.2f}x (added by the upload {added / assemble_kib:.2f}x), "
          f"memory per capture byte: {added * 1024 / actual:.1f} (assemble {assemble_kib * 1024 / actual:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
