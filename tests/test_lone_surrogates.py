"""A lone UTF-16 surrogate in a provider's identity fields and other strings.

JSON may spell one (``"\\ud800x"``, RFC 8259 section 8.2) and ``json.loads`` keeps it, but
such a string cannot be encoded as UTF-8: before, an upload holding one answered 500 yet
stored the row, and every page of that session then failed. The ops escape it when they
are built (``\\ud800``, six ASCII characters); a call whose ``call_id`` or ``name`` had to be
escaped fails ``missing_id_or_name`` (it must not run under an id or name the provider did
not send), in every dialect. Argument text is left to the latch (a pair may be split over
two fragments).
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from toollatch.core.model import CallState
from toollatch.web import Settings, create_app
from toollatch.web.store import Store

from . import test_eventstream as eventstream
from . import test_fixture_classes as classes
from . import test_fixture_classes_more as more
from .test_web_app import BASE, make_client

BAD_ID, BAD_NAME = "call_\ud800x", "get_\udc00weather"


@pytest.fixture
def escaped_wires(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture wire builders write ``\\udXXX`` escapes (a raw surrogate cannot be encoded)."""
    shim = types.SimpleNamespace(dumps=lambda *a, **k: json.dumps(*a, **{**k, "ensure_ascii": True}), loads=json.loads)
    monkeypatch.setattr(classes, "json", shim)
    monkeypatch.setattr(more, "json", shim)
    monkeypatch.setattr(eventstream, "json", shim)


WIRES: list[Any] = ["openai-chat", "anthropic", *more.WIRES]
IDS = ["openai-chat", "anthropic", *more.IDS]


def wire_bytes(wire: Any, call_id: str, name: str) -> bytes:
    calls = [(call_id, name, ['{"city": ', '"Paris"}'])]
    if isinstance(wire, str):
        return classes.wire(wire, calls)
    return wire.bytes(calls)


def test_escape_surrogates_keeps_valid_text() -> None:
    from toollatch.core.model import escape_surrogates

    assert escape_surrogates("plain") == "plain"
    assert escape_surrogates("Zürich 😀") == "Zürich 😀"
    assert escape_surrogates("a\ud800b\udfff") == "a\\ud800b\\udfff"


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
def test_a_lone_surrogate_in_a_call_id_or_name_fails_the_call_in_every_dialect(wire: Any, escaped_wires: None) -> None:
    data = wire_bytes(wire, BAD_ID, BAD_NAME)
    (stream,) = classes.assemble_bytes(data)
    (call,) = stream.calls
    assert call.state is CallState.FAILED and call.reason is not None
    assert call.reason.startswith("missing_id_or_name: ") and "not valid Unicode" in call.reason
    assert call.name == "get_\\udc00weather"
    synthesized = not isinstance(wire, str) and wire.synthesized_ids
    assert call.call_id == ("gemini_call_0" if synthesized else "call_\\ud800x")
    (result,) = stream.results
    assert result.is_error and result.tool_call_id == call.call_id
    json.dumps(stream.to_json(), ensure_ascii=False).encode("utf-8")  # everything is valid Unicode


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
def test_a_valid_id_and_name_still_commit(wire: Any, escaped_wires: None) -> None:
    (stream,) = classes.assemble_bytes(wire_bytes(wire, "call_é", "get_weather"))
    (call,) = stream.calls
    assert call.state is CallState.COMMITTED, call.reason


def test_provider_reasons_with_a_lone_surrogate_are_escaped() -> None:
    open_call = b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"n","arguments":"{"}}]}}]}\n\n'
    error = b'data: {"error":{"message":"m","type":"server\\ud800_error"}}\n\n'
    (stream,) = classes.assemble_bytes(open_call + error)
    (call,) = stream.calls
    # a type that is not code-like is provider free text: named as such, never shown
    assert stream.end == "error" and stream.end_detail == "(hidden code, 13 characters)"
    assert call.reason == "stream_error: (hidden code, 13 characters)"
    json.dumps(stream.to_json(), ensure_ascii=False).encode("utf-8")


# ------------------------------------------------------------------ the dashboard

SURROGATE_SSE = (
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c\\ud800x","type":"function",'
    b'"function":{"name":"n\\udc00y","arguments":"{}"}}]}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
    b"data: [DONE]\n\n"
)

TOOLS_WITH_A_SURROGATE = b'[{"type": "function", "function": {"name": "t\\udfff", "parameters": {"type": "object"}}}]'


def test_an_upload_with_a_lone_surrogate_in_an_id_and_name_is_shown_everywhere(tmp_path: Path) -> None:
    with make_client(Settings(data_dir=tmp_path)) as client:
        quiet = TestClient(client.app, base_url=BASE, raise_server_exceptions=False)
        files = {"file": ("s.sse", SURROGATE_SSE, "text/plain"), "tools": ("t.json", TOOLS_WITH_A_SURROGATE, "application/json")}
        response = quiet.post("/sessions/upload", files=files, data={"rate": "max"}, follow_redirects=False)
        assert response.status_code == 303
        sid = response.headers["location"].rsplit("/", 1)[1]
        quiet.post(f"/sessions/{sid}/control", data={"action": "seek", "position": "3"})
        statuses = {p: quiet.get(f"/sessions/{sid}{p}").status_code for p in ("", "/triage", "/export.sse", "/export.report.json", "/export.md")}
        statuses["index"] = quiet.get("/").status_code
        twin = quiet.get(f"/api/sessions/{sid}")
        found = quiet.get("/api/stored", params={"verdict": "missing_id_or_name"}).json()
    assert statuses == {"": 200, "/triage": 200, "/export.sse": 200, "/export.report.json": 200, "/export.md": 200, "index": 200}
    assert twin.status_code == 200
    (call,) = twin.json()["calls"]
    assert (call["call_id"], call["name"], call["state"]) == ("c\\ud800x", "n\\udc00y", "failed")
    assert found["total"] == 1, "the stored row carries its summary: search finds it"


def test_an_upload_is_stored_with_its_summary_in_one_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure after the row is written (here: any later summary update) leaves no row
    without a summary: the row and its summary are one transaction."""

    def broken(self: Store, source_id: str, summary: dict[str, Any]) -> None:
        raise RuntimeError("killed between the row and its summary")

    monkeypatch.setattr(Store, "set_summary", broken)
    data = SURROGATE_SSE.replace(b"\\ud800", b"").replace(b"\\udc00", b"")
    with make_client(Settings(data_dir=tmp_path)) as client:
        quiet = TestClient(client.app, base_url=BASE, raise_server_exceptions=False)
        response = quiet.post("/sessions/upload", files={"file": ("s.sse", data, "text/plain")}, data={"rate": "max"}, follow_redirects=False)
    assert response.status_code == 303
    (stored,) = Store(tmp_path).list()
    assert stored.summary is not None and stored.summary.get("verdicts")


def test_a_row_whose_summary_cannot_be_stored_is_not_stored(tmp_path: Path) -> None:
    store = Store(tmp_path)
    with pytest.raises(UnicodeEncodeError):
        store.save(kind="upload", name="x.sse", body=b"data: x\n\n", summary={"tools": ["\ud800"], "verdicts": ["committed"]})
    assert store.list() == []


# ------------------------------------------------------------------ the proxy


def test_a_proxied_stream_and_request_with_lone_surrogates_are_recorded(tmp_path: Path) -> None:
    from .test_live_server import finished, newest_live, serve
    from .test_live_upstream_faults import chunk, upstream_app

    def body(key: str) -> list[bytes]:
        start = {"role": "assistant", "tool_calls": [{"index": 0, "id": BAD_ID, "type": "function", "function": {"name": BAD_NAME, "arguments": "{}"}}]}
        return [chunk(start), chunk({}, "tool_calls"), b"data: [DONE]\n\n"]

    request = {
        "model": "m\ud800",
        "stream": True,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"type": "function", "function": {"name": "t\udfff", "parameters": {"type": "object"}}}],
    }
    with serve(upstream_app(body)) as url, serve(create_app(Settings(data_dir=tmp_path, mock_delay=0.0, upstreams={"odd": url}))) as base:
        with httpx.Client(timeout=10) as client:
            got = client.post(f"{base}/proxy/odd/v1/chat/completions", content=json.dumps(request).encode(), headers={"content-type": "application/json"})
            doc = finished(base, newest_live(base))
            statuses = {p: client.get(f"{base}/sessions/{doc['id']}{p}").status_code for p in ("", "/triage", "/recording", "/export.md")}
            statuses["index"] = client.get(f"{base}/").status_code
            stored = client.get(f"{base}/api/stored", params={"verdict": "missing_id_or_name"}).json()
    assert got.status_code == 200 and b"\\ud800" in got.content, "the client gets the provider's bytes unchanged"
    (call,) = doc["calls"]
    assert (call["call_id"], call["name"], call["state"]) == ("call_\\ud800x", "get_\\udc00weather", "failed")
    assert doc["live"]["recording"], "the recording is saved"
    assert statuses == {"": 200, "/triage": 200, "/recording": 200, "/export.md": 200, "index": 200}
    assert stored["total"] == 1


def test_an_upstream_error_body_with_a_lone_surrogate_is_shown(tmp_path: Path) -> None:
    from .test_live_server import finished, newest_live, serve
    from .test_live_upstream_faults import upstream_app

    error = b'{"error": {"type": "overloaded\\ud800", "message": "try \\udc00 later"}}'
    upstream = upstream_app(lambda key: [error], status=500, content_type=b"application/json")
    with serve(upstream) as url, serve(create_app(Settings(data_dir=tmp_path, mock_delay=0.0, upstreams={"odd": url}))) as base:
        with httpx.Client(timeout=10) as client:
            got = client.post(f"{base}/proxy/odd/v1/chat/completions", json={"model": "m", "stream": True, "messages": []})
            doc = finished(base, newest_live(base))
            statuses = {p: client.get(f"{base}/sessions/{doc['id']}{p}").status_code for p in ("", "/triage")}
            statuses["index"] = client.get(f"{base}/").status_code
    assert got.status_code == 500 and got.content == error
    assert "overloaded\\ud800" in (doc["error"] or "")
    assert statuses == {"": 200, "/triage": 200, "index": 200}


def test_a_capture_file_whose_name_is_not_utf8_is_left_out_of_the_list(tmp_path: Path) -> None:
    import os

    captures = tmp_path / "caps"
    captures.mkdir()
    clean = SURROGATE_SSE.replace(b"\\ud800", b"").replace(b"\\udc00", b"")
    (captures / "good.sse").write_bytes(clean)
    with open(os.path.join(os.fsencode(captures), b"bad\xffname.sse"), "wb") as f:
        f.write(clean)
    with make_client(Settings(data_dir=tmp_path / "data", captures_dir=captures)) as client:
        quiet = TestClient(client.app, base_url=BASE, raise_server_exceptions=False)
        index = quiet.get("/")
        listed = quiet.get("/api/sources")
    assert index.status_code == 200 and listed.status_code == 200
    assert [c["path"] for c in listed.json()["captures"]] == ["good.sse"]
