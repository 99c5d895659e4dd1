"""Every route reaches the SQLite store off the event loop: a query may read a body of
50 MiB, or wait for the store's lock while a worker thread saves one, and the loop (every
stream the dashboard forwards) must not wait with it."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import traceback
from typing import Any

import pytest
from fastapi.testclient import TestClient

from toollatch.web.store import Store

from .test_web_captures_listing import CAPTURE, client  # noqa: F401  (the fixture: an app with one capture in its folder)

BLOCKING = ("get", "list", "search", "delete", "save", "set_summary")


@pytest.fixture
def on_loop(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Where a store method ran while an event loop ran in the same thread."""
    found: list[str] = []

    def watch(name: str) -> None:
        real = getattr(Store, name)

        def watched(self: Store, *args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                found.append(f"Store.{name}\n" + "".join(traceback.format_stack(limit=6)))
            return real(self, *args, **kwargs)

        monkeypatch.setattr(Store, name, watched)

    for name in BLOCKING:
        watch(name)
    return found


def recorded(client: TestClient, sid: str) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        rid = (client.get(f"/api/sessions/{sid}").json().get("live") or {}).get("recording")
        if rid:
            return str(rid)
        time.sleep(0.05)
    raise AssertionError(f"session {sid} saved no recording")


def test_every_route_reaches_the_store_off_the_event_loop(client: TestClient, on_loop: list[str]) -> None:
    upload = client.post("/sessions/upload", files={"file": (CAPTURE.name, CAPTURE.read_bytes())}, data={"rate": "max"}, follow_redirects=False)
    assert upload.status_code == 303
    stored = client.get("/api/stored").json()["sources"]
    assert [s["name"] for s in stored] == [CAPTURE.name]
    sid = stored[0]["id"]
    assert CAPTURE.name in client.get("/", headers={"accept": "text/html"}).text
    assert client.get("/?tool=get_weather#stored", headers={"accept": "text/html"}).status_code == 200
    assert client.get(f"/api/stored/{sid}").json()["id"] == sid
    session = client.get(f"/sources/{sid}", follow_redirects=False)
    assert session.status_code == 303
    session_id = session.headers["location"].rsplit("/", 1)[1]
    assert client.get(f"/api/sessions/{session_id}").status_code == 200
    assert client.get(f"/sessions/{session_id}", headers={"accept": "text/html"}).status_code == 200
    assert client.get(f"/compare?a={sid}&b={session_id}", headers={"accept": "text/html"}).status_code == 200
    proxied = client.post("/proxy/openai/v1/chat/completions", json={"model": CAPTURE.name, "stream": True, "messages": []})
    assert proxied.status_code == 200
    live = [s["id"] for s in client.get("/api/live").json()["sessions"]]
    rid = recorded(client, live[0])
    assert client.get(f"/sessions/{live[0]}/recording").status_code == 200
    assert client.post(f"/recordings/{rid}/replay", headers={"accept": "application/json"}).status_code == 201
    assert client.delete(f"/api/stored/{rid}").status_code == 200
    assert client.post(f"/sources/{sid}/delete", follow_redirects=False).status_code == 303
    assert client.get("/api/stored").json()["sources"] == []
    assert on_loop == [], "\n\n".join(on_loop)


def test_the_loop_answers_while_a_save_holds_the_store(client: TestClient) -> None:
    """A save holding the store's lock (a body of 50 MiB being written) delays only the
    requests that need the store, in their worker threads: the index page waits, a request
    that does not need the store is answered meanwhile."""
    store: Store = client.app.state.sources  # type: ignore[attr-defined]
    answered: dict[str, float] = {}

    def request(name: str, url: str) -> None:
        client.get(url, headers={"accept": "text/html"})
        answered[name] = time.monotonic()

    index = threading.Thread(target=request, args=("index", "/"), daemon=True)
    live = threading.Thread(target=request, args=("live", "/api/live"), daemon=True)
    with store._lock:  # noqa: SLF001 - the lock a save holds for its whole write
        index.start()
        time.sleep(0.3)  # the index request is now waiting for the store
        live.start()
        live.join(5)  # the loop answers (or, held by the store, does not: the lock is let go below either way)
        held_while = dict(answered)
    index.join(10)
    live.join(10)
    assert "live" in held_while and "index" not in held_while  # the index waited, in its thread
    assert answered["index"] >= answered["live"]


def test_requests_waiting_for_the_store_leave_the_loops_threads_to_other_work(client: TestClient) -> None:
    """More requests wait for a held store than the loop's default pool has threads: they
    wait in the store's own threads, and work that needs a thread but not the store (the
    captures folder listed for /api/sources) is done meanwhile."""
    store: Store = client.app.state.sources  # type: ignore[attr-defined]
    waiting = min(32, (os.cpu_count() or 1) + 4) + 2  # the default pool's size (ThreadPoolExecutor), and more
    answered: list[str] = []

    def request(url: str) -> None:
        client.get(url, headers={"accept": "text/html"})
        answered.append(url)

    threads = [threading.Thread(target=request, args=("/api/stored",), daemon=True) for _ in range(waiting)]
    other = threading.Thread(target=request, args=("/api/sources",), daemon=True)
    with store._lock:  # noqa: SLF001 - a save holding the store
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # every one of them is waiting for the store now
        other.start()
        other.join(5)
        held_while = list(answered)
    for thread in [other, *threads]:
        thread.join(10)
    assert held_while == ["/api/sources"]
    assert len(answered) == waiting + 1
