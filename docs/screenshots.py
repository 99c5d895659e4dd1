"""Regenerate the dashboard screenshots: ``.venv/bin/python docs/screenshots.py [OUT_DIR]``.

Serves the dashboard with uvicorn on a free loopback port, drives Debian's Chromium
(``/usr/bin/chromium``) through Playwright, and writes PNGs to ``OUT_DIR`` (default
``test-artifacts/screenshots``): the index (with the sessions started before it), a session mid-replay
and finished, light and dark themes, presentation mode at 1280x720, a capture with gateway
quirks, and the two images the
README shows (``--docs`` also copies those to ``docs/``).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toollatch.web import Settings, create_app  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
DONE = ".pill.status-finished, .pill.status-cancelled, .pill.status-error"
QUIRKY = "openai-chat/openrouter-claude-parallel.sse"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(settings: Settings) -> Iterator[str]:
    """The app under uvicorn in a daemon thread; yields its base URL."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=settings.port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{settings.port}"
    finally:
        server.should_exit = True
        thread.join(10)


def start(page: Any, base: str, demo: str) -> None:
    page.goto(base + "/")
    page.click(f"button[name=name][value={demo}]")
    page.wait_for_url("**/sessions/*")


def shoot(out: Path, captures: Path | None) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []
    data = tempfile.mkdtemp(prefix="toollatch-shots-")  # an empty store: no stored sources of the user's
    settings = Settings(port=free_port(), replay_rate=12, captures_dir=captures, data_dir=Path(data))
    with serve(settings) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)

        def new_page(scheme: str = "light", width: int = 1400, height: int = 1000) -> Any:
            context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)  # type: ignore[arg-type]
            return context.new_page()

        def save(page: Any, name: str, full: bool = False) -> None:
            path = out / f"{name}.png"
            page.screenshot(path=str(path), full_page=full)
            shots.append(path)


        # Mid-replay: pause once both parallel calls are open and filling.
        page = new_page()
        start(page, base, "openai-parallel")
        page.wait_for_function("document.querySelectorAll('.card[data-state=open]').length === 2 && +document.querySelector('.card:last-child').dataset.bytes > 40")
        page.click("button[value=pause]")
        page.wait_for_selector(".pill.status-paused")
        save(page, "session-mid-replay")

        page = new_page(width=1280, height=720)
        start(page, base, "openai-invalid")
        page.select_option("select[name=speed]", "20")
        page.wait_for_selector(DONE, timeout=30_000)
        page.wait_for_selector("#triage[data-state$=done]")
        save(page, "session")
        save(page, "session-full", full=True)

        page = new_page("dark")
        start(page, base, "openai-invalid")
        page.select_option("select[name=speed]", "20")
        page.wait_for_selector(DONE, timeout=30_000)
        save(page, "session-dark")

        # Presentation mode at a projector's 1280x720: both calls of the turn on screen.
        page = new_page(width=1280, height=720)
        start(page, base, "anthropic-parallel")
        page.keyboard.press("p")
        page.wait_for_function("document.documentElement.classList.contains('present')")
        page.wait_for_selector(DONE, timeout=30_000)
        save(page, "session-presentation")

        if captures is not None and (captures / QUIRKY).is_file():
            page = new_page()
            page.goto(base + "/")
            page.click(f"button[name=name][value='{QUIRKY}']")
            page.wait_for_url("**/sessions/*")
            page.select_option("select[name=speed]", "max")
            page.wait_for_selector(DONE, timeout=30_000)
            save(page, "session-quirks")
        # Last: the session list then shows the sessions above with their verdict chips.
        page = new_page(width=1280, height=720)
        page.goto(base + "/")
        page.wait_for_selector("#sessions .chip")
        save(page, "index")
        save(page, "index-full", full=True)
        browser.close()
    return shots


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default=str(ROOT / "test-artifacts" / "screenshots"))
    parser.add_argument("--captures", default=str(ROOT.parent / "shared" / "captures"))
    parser.add_argument("--docs", action="store_true", help="also refresh docs/screenshot-index.png, docs/screenshot-session.png and docs/screenshot-presentation.png")
    args = parser.parse_args()
    captures = Path(args.captures) if Path(args.captures).is_dir() else None
    shots = shoot(Path(args.out), captures)
    for path in shots:
        print(path)
    if args.docs:
        shutil.copyfile(Path(args.out) / "index.png", ROOT / "docs" / "screenshot-index.png")
        shutil.copyfile(Path(args.out) / "session.png", ROOT / "docs" / "screenshot-session.png")
        shutil.copyfile(Path(args.out) / "session-presentation.png", ROOT / "docs" / "screenshot-presentation.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
