"""Hardening of the dashboard against other web pages and clients that go away.

* every dashboard response forbids framing (``Content-Security-Policy: frame-ancestors
  'none'``, ``X-Frame-Options: DENY``): *Delete*, *Stop* and *Reveal* cannot be clicked
  through an invisible frame;
* a state-changing request or a WebSocket handshake the browser marks as made by another
  site or origin (``Sec-Fetch-Site: cross-site`` / ``same-site``) is refused even without
  an ``Origin`` header;
* a client that disconnects while its request body is read is one log line and no traceback.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient, WebSocketDisconnect

from toollatch.demo.demos import DEMOS
from toollatch.web import Settings, create_app

from .test_web_app import BASE, WS_BASE, make_client
from .test_web_library import stored, upload


def framing_headers(response: Any) -> tuple[str | None, str | None]:
    return response.headers.get("content-security-policy"), response.headers.get("x-frame-options")


def test_every_dashboard_response_forbids_framing(tmp_path: Path) -> None:
    with make_client(Settings(data_dir=tmp_path, mock_delay=0.0)) as client:
        sid = upload(client, "a.sse", DEMOS["openai-single"].wire)
        responses = {
            "index": client.get("/"),
            "session": client.get(f"/sessions/{sid}"),
            "triage": client.get(f"/sessions/{sid}/triage"),
            "export": client.get(f"/sessions/{sid}/export.md"),
            "twin": client.get(f"/api/sessions/{sid}"),
            "static": client.get("/static/app.css"),
            "metrics": client.get("/metrics"),
            "missing page": client.get("/no/such/page", headers={"accept": "text/html"}),
            "refused origin": client.post(f"/sessions/{sid}/control", data={"action": "stop"}, headers={"origin": "http://evil.example"}),
            "unknown host": client.get("/", headers={"host": "evil.example"}),
            "redirect": client.post("/sessions", data={"kind": "demo", "name": "canary"}, follow_redirects=False),
            "mock": client.post("/mock/v1/chat/completions", json={"model": "single", "stream": True, "messages": []}),
        }
    missing = {name: framing_headers(r) for name, r in responses.items() if framing_headers(r) != ("frame-ancestors 'none'", "DENY")}
    assert missing == {}


def test_a_proxied_answer_keeps_exactly_the_upstreams_headers(tmp_path: Path) -> None:
    """The proxy is transparent (:mod:`toollatch.web.server`): its answers are the upstream's, and an
    API answer is no page to frame, so the dashboard adds neither header to them."""
    import httpx

    from .test_live_server import serve
    from .test_live_upstream_faults import tool_stream, upstream_app

    with serve(upstream_app(lambda key: tool_stream('{"q": "x"}'))) as url:
        with serve(create_app(Settings(data_dir=tmp_path, mock_delay=0.0, upstreams={"plain": url}))) as base:
            response = httpx.post(f"{base}/proxy/plain/v1/chat/completions", json={"model": "m", "stream": True, "messages": []}, timeout=10)
            page = httpx.get(f"{base}/", timeout=10)
    assert response.status_code == 200 and framing_headers(response) == (None, None)
    assert framing_headers(page) == ("frame-ancestors 'none'", "DENY")


@pytest.mark.parametrize("site", ["cross-site", "same-site", "Cross-Site"])
def test_a_foreign_state_changing_request_without_origin_is_refused(tmp_path: Path, site: str) -> None:
    with make_client(Settings(data_dir=tmp_path)) as client:
        upload(client, "a.sse", DEMOS["openai-single"].wire)
        [entry] = stored(client)
        foreign = {"sec-fetch-site": site}
        answers = [
            client.post(f"/sources/{entry['id']}/delete", headers=foreign, follow_redirects=False),
            client.delete(f"/api/stored/{entry['id']}", headers=foreign),
            client.post("/sessions", data={"kind": "demo", "name": "canary"}, headers=foreign, follow_redirects=False),
        ]
        assert [a.status_code for a in answers] == [403, 403, 403]
        assert len(stored(client)) == 1, "nothing was deleted"
        sessions = client.get("/api/sessions").json()
        sid = client.post("/api/sessions", json={"demo": "canary", "autoplay": False}).json()["id"]
        with pytest.raises(WebSocketDisconnect) as refused:
            with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}", headers=foreign):
                pass
        assert refused.value.code == 1008
    assert all(s["source"].get("name") != "canary" for s in sessions)


@pytest.mark.parametrize("site", ["same-origin", "none"])
def test_the_dashboards_own_requests_still_pass(tmp_path: Path, site: str) -> None:
    with make_client(Settings(data_dir=tmp_path)) as client:
        upload(client, "a.sse", DEMOS["openai-single"].wire)
        [entry] = stored(client)
        response = client.post(f"/sources/{entry['id']}/delete", headers={"sec-fetch-site": site, "origin": BASE}, follow_redirects=False)
        assert response.status_code == 303
        assert stored(client) == []


# ------------------------------------------------------------------ a client that goes away


def _scope(path: str, content_type: bytes = b"application/json") -> dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8765"), (b"content-type", content_type), (b"content-length", b"1000")],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8765),
    }


@pytest.mark.parametrize("path", ["/proxy/openai/v1/chat/completions", "/mock/v1/chat/completions", "/api/sessions"])
def test_a_client_that_disconnects_mid_body_is_one_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture, path: str) -> None:
    app = create_app(Settings(data_dir=tmp_path, mock_delay=0.0))
    messages = [{"type": "http.request", "body": b'{"model": "sin', "more_body": True}, {"type": "http.disconnect"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with caplog.at_level(logging.DEBUG):
        asyncio.run(app(_scope(path), receive, send))  # raised ClientDisconnect before
    starts = [m["status"] for m in sent if m["type"] == "http.response.start"]
    assert starts == [499]
    records = [r for r in caplog.records if "disconnected" in r.getMessage()]
    assert len(records) == 1 and records[0].levelno == logging.INFO and records[0].exc_info is None
    assert not any(r.exc_info for r in caplog.records), "no traceback logged"
    with TestClient(app, base_url=BASE) as client:
        assert client.get("/api/live").json()["sessions"] == [], "no live session for a request never read"
