"""Shared by the real-browser tests: serve an app with uvicorn on a loopback port in a thread."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from toollatch.web.server import SERVER_OPTIONS

from .conftest import ROOT

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
SHOTS = ROOT / "test-artifacts" / "screenshots"


def require_chromium() -> None:
    """Skip without Debian's Chromium; with ``CI`` set that is a failure, not a skip."""
    if not CHROMIUM.exists():
        message = f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI is set, so this is a failure, not a skip")
        pytest.skip(message)


def shot(page: Any, name: str) -> None:
    """Save a full-page screenshot as ``test-artifacts/screenshots/<name>.png``."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
    page.screenshot(path=str(SHOTS / f"{safe}.png"), full_page=True)


@contextmanager
def launched() -> Iterator[Any]:
    """Chromium through Playwright (never ``playwright install``), closed at the end."""
    from playwright import sync_api

    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@contextmanager
def checked_page(browser: Any, name: str) -> Iterator[Any]:
    """A light-theme 1280x900 page; at the end a screenshot named ``name`` and no page errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light")
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    shot(page, name)
    context.close()
    assert errors == []


@contextmanager
def served(app: Any, port: int) -> Iterator[str]:
    """Run ``app`` on ``127.0.0.1:port`` until the block ends; yields the base URL."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **SERVER_OPTIONS))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            pytest.fail("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def dashboard(data_dir: Path, **settings: Any) -> Iterator[str]:
    """``toollatch serve`` at 30 events/s on a free loopback port with its data in
    ``data_dir`` (``settings`` override); yields the base URL. Skips without Chromium."""
    import socket

    from toollatch.web import Settings, create_app

    require_chromium()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    app = create_app(Settings(**{"port": port, "replay_rate": 30, "data_dir": data_dir, **settings}))
    with served(app, port) as url:
        yield url
