"""JSON a user or an upstream controls, at the dashboard's doors: every upload kind (file,
paste, HAR, JSON Lines, tools file), direct connect, the JSON API, the mock and the proxy.

A payload ``json.loads`` refuses (bad syntax, an integer over the 4300-digit limit, deep
nesting, bytes that are not UTF-8) is a 4xx whose message names what and where; never a
500 or a traceback.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from toollatch.web import Settings, create_app

from .test_web_app import BASE

DEEP = "[" * 20_000 + "]" * 20_000  # 40 KB: under the 64 KiB cap of POST /api/sessions, far over any parser's depth
DIGITS = "7" * 5000
CHUNK = json.dumps({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]})
STREAM = f"data: {CHUNK}\n\ndata: [DONE]\n\n"


@pytest.fixture
def client(tmp_path: Path) -> Any:
    with TestClient(create_app(Settings(data_dir=tmp_path, mock_delay=0.0)), base_url=BASE, raise_server_exceptions=False) as c:
        yield c


def alert(page: str) -> str:
    found = re.search(r'id="error">.*?<p>(.*?)</p>', page, re.S)
    return html.unescape(found.group(1)) if found else ""


def with_extra(extra: str) -> str:
    return CHUNK[:-1] + ', "x": ' + extra + "}"


def har(post_text: Any = '{"stream": true}', extra: str = "") -> bytes:
    entry = {"request": {"method": "POST", "url": "https://api/v1/chat/completions", "postData": {"text": post_text}},
             "response": {"status": 200, "content": {"mimeType": "text/event-stream", "text": STREAM}}}
    return ('{"log": {"entries": ' + json.dumps([entry]) + extra + "}}").encode()


def deep_schema_tools(depth: int = 300) -> list[dict[str, Any]]:
    schema: dict[str, Any] = {"type": "object"}
    node = schema
    for _ in range(depth):
        node["properties"] = {"a": {"type": "object"}}
        node = node["properties"]["a"]
    return [{"type": "function", "function": {"name": "f", "parameters": schema}}]


UPLOADS = {
    "jsonl-deep": ("c.jsonl", (with_extra(DEEP) + "\n").encode(), "c.jsonl:1 (byte 0): event data is not JSON (nesting too deep)"),
    "jsonl-digits": ("c.jsonl", (with_extra(DIGITS) + "\n").encode(), "c.jsonl:1 (byte 0): event data is not JSON (a number too long to convert)"),
    "sse-deep": ("c.sse", f"data: {with_extra(DEEP)}\n\n".encode(), "c.sse:1 (byte 0): event data is not JSON (nesting too deep)"),
    "sse-digits": ("c.sse", f"data: {with_extra(DIGITS)}\n\n".encode(), "c.sse:1 (byte 0): event data is not JSON (a number too long to convert)"),
    "har-deep": ("c.har", har(extra=', "x": ' + DEEP), "c.har: HAR is not valid JSON (nesting too deep)"),
    "har-digits": ("c.har", har(extra=', "x": ' + DIGITS), "c.har: HAR is not valid JSON (a number too long to convert)"),
    "har-tools-deep-schema": ("c.har", har(json.dumps({"stream": True, "tools": deep_schema_tools()})), "c.har#entry0: the request's tools cannot be used: tool 'f': JSON Schema nested too deep to check"),
}


@pytest.mark.parametrize("name", UPLOADS)
@pytest.mark.parametrize("how", ["file", "paste"])
def test_an_upload_json_cannot_read_is_a_422_naming_file_and_fault(client: TestClient, name: str, how: str) -> None:
    filename, data, message = UPLOADS[name]
    if how == "file":
        response = client.post("/sessions/upload", files={"file": (filename, data, "application/octet-stream")}, data={"rate": "max"})
    else:  # a paste is named by its format
        response = client.post("/sessions/upload", data={"paste": data.decode(), "rate": "max"})
        message = message.replace("c.", "paste.", 1)
    assert response.status_code == 422 and message in alert(response.text)


@pytest.mark.parametrize("post_text", ['{"stream": true, "x": ' + DEEP + "}", '{"stream": true, "n": ' + DIGITS + "}"], ids=["deep", "digits"])
def test_a_har_entry_whose_request_body_json_cannot_read_is_still_replayed(client: TestClient, post_text: str) -> None:
    response = client.post("/sessions/upload", files={"file": ("c.har", har(post_text), "application/octet-stream")}, data={"rate": "max"}, follow_redirects=False)
    assert response.status_code == 303
    sid = response.headers["location"].rsplit("/", 1)[1]
    assert client.get(f"/api/sessions/{sid}").json()["source"]["tools"] is None


@pytest.mark.parametrize(
    "raw,message",
    [(DEEP.encode(), "Tools file tools.json is not JSON (nesting too deep)."),
     (f"[{DIGITS}]".encode(), "Tools file tools.json is not JSON (a number too long to convert)."),
     (b'[{"name": "caf\xe9"}]', "Tools file tools.json is not UTF-8 (byte 14)."),
     (b"[{", "Tools file tools.json is not JSON (Expecting property name enclosed in double quotes at line 1, column 3)."),
     (json.dumps(deep_schema_tools()).encode(), "Tools file tools.json: tool 'f': JSON Schema nested too deep to check")],
    ids=["deep", "digits", "latin1", "syntax", "deep-schema"],
)
def test_a_tools_file_json_cannot_read_is_a_422_naming_it(client: TestClient, raw: bytes, message: str) -> None:
    files = {"file": ("c.sse", STREAM.encode(), "text/event-stream"), "tools": ("tools.json", raw, "application/json")}
    response = client.post("/sessions/upload", files=files, data={"rate": "max"})
    assert response.status_code == 422 and alert(response.text) == message


@pytest.mark.parametrize(
    "tools,message",
    [(DEEP, "Tools are not JSON (nesting too deep)."), (f"[{DIGITS}]", "Tools are not JSON (a number too long to convert)."),
     (json.dumps(deep_schema_tools()), "The tools cannot be used: tool 'f': JSON Schema nested too deep to check.")],
    ids=["deep", "digits", "deep-schema"],
)
def test_direct_connect_refuses_tools_it_cannot_read(client: TestClient, tools: str, message: str) -> None:
    response = client.post("/connect", data={"upstream": "mock", "api": "chat", "model": "single", "tools": tools, "prompt": "x"}, follow_redirects=False)
    assert response.status_code == 400 and message in html.unescape(response.text)


BODIES = {
    "deep": (DEEP.encode(), "not JSON (nesting too deep)"),
    "digits": (b'{"model": "single", "n": ' + DIGITS.encode() + b"}", "not JSON (a number too long to convert)"),
    "latin1": (b'{"model": "caf\xe9"}', "not UTF-8 (byte 14)"),
    "syntax": (b'{"model": ', "not JSON (Expecting value at line 1, column 11)"),
}


@pytest.mark.parametrize("name", BODIES)
def test_the_json_api_mock_and_proxy_answer_400_naming_the_fault(client: TestClient, name: str) -> None:
    body, problem = BODIES[name]
    headers = {"content-type": "application/json"}
    api = client.post("/api/sessions", content=body, headers=headers)
    assert api.status_code == 400 and api.json() == {"error": f"body must be JSON: the body is {problem}"}
    for url in ("/mock/v1/chat/completions", "/mock/v1/messages", "/proxy/openai/v1/chat/completions", "/proxy/anthropic/v1/messages"):
        response = client.post(url, content=body, headers=headers)
        assert response.status_code == 400, url
        assert f"The request body is {problem}." in json.dumps(response.json()), url
    # the built-in mock refused them: the client has the answer, no session or recording is kept
    assert client.get("/api/live").json()["sessions"] == []
