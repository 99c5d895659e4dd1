"""Process helpers the benchmarks that start servers share: a free port, waiting for a
server to answer, and a process's CPU time and peak memory (Linux ``/proc``)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A loopback TCP port nobody listens on (at the time of the call)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_up(url: str, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Return once ``url`` answers a GET; SystemExit when ``process`` exits or ``timeout``
    seconds pass first."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{url}: server exited with {process.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise SystemExit(f"{url}: server did not start")


def cpu_seconds(pid: int) -> float | None:
    """CPU time a process's threads have run, in seconds (Linux ``/proc``; None elsewhere)."""
    try:
        tasks = Path(f"/proc/{pid}/task")
        return sum(int((task / "schedstat").read_text().split()[0]) for task in tasks.iterdir()) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def memory_kib(pid: int) -> tuple[int, int] | None:
    """``(current RSS, peak RSS)`` of a running process in KiB (``VmRSS``, ``VmHWM`` of
    ``/proc/<pid>/status``); None when unreadable."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
    except (OSError, KeyError, ValueError):
        return None
