"""*Mask values*: a session can hide committed argument values too (on by default for demos)."""

from __future__ import annotations

import json
import re

from toollatch.demo.demos import CANARY_SECRET
from toollatch.web.mask_values import HIDDEN, hide_values

from .test_web_app import WS_BASE, TestClient, make_client

DONE = re.compile(r'class="pill status-(finished|cancelled|error)"')
SECRET = "committed-VALUE-9Jx2Qw7"


def _play(client: TestClient, sid: str) -> list[str]:
    with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
        frames = [ws.receive_text()]
        client.post(f"/sessions/{sid}/control", data={"action": "play"}, headers={"HX-Request": "true"})
        while not DONE.search(frames[-1]):
            frames.append(ws.receive_text())
    return frames


def test_hide_values_keeps_keys_and_shape() -> None:
    assert hide_values({"a": [1, "x", None, True, {"b": 2.5}]}) == {"a": [HIDDEN] * 4 + [{"b": HIDDEN}]}


def test_a_demo_hides_committed_values_until_the_toggle_is_turned_off() -> None:
    with make_client() as client:
        response = client.post("/sessions", data={"kind": "demo", "name": "canary", "rate": "12"}, follow_redirects=False)
        sid = response.headers["location"].rsplit("/", 1)[1]
        client.post(f"/sessions/{sid}/control", data={"action": "pause"})
        frames = _play(client, sid)
        doc = client.get(f"/api/sessions/{sid}").json()
        assert doc["mask_values"] is True and doc["streams"][0]["calls"][0]["state"] == "committed"
        shown = [*frames, client.get(f"/sessions/{sid}").text, json.dumps(doc), client.get(f"/sessions/{sid}/triage").text]
        assert not [s for s in shown if CANARY_SECRET in s]
        assert HIDDEN in client.get(f"/sessions/{sid}").text
        client.post(f"/sessions/{sid}/mask", data={"mask": "off"})
        assert CANARY_SECRET in client.get(f"/sessions/{sid}").text  # committed: shown once a person turns it off
        assert CANARY_SECRET in json.dumps(client.get(f"/api/sessions/{sid}").json())


def test_an_upload_shows_committed_values_until_the_toggle_is_turned_on() -> None:
    args = json.dumps({"token": SECRET, "n": 42})
    chunks = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    raw = ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()
    with make_client() as client:
        response = client.post("/sessions/upload", files={"file": ("c.sse", raw, "text/plain")}, data={"rate": "12"}, follow_redirects=False)
        sid = response.headers["location"].rsplit("/", 1)[1]
        client.post(f"/sessions/{sid}/control", data={"action": "pause"})
        _play(client, sid)
        assert SECRET in client.get(f"/sessions/{sid}").text
        client.post(f"/sessions/{sid}/mask", data={"mask": "on"})
        page, doc = client.get(f"/sessions/{sid}").text, client.get(f"/api/sessions/{sid}").text
        assert SECRET not in page and SECRET not in doc and "token" in page


def test_a_viewer_sees_the_toggle_without_reloading() -> None:
    with make_client() as client:
        response = client.post("/sessions", data={"kind": "demo", "name": "canary", "rate": "12"}, follow_redirects=False)
        sid = response.headers["location"].rsplit("/", 1)[1]
        client.post(f"/sessions/{sid}/control", data={"action": "pause"})
        _play(client, sid)
        with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
            assert CANARY_SECRET not in ws.receive_text()
            client.post(f"/sessions/{sid}/mask", data={"mask": "off"}, headers={"HX-Request": "true"})
            assert CANARY_SECRET in ws.receive_text()
            client.post(f"/sessions/{sid}/mask", data={"mask": "on"}, headers={"HX-Request": "true"})
            assert CANARY_SECRET not in ws.receive_text()
