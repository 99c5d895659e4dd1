"""Dashboard pages, uploads, captures, JSON twins and the local-only guards.

Helpers at the top (``make_client``, ``VirtualTime``, ``BASE``) are shared with
``test_web_live.py`` and ``test_web_fanout.py``.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Iterator
from pathlib import Path

import pytest

from starlette.websockets import WebSocketDisconnect

from toollatch.core.config import AssembleConfig
from toollatch.demo.demos import DEMOS
from toollatch.web import Settings, create_app
from toollatch.web.app import resource_dir
from toollatch.web.pages.render import bar_percent, human_bytes

from starlette.testclient import TestClient

BASE = "http://127.0.0.1:8765"
WS_BASE = "ws://127.0.0.1:8765"


class VirtualTime:
    """A clock and a ``sleep`` for the app under test: time passes only in ``sleep``.

    Sleepers wake in deadline order; the clock jumps straight to the next deadline once
    the tasks that are ready have had a few turns, so a replay that would take minutes
    runs in milliseconds yet sees the same sequence of clock readings as in real time
    (a 50 ms render interval really is 50 ms of this clock).
    """

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = 0
        self._driver: asyncio.Task[None] | None = None

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._seq += 1
        heapq.heappush(self._sleepers, (self.now + seconds, self._seq, future))
        if self._driver is None or self._driver.done():
            self._driver = loop.create_task(self._drive())
        await future

    async def _drive(self) -> None:
        while self._sleepers:
            for _ in range(8):  # let every task that is ready run before time moves on
                await asyncio.sleep(0)
            deadline, _, future = heapq.heappop(self._sleepers)
            self.now = max(self.now, deadline)
            if not future.done():
                future.set_result(None)


def make_client(settings: Settings | None = None, time: VirtualTime | None = None) -> TestClient:
    """A client for a fresh app on virtual time (replays never wait); use as a context manager."""
    time = time or VirtualTime()
    return TestClient(create_app(settings or Settings(), sleep=time.sleep, clock=time.clock), base_url=BASE)


@pytest.fixture
def captures(tmp_path: Path) -> Path:
    root = tmp_path / "caps"
    (root / "openai").mkdir(parents=True)
    (root / "openai" / "single.sse").write_bytes(DEMOS["openai-single"].wire)
    (root / "openai" / "single.tools.json").write_text('[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]')
    (root / "anthropic.sse").write_bytes(DEMOS["anthropic-parallel"].wire)
    (root / "notes.txt").write_text("not a capture")
    return root


@pytest.fixture
def client(captures: Path) -> Iterator[TestClient]:
    with make_client(Settings(captures_dir=captures, max_upload_bytes=64 * 1024)) as c:
        yield c


def upload(client: TestClient, name: str, data: bytes, tools: bytes | None = None):  # type: ignore[no-untyped-def]
    files = {"file": (name, data, "application/octet-stream")}
    if tools is not None:
        files["tools"] = ("tools.json", tools, "application/json")
    return client.post("/sessions/upload", files=files, data={"rate": "12"}, follow_redirects=False)


# ------------------------------------------------------------------ pages


def test_index_lists_demos_captures_and_upload_form(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    html = page.text
    for name in DEMOS:
        assert f'value="{name}"' in html
    assert "openai/single.sse" in html and "anthropic.sse" in html
    assert "notes.txt" not in html
    assert 'enctype="multipart/form-data"' in html
    assert "20 MiB" not in html and "64 KiB" in html  # the configured limit is shown


def test_index_without_captures_dir_says_how_to_configure() -> None:
    with make_client() as c:
        assert "--captures" in c.get("/").text


def test_sources_json_twin(client: TestClient) -> None:
    doc = client.get("/api/sources").json()
    assert {d["name"] for d in doc["demos"]} == set(DEMOS)
    assert [c["path"] for c in doc["captures"]] == ["anthropic.sse", "openai/single.sse"]
    assert doc["captures"][1]["tools"] is True


def test_start_demo_redirects_to_its_session_page(client: TestClient) -> None:
    response = client.post("/sessions", data={"kind": "demo", "name": "openai-single"}, follow_redirects=False)
    assert response.status_code == 303
    url = response.headers["location"]
    page = client.get(url)
    assert page.status_code == 200
    sid = url.rsplit("/", 1)[1]
    assert f'hx-ws:connect="/ws/sessions/{sid}"' in page.text
    assert 'id="calls"' in page.text and 'id="status"' in page.text and 'id="controls"' in page.text
    assert 'aria-live="polite"' in page.text
    assert "/static/vendor/htmx.min.js" in page.text and "/static/vendor/hx-ws.min.js" in page.text


def test_unknown_demo_and_session_give_404_pages(client: TestClient) -> None:
    response = client.post("/sessions", data={"kind": "demo", "name": "nope"})
    assert response.status_code == 404 and "no demo called" in response.text
    assert client.get("/sessions/deadbeef").status_code == 404
    assert client.get("/api/sessions/deadbeef").status_code == 404
    with pytest.raises(WebSocketDisconnect):
        with client.websocket_connect(f"{WS_BASE}/ws/sessions/deadbeef"):
            pass


def test_capture_session_uses_the_tools_file_beside_it(client: TestClient) -> None:
    response = client.post("/sessions", data={"kind": "capture", "name": "openai/single.sse"}, follow_redirects=False)
    assert response.status_code == 303
    doc = client.get("/api" + response.headers["location"]).json()
    assert doc["source"]["kind"] == "capture" and doc["source"]["tools"] == ["get_weather"]


@pytest.mark.parametrize("name", ["../etc/passwd", "/etc/passwd", "notes.txt", "openai/../anthropic.sse"])
def test_capture_outside_the_listing_is_refused(client: TestClient, name: str) -> None:
    response = client.post("/sessions", data={"kind": "capture", "name": name})
    assert response.status_code == 404
    assert "no capture" in response.text


# ------------------------------------------------------------------ uploads


def test_upload_of_a_good_capture_starts_a_session(client: TestClient) -> None:
    response = upload(client, "mine.sse", DEMOS["anthropic-single"].wire)
    assert response.status_code == 303
    doc = client.get("/api" + response.headers["location"]).json()
    assert doc["source"] == {**doc["source"], "kind": "upload", "name": "mine.sse", "dialect": "anthropic"}


def test_upload_of_garbage_names_file_line_and_byte(client: TestClient) -> None:
    response = upload(client, "broken.sse", b"data: {\"choices\": [\n\n")
    assert response.status_code == 422
    assert "broken.sse:1 (byte 0)" in response.text
    assert 'role="alert"' in response.text and "Traceback" not in response.text


def test_upload_of_unknown_json_lines_says_no_provider_stream(client: TestClient) -> None:
    response = upload(client, "other.jsonl", b'{"hello": 1}\n{"world": 2}\n')
    assert response.status_code == 422
    assert "other.jsonl" in response.text and "no known provider stream" in response.text


def test_upload_of_binary_junk_is_a_clear_4xx(client: TestClient) -> None:
    response = upload(client, "image.png", bytes(range(256)) * 8)
    assert 400 <= response.status_code < 500
    assert "image.png" in response.text


def test_upload_of_empty_file_is_400(client: TestClient) -> None:
    response = upload(client, "empty.sse", b"\n\n")
    assert response.status_code == 400 and "empty.sse is empty" in response.text


def test_upload_over_the_limit_is_413(client: TestClient) -> None:
    response = upload(client, "big.sse", b"data: {}\n\n" * 10_000)
    assert response.status_code == 413 and "big.sse" in response.text


def test_upload_with_bad_tools_file_is_422(client: TestClient) -> None:
    response = upload(client, "ok.sse", DEMOS["openai-single"].wire, tools=b"[{]")
    assert response.status_code == 422 and "tools.json is not JSON" in response.text


def test_upload_without_file_is_400(client: TestClient) -> None:
    response = client.post("/sessions/upload", data={"rate": "12"}, files={"tools": ("t.json", b"[]", "application/json")})
    assert response.status_code == 400


# ------------------------------------------------------------------ controls and JSON twin


def test_step_and_json_twin_without_javascript(client: TestClient) -> None:
    sid = client.post("/api/sessions", json={"demo": "openai-single", "autoplay": False}).json()["id"]
    doc = client.get(f"/api/sessions/{sid}").json()
    assert doc["status"] == "ready" and doc["position"] == 0 and doc["calls"] == []
    response = client.post(f"/sessions/{sid}/control", data={"action": "step"}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == f"/sessions/{sid}"
    for _ in range(DEMOS["openai-single"].events):
        assert client.post(f"/sessions/{sid}/control", data={"action": "step"}, headers={"HX-Request": "true"}).status_code == 204
    doc = client.get(f"/api/sessions/{sid}").json()
    assert doc["status"] == "finished" and doc["position"] == doc["total"]
    assert doc["streams"][0]["calls"][0]["arguments"] == {"city": "•••", "unit": "•••"}  # a demo masks values
    client.post(f"/sessions/{sid}/mask", data={"mask": "off"})
    doc = client.get(f"/api/sessions/{sid}").json()
    assert doc["streams"][0]["calls"][0]["arguments"] == {"city": "Oslo", "unit": "celsius"}
    assert [t["state"] for t in doc["calls"][0]["transitions"]] == ["open", "args_complete", "committed"]
    # Virtual time: one event every 1/rate seconds.
    assert doc["calls"][0]["transitions"][-1]["t"] == pytest.approx((doc["total"] - 2) / doc["rate"], abs=0.2)


def test_unknown_control_is_400(client: TestClient) -> None:
    sid = client.post("/api/sessions", json={"demo": "openai-single", "autoplay": False}).json()["id"]
    assert client.post(f"/sessions/{sid}/control", data={"action": "explode"}).status_code == 400


def test_rate_control_changes_the_rate(client: TestClient) -> None:
    sid = client.post("/api/sessions", json={"demo": "openai-single", "autoplay": False}).json()["id"]
    client.post(f"/sessions/{sid}/control", data={"action": "rate", "rate": "30"})
    assert client.get(f"/api/sessions/{sid}").json()["rate"] == 30.0
    client.post(f"/sessions/{sid}/control", data={"action": "rate", "rate": "nan"})
    assert client.get(f"/api/sessions/{sid}").json()["rate"] == 30.0


def test_api_create_validates_input(client: TestClient) -> None:
    assert client.post("/api/sessions", json={"demo": "nope"}).status_code == 404
    assert client.post("/api/sessions", json={"rate": 3}).status_code == 400
    assert client.post("/api/sessions", json={"demo": "canary", "rate": -1}).status_code == 400
    assert client.post("/api/sessions", content=b"not json", headers={"content-type": "application/json"}).status_code == 400


# ------------------------------------------------------------------ local-only guards


def test_unknown_host_is_refused(client: TestClient) -> None:
    assert client.get("/", headers={"host": "attacker.example"}).status_code == 400
    assert client.get("/", headers={"host": "localhost:8765"}).status_code == 200


def test_cross_origin_post_is_refused(client: TestClient) -> None:
    response = client.post("/sessions", data={"kind": "demo", "name": "canary"}, headers={"origin": "http://attacker.example"})
    assert response.status_code == 403
    response = client.post("/sessions", data={"kind": "demo", "name": "canary"}, headers={"origin": BASE}, follow_redirects=False)
    assert response.status_code == 303


def test_cross_origin_websocket_is_refused(client: TestClient) -> None:
    sid = client.post("/api/sessions", json={"demo": "canary", "autoplay": False}).json()["id"]
    for origin in ("http://attacker.example", "null", "http://127.0.0.1:9999"):
        with pytest.raises(WebSocketDisconnect) as refused:
            with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}", headers={"origin": origin}):
                pass
        assert refused.value.code == 1008
    with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}", headers={"origin": BASE}) as ws:
        assert 'id="status"' in ws.receive_text()


def test_default_settings_bind_loopback() -> None:
    settings = Settings()
    assert settings.host == "127.0.0.1"
    assert {"localhost", "127.0.0.1"} <= set(settings.trusted_hosts())
    assert settings.config == AssembleConfig()


# ------------------------------------------------------------------ rendering helpers


def test_resources_are_found_from_the_package() -> None:
    assert (resource_dir("templates") / "partials" / "_card.html").is_file()
    assert (resource_dir("static") / "vendor" / "htmx.min.js").is_file()


def test_static_files_are_served(client: TestClient) -> None:
    css = client.get("/static/app.css")
    assert css.status_code == 200 and ".badge-committed" in css.text
    assert client.get("/static/vendor/hx-ws.min.js").status_code == 200


def test_bar_scale_and_byte_labels() -> None:
    assert bar_percent(0, 262144) == 0.0
    assert bar_percent(262144, 262144) == 100.0
    assert bar_percent(10**7, 262144) == 100.0
    assert 0 < bar_percent(35, 262144) < bar_percent(4096, 262144) < 100
    assert human_bytes(35) == "35 B" and human_bytes(262144) == "256 KiB" and human_bytes(1536) == "1.5 KiB"


def test_every_setting_is_documented() -> None:
    from dataclasses import fields

    doc = (Path(__file__).resolve().parent.parent / "docs" / "dashboard.md").read_text(encoding="utf-8")
    for setting in fields(Settings):
        assert f"| `{setting.name}` |" in doc, f"docs/dashboard.md does not document Settings.{setting.name}"


def test_session_page_has_the_demo_controls() -> None:
    with make_client() as client:
        sid = client.post("/api/sessions", json={"demo": "openai-parallel", "autoplay": False}).json()["id"]
        html = client.get(f"/sessions/{sid}").text
        doc = client.get(f"/api/sessions/{sid}").json()
    assert '<script src="/static/app.js"></script>' in html
    assert 'id="scrubber"' in html and 'type="range"' in html and 'max="59"' in html
    for action in ("restart", "back", "play", "pause", "step", "cancel"):
        assert f'name="action" value="{action}"' in html
    assert all(f'<option value="{v}"' in html for v in ("0.25", "1", "20", "max"))
    assert 'id="keys"' in html and "<kbd>Space</kbd>" in html
    assert 'data-toggle="theme"' in html and 'data-toggle="present"' in html
    assert 'id="quirks"' in html and "None so far." in html
    assert doc["delivery"] == {"renders": 0, "max_renders_per_second": 20.0, "viewers": []}
    assert doc["quirks"] == [] and doc["speed"] == 1.0


def test_app_js_is_served() -> None:
    with make_client() as client:
        js = client.get("/static/app.js")
    assert js.status_code == 200 and "toggleTheme" in js.text and "ArrowLeft" in js.text


def test_a_served_dashboard_exempts_its_start_up_objects_from_the_cyclic_collector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    import uvicorn

    import toollatch.web.app

    served = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.append((app, options)))
    toollatch.web.app.run(Settings(data_dir=tmp_path))
    (app, options), = served
    assert options["host"] == "127.0.0.1"
    thresholds = gc.get_threshold()
    gc.unfreeze()
    try:
        with TestClient(app, base_url=BASE) as client:  # start-up: a full collection walks none of it again
            assert gc.get_freeze_count() > 10_000
            assert client.get("/api/sources").status_code == 200
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_an_app_made_in_a_process_that_makes_many_freezes_nothing(tmp_path: Path) -> None:
    import gc

    gc.unfreeze()
    with TestClient(create_app(Settings(data_dir=tmp_path)), base_url=BASE) as client:
        assert client.get("/api/sources").status_code == 200
        assert gc.get_freeze_count() == 0


def test_a_served_dashboard_runs_full_collections_between_live_streams(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    import uvicorn

    import toollatch.web.app

    served = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.append(app))
    thresholds = gc.get_threshold()
    toollatch.web.app.run(Settings(data_dir=tmp_path))
    try:
        with TestClient(served[0], base_url=BASE):
            assert gc.get_threshold()[2] == toollatch.web.app.FULL_COLLECTION_AFTER > thresholds[2]
            assert served[0].state.store.on_idle is toollatch.web.app.collect_between_streams
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
    assert create_app(Settings(data_dir=tmp_path)).state.store.on_idle is None


def test_get_sessions_leads_to_the_session_list() -> None:
    with make_client() as client:
        response = client.get("/sessions", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/#sessions"
