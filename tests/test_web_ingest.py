"""Bug-report inputs: uploads and pastes of raw SSE, curl -i dumps, JSON Lines, HAR and Bedrock
event streams; format detection, cut-off files, errors that name file, line and byte."""

from __future__ import annotations

import gzip

import asyncio
import html
import io
import json
from pathlib import Path

import pytest
from starlette.datastructures import UploadFile
from starlette.testclient import TestClient

from toollatch.demo.demos import DEMOS
from toollatch.web import Settings
from toollatch.web.triage.ingest import READ_CHUNK, cut_tail, detect_format, read_upload
from toollatch.web.triage.sources import SourceError

from .conftest import CAPTURES, require_shared
from .test_eventstream import encode_events
from .test_inputs import SECRET, curl_i, har, jsonl
from .test_web_app import make_client

SSE = DEMOS["openai-single"].wire
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "required": ["city"]}}}]


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    with make_client(Settings(data_dir=tmp_path / "data", max_upload_bytes=256 * 1024)) as c:
        yield c  # type: ignore[misc]


def upload(client: TestClient, name: str, data: bytes, **fields: str):  # type: ignore[no-untyped-def]
    return client.post("/sessions/upload", files={"file": (name, data, "application/octet-stream")}, data={"rate": "12", **fields}, follow_redirects=False)


def paste(client: TestClient, text: str):  # type: ignore[no-untyped-def]
    # An empty file part, as a browser sends when no file was chosen, plus the textarea.
    return client.post("/sessions/upload", files={"file": ("", b"", "application/octet-stream")}, data={"rate": "12", "paste": text}, follow_redirects=False)


def session_doc(client: TestClient, response) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == 303, response.text[:500]
    sid = response.headers["location"].rsplit("/", 1)[1]
    client.post(f"/sessions/{sid}/control", data={"action": "pause"})
    total = client.get(f"/api/sessions/{sid}").json()["total"]
    client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": str(total)})
    doc = client.get(f"/api/sessions/{sid}").json()
    assert doc["status"] == "finished"
    return doc


def states(doc: dict) -> list[tuple[str, str, int, int]]:
    return [(c["name"], c["state"], c["bytes"], c["fragments"]) for s in doc["streams"] for c in s["calls"]]


# ------------------------------------------------------------------ detection


def test_detect_format() -> None:
    assert detect_format(SSE) == "sse"
    assert detect_format(curl_i(SSE)) == "http+sse"
    assert detect_format(jsonl(SSE)) == "jsonl"
    assert detect_format(b"HTTP/1.1 200 OK\r\n\r\n" + jsonl(SSE)) == "http+jsonl"
    assert detect_format(har(SSE)) == "har"
    assert detect_format(encode_events([{"messageStart": {"role": "assistant"}}])) == "eventstream"
    assert detect_format(gzip.compress(SSE)) == "gzip"
    assert detect_format(b' [{"choices": []}]') == "json-array"


@pytest.mark.parametrize("form", ["gzip", "json-array"])
def test_gzip_and_json_array_uploads_assemble_like_the_sse(form: str, tmp_path: Path) -> None:
    from toollatch.wire.capture import read_capture
    from toollatch.core.config import AssembleConfig
    from toollatch.web.triage.ingest import ingest
    from toollatch.web.store import Store

    data = gzip.compress(SSE) if form == "gzip" else json.dumps([e.data for e in read_capture(SSE) if e.data != "[DONE]"]).encode()
    store = Store(tmp_path)
    try:
        (plain,) = ingest("a.sse", SSE, None, "", AssembleConfig(), store)
        (other,) = ingest(f"a.{form}", data, None, "", AssembleConfig(), store)
    finally:
        store.close()
    assert other.count > 0 and other.dialect == plain.dialect


def test_cut_tail_finds_the_incomplete_line_or_event() -> None:
    lines = jsonl(SSE)
    cut = lines[: len(lines) - 20]
    tail = cut_tail(cut, "jsonl")
    assert tail is not None and tail.what == "line"
    assert tail.byte == cut.rfind(b"\n") + 1 and tail.line == cut.count(b"\n") + 1
    assert cut_tail(lines, "jsonl") is None
    assert cut_tail(lines.rstrip(b"\n"), "jsonl") is None  # complete last line, no newline
    half = SSE[: len(SSE) // 2]
    tail = cut_tail(half, "sse")
    assert tail is not None and tail.what == "event" and half[tail.byte : tail.byte + 5] == b"data:"
    assert cut_tail(SSE, "sse") is None


def test_read_upload_reads_in_bounded_chunks() -> None:
    sizes: list[int] = []

    class Spy(UploadFile):
        async def read(self, size: int = -1) -> bytes:
            sizes.append(size)
            return await super().read(size)

    data = b"x" * (READ_CHUNK * 2 + 5)
    assert asyncio.run(read_upload(Spy(io.BytesIO(data), filename="a.sse"), len(data))) == data
    assert sizes and all(s == READ_CHUNK for s in sizes)
    with pytest.raises(SourceError) as err:
        asyncio.run(read_upload(Spy(io.BytesIO(data), filename="big.sse"), READ_CHUNK))
    assert err.value.status == 413 and "big.sse" in str(err.value)


def test_default_upload_limit_is_50_mib() -> None:
    assert Settings().max_upload_bytes == 50 * 1024 * 1024


# ------------------------------------------------------------------ formats through the form


def test_raw_sse_curl_i_jsonl_and_event_stream_give_the_same_verdicts(client: TestClient) -> None:
    reference = states(session_doc(client, upload(client, "plain.sse", SSE)))
    assert [state for _, state, _, _ in reference] == ["committed"]
    for name, data in (("curl.txt", curl_i(SSE)), ("events.jsonl", jsonl(SSE))):
        assert states(session_doc(client, upload(client, name, data))) == reference, name
    stored = client.get("/api/stored").json()["sources"]
    assert {s["format"] for s in stored} == {"sse", "http+sse", "jsonl"}
    curl = next(s for s in stored if s["format"] == "http+sse")
    assert client.get(f"/api/stored/{curl['id']}").json()["size"] == len(SSE)  # the HTTP head is not stored
    data_dir = client.app.state.settings.data_dir  # type: ignore[attr-defined]
    assert SECRET.encode() not in b"".join(p.read_bytes() for p in data_dir.iterdir())


def test_bedrock_binary_event_stream_upload() -> None:
    require_shared(CAPTURES)
    path = CAPTURES / "bedrock" / "converse-nova2-lite-two-tools.jsonl"
    if not path.exists():
        pytest.skip("Bedrock capture missing")
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    with make_client() as client:
        doc = session_doc(client, upload(client, "bedrock.bin", encode_events(events)))
        same = session_doc(client, upload(client, path.name, path.read_bytes()))
        assert doc["dialect"] == "bedrock-converse" and states(doc) == states(same)
        assert client.get("/api/stored").json()["sources"][-1]["format"] == "eventstream"


def test_har_entries_become_sessions_with_their_tools_and_no_headers(client: TestClient, tmp_path: Path) -> None:
    body = json.loads(har(SSE, tools=TOOLS))
    body["log"]["entries"].append(json.loads(json.dumps(body["log"]["entries"][1])))  # a second streaming entry
    response = upload(client, "trace.har", json.dumps(body).encode())
    assert response.status_code == 303 and response.headers["location"].startswith("/?started=")
    sids = response.headers["location"].split("=", 1)[1].split("#")[0].split(",")
    assert len(sids) == 2
    index = client.get(response.headers["location"]).text
    assert "2 streams started" in index and all(f"/sessions/{sid}" in index for sid in sids)
    for sid in sids:
        doc = client.get(f"/api/sessions/{sid}").json()
        assert doc["source"]["tools"] == ["get_weather"] and "#entry" in doc["source"]["name"]
    stored = client.get("/api/stored").json()["sources"]
    assert len(stored) == 2 and {s["har"]["url"] for s in stored} == {"https://api.example/v1/chat/completions"}
    db = b"".join(p.read_bytes() for p in (tmp_path / "data").iterdir())
    assert SECRET.encode() not in db  # no header, cookie or query string was kept


def test_har_without_streaming_entries_is_a_clear_error(client: TestClient) -> None:
    doc = {"log": {"version": "1.2", "entries": [{"request": {"method": "GET", "url": "http://x/"}, "response": {"status": 200, "content": {"mimeType": "text/html", "text": "<p>"}}}]}}
    response = upload(client, "empty.har", json.dumps(doc).encode())
    assert response.status_code == 422 and "empty.har" in response.text and "no streaming entry" in response.text


def test_paste_box_accepts_sse_and_json_lines(client: TestClient) -> None:
    doc = session_doc(client, paste(client, SSE.decode()))
    assert doc["source"]["name"] == "paste.sse" and states(doc)[0][1] == "committed"
    doc = session_doc(client, paste(client, jsonl(SSE).decode()))
    assert doc["source"]["name"] == "paste.jsonl"
    assert [s["origin"] for s in client.get("/api/stored").json()["sources"]] == ["paste", "paste"]


def test_neither_file_nor_paste_is_400(client: TestClient) -> None:
    response = paste(client, "   ")
    assert response.status_code == 400 and "paste" in response.text


def test_paste_over_the_limit_is_413(client: TestClient) -> None:
    response = paste(client, "data: {}\n\n" * 40_000)
    assert response.status_code == 413


# ------------------------------------------------------------------ cut-off files and errors


def test_cut_off_json_lines_show_what_was_read_marked_truncated(client: TestClient) -> None:
    lines = jsonl(SSE)
    cut = lines[: lines.rfind(b"\n", 0, len(lines) - 1) + 30]  # mid-way through the last line
    line = cut.count(b"\n") + 1
    doc = session_doc(client, upload(client, "cut.jsonl", cut))
    assert doc["streams"][0]["end"] == "truncated"
    assert doc["triage"]["truncated"]["cut"] == {"line": line, "byte": cut.rfind(b"\n") + 1, "what": "line"}
    page = client.get(f"/sessions/{doc['id']}").text
    assert "Truncated input." in page and f"cut off at line {line}" in page
    assert client.get("/api/stored").json()["sources"][0]["cut"]["what"] == "line"


def test_cut_off_sse_is_truncated_and_says_where(client: TestClient) -> None:
    cut = SSE[: int(len(SSE) * 0.6)]
    doc = session_doc(client, upload(client, "cut.sse", cut))
    assert doc["streams"][0]["end"] == "truncated"
    assert [c["state"] for c in doc["calls"]] == ["failed"]
    assert doc["triage"]["truncated"]["cut"]["what"] == "event"


@pytest.mark.parametrize(
    ("name", "data", "where"),
    [
        ("broken.sse", b'data: {"choices": [\n\n', "broken.sse:1 (byte 0)"),
        ("bad.jsonl", b'\n\n{"choices": [}\n', "bad.jsonl:3 (byte 2)"),
        ("other.jsonl", b'{"hello": 1}\n{"world": 2}\n', "other.jsonl:2 (byte 13)"),
    ],
)
def test_errors_name_file_line_and_byte(client: TestClient, name: str, data: bytes, where: str) -> None:
    response = upload(client, name, data)
    assert 400 <= response.status_code < 500
    assert where in response.text and "Traceback" not in response.text
    assert client.get("/api/stored").json()["total"] == 0  # nothing stored when unreadable


# ------------------------------------------------------------------ credentials in HAR inputs


def _har_without_body(url: str) -> bytes:
    doc = json.loads(har(SSE))
    del doc["log"]["entries"][1]["response"]["content"]["text"]
    doc["log"]["entries"][1]["request"]["url"] = url
    return json.dumps(doc).encode()


@pytest.mark.parametrize("send", [upload, paste], ids=["file", "paste"])
def test_a_rejected_har_shows_no_credential(client: TestClient, send) -> None:  # type: ignore[no-untyped-def]
    data = _har_without_body(f"https://u:{SECRET}@api.example/v1/chat/completions?key={SECRET}#{SECRET}")
    response = send(client, "t.har", data) if send is upload else send(client, data.decode())
    assert response.status_code == 422
    assert "entry 1 (https://api.example/v1/chat/completions): the response body was not saved" in response.text
    assert SECRET not in response.text  # neither the URL nor the pasted HAR's Authorization header or cookie


def test_a_rejected_har_paste_is_not_put_back_but_other_pastes_are(client: TestClient) -> None:
    response = paste(client, _har_without_body("https://api.example/v1").decode())
    assert response.status_code == 422 and "The pasted HAR export is not shown again" in response.text
    text = "data: {not json\n\n"
    response = paste(client, text)
    assert response.status_code == 422 and "not shown again" not in response.text and "data: {not json" in response.text


def test_stored_har_urls_are_listed_without_credentials_even_if_stored_with_them(client: TestClient) -> None:
    store = client.app.state.sources  # type: ignore[attr-defined]
    meta = {"format": "sse", "har": {"entry": "entry1", "method": "POST", "url": f"https://u:{SECRET}@gw.example/v1?key={SECRET}", "status": 200}}
    sid = store.save(kind="upload", name="old.har#entry1", body=SSE, meta=meta)
    listed = client.get("/api/stored").json()["sources"]
    assert [s["har"]["url"] for s in listed] == ["https://gw.example/v1"]
    assert client.get(f"/api/stored/{sid}").json()["har"]["url"] == "https://gw.example/v1"
    assert SECRET not in client.get("/").text


def test_an_unusable_tools_schema_is_named_without_quoting_it(client: TestClient) -> None:
    tools = [{"type": "function", "function": {"name": "t", "parameters": {"type": "object", "properties": {"k": {"type": SECRET}}}}}]
    response = client.post(
        "/sessions/upload",
        files={"file": ("f.sse", SSE, "text/plain"), "tools": ("tools.json", json.dumps(tools).encode(), "application/json")},
        data={"rate": "12"},
        follow_redirects=False,
    )
    assert response.status_code == 422 and "/properties/k/type" in response.text and SECRET not in response.text
    doc = json.loads(har(SSE, tools=tools))
    response = upload(client, "t.har", json.dumps(doc).encode())
    assert response.status_code == 422 and "tools cannot be used: tool 't': invalid JSON Schema: /properties/k/type" in html.unescape(response.text) and SECRET not in response.text


def test_a_large_upload_is_joined_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    from typing import Any

    from toollatch.web.triage import ingest

    threads: list[threading.Thread] = []
    real = asyncio.to_thread

    async def spy(func: Any, *args: Any) -> Any:
        def run() -> Any:
            threads.append(threading.current_thread())
            return func(*args)
        return await real(run)

    monkeypatch.setattr(ingest, "JOIN_ON_LOOP_BYTES", READ_CHUNK)
    monkeypatch.setattr(ingest.asyncio, "to_thread", spy)
    data = b"x" * (READ_CHUNK * 2 + 5)

    async def main() -> tuple[bytes, threading.Thread]:
        return await read_upload(UploadFile(io.BytesIO(data), filename="a.sse"), len(data)), threading.current_thread()

    joined, loop_thread = asyncio.run(main())
    assert joined == data
    assert threads and all(t is not loop_thread for t in threads)
