"""Stored sources on the dashboard: persistence across restarts, listing, search, delete, permalinks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from toollatch.cli import main
from toollatch.demo.demos import DEMOS
from toollatch.web import Settings

from .conftest import CASES, require_shared
from .test_web_app import make_client


def upload(client: TestClient, name: str, data: bytes) -> str:
    response = client.post("/sessions/upload", files={"file": (name, data, "text/plain")}, data={"rate": "12"}, follow_redirects=False)
    assert response.status_code == 303, response.text[:400]
    return response.headers["location"].rsplit("/", 1)[1]


def stored(client: TestClient, **query: str) -> list[dict[str, Any]]:
    return list(client.get("/api/stored", params=query).json()["sources"])


def test_uploads_survive_a_restart(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    with make_client(settings) as first:
        upload(first, "mine.sse", DEMOS["anthropic-single"].wire)
        [entry] = stored(first)
    with make_client(Settings(data_dir=tmp_path / "data")) as second:  # a new app on the same data dir
        assert stored(second) == [entry]
        assert "mine.sse" in second.get("/").text
        response = second.get(entry["url"], follow_redirects=False)
        assert response.status_code == 303
        doc = second.get("/api" + response.headers["location"]).json()
        assert doc["source"]["stored_id"] == entry["id"] and doc["source"]["dialect"] == "anthropic"


def test_permalink_replays_with_the_same_verdicts() -> None:
    with make_client() as client:
        sid = upload(client, "two.sse", DEMOS["anthropic-parallel"].wire)
        [entry] = stored(client)
        again = client.get(f"/sources/{entry['id']}", follow_redirects=False).headers["location"].rsplit("/", 1)[1]
        assert again != sid
        reports = [client.get(f"/sessions/{s}/export.report.json").json()["streams"] for s in (sid, again)]
        assert reports[0] == reports[1]
        page = client.get(f"/sessions/{again}").text
        assert f'href="/sources/{entry["id"]}"' in page  # the permalink is shown on the session page


def test_index_lists_and_searches_by_tool_verdict_and_quirk() -> None:
    require_shared(CASES)
    with make_client() as client:
        upload(client, "b11.sse", (CASES / "b11-parsable-early-then-more.sse").read_bytes())
        upload(client, "b18.sse", (CASES / "b18-crlf-separators.sse").read_bytes())
        upload(client, "ok.sse", DEMOS["openai-single"].wire)
        assert len(stored(client)) == 3
        assert [s["name"] for s in stored(client, tool="SEARCH")] == ["b11.sse"]
        assert [s["name"] for s in stored(client, verdict="invalid_json")] == ["b11.sse"]
        assert {s["name"] for s in stored(client, verdict="committed")} >= {"ok.sse"}
        assert [s["name"] for s in stored(client, quirk="crlf_line_ends")] == ["b18.sse"]
        assert stored(client, tool="nope") == []
        page = client.get("/", params={"verdict": "invalid_json"}).text
        assert 'id="stored"' in page and "b11.sse" in page and "ok.sse" not in page.split('id="stored"', 1)[1].split("</section>", 1)[0]
        assert 'value="invalid_json"' in page  # the search form keeps the query
        assert "No stored source matches." in client.get("/", params={"tool": "zzz"}).text


def test_delete_from_the_index_and_the_api() -> None:
    with make_client() as client:
        upload(client, "a.sse", DEMOS["openai-single"].wire)
        upload(client, "b.sse", DEMOS["openai-single"].wire)
        a, b = stored(client)
        # newest first
        assert (a["name"], b["name"]) == ("b.sse", "a.sse")
        response = client.post(f"/sources/{a['id']}/delete", follow_redirects=False)
        assert response.status_code == 303
        assert client.delete(f"/api/stored/{b['id']}").json() == {"deleted": b["id"]}
        assert stored(client) == []
        assert client.get(f"/sources/{a['id']}").status_code == 404
        assert client.post(f"/sources/{a['id']}/delete").status_code == 404
        assert client.delete(f"/api/stored/{a['id']}").status_code == 404
        assert client.get(f"/api/stored/{a['id']}").status_code == 404


def test_cross_origin_delete_is_refused() -> None:
    with make_client() as client:
        upload(client, "a.sse", DEMOS["openai-single"].wire)
        [entry] = stored(client)
        response = client.post(f"/sources/{entry['id']}/delete", headers={"Origin": "http://evil.example"})
        assert response.status_code == 403
        assert len(stored(client)) == 1


def test_serve_data_dir_option(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[Settings] = []
    monkeypatch.setattr("toollatch.web.app.run", lambda settings: seen.append(settings))
    monkeypatch.setattr("toollatch.web.banner.port_problem", lambda host, port: None)  # a dashboard may be running on 8765
    assert main(["serve", "--data-dir", str(tmp_path / "d"), "--captures", str(tmp_path)]) == 0
    assert seen[0].data_dir == tmp_path / "d"
    assert main(["serve", "--captures", str(tmp_path)]) == 0
    assert seen[1].data_dir == Settings().data_dir  # default: $TOOLLATCH_DATA_DIR (a temp dir in tests)
