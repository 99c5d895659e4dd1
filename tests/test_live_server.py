"""A real uvicorn server on a free loopback port, in a thread, for tests with real clients.

Used by ``test_proxy*.py`` and ``test_live*.py``: the official SDKs talk HTTP to it exactly
as an agent would. Helpers here wait on the app's own state (sessions, recordings), never
on fixed sleeps alone.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from toollatch.web.server import SERVER_OPTIONS


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run ``app`` on ``127.0.0.1:<free port>``; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **SERVER_OPTIONS))
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.005)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def wait_for(check: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy; return it."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def sessions(base: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{base}/api/sessions").json())


def session_doc(base: str, sid: str) -> dict[str, Any]:
    return dict(httpx.get(f"{base}/api/sessions/{sid}").json())


def finished(base: str, sid: str) -> dict[str, Any]:
    """The session document once the session is done, its end applied and its recording saved."""

    def done() -> dict[str, Any] | None:
        doc = session_doc(base, sid)
        ended = doc["status"] in ("finished", "cancelled", "error") and doc["live"]["end"]
        saved = doc["live"]["recording"] or not doc["live"]["size"]  # the recording is written just after the end
        return doc if ended and saved else None

    return dict(wait_for(done, what=f"session {sid} to end"))


def live_count(base: str) -> int:
    """How many live sessions there are now."""
    return len([s for s in sessions(base) if s["source"]["kind"] == "live"])


def newest_live(base: str, before: int = 0) -> str:
    """Id of the newest live session once there are more than ``before`` live sessions."""
    got = wait_for(lambda: [s for s in sessions(base) if s["source"]["kind"] == "live"][before:], what="a live session")
    return str(got[-1]["id"])


def tee_transport(module: Any = httpx) -> Any:
    """An ``HTTPTransport`` of ``module`` (``httpx``, or ``httpx2`` for the anthropic SDK)
    that keeps a copy of every response body byte the client read, in ``.received``."""

    class TeeTransport(module.HTTPTransport):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.received: list[bytes] = []

        def handle_request(self, request: Any) -> Any:
            response = super().handle_request(request)
            stream, sink = response.stream, self.received

            class _Tee(module.SyncByteStream):  # type: ignore[misc, name-defined]
                def __iter__(self) -> Iterator[bytes]:
                    for chunk in stream:
                        sink.append(chunk)
                        yield chunk

                def close(self) -> None:
                    stream.close()

            response.stream = _Tee()
            return response

        @property
        def body(self) -> bytes:
            return b"".join(self.received)

    return TeeTransport()


def test_serve_runs_an_app_on_a_loopback_port_and_stops() -> None:
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/ping")
    async def ping() -> dict[str, bool]:
        return {"pong": True}

    with serve(app) as base:
        assert base.startswith("http://127.0.0.1:")
        assert httpx.get(base + "/ping").json() == {"pong": True}
    try:
        httpx.get(base + "/ping", timeout=1)
    except httpx.ConnectError:
        pass
    else:
        raise AssertionError("the server still answers after the context ended")
