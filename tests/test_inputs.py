"""The same stream as a HAR export, a curl -i -N dump and JSON Lines gives identical verdicts."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from toollatch import read_capture
from toollatch.wire.capture import CaptureError
from toollatch.cli import main
from toollatch.wire.har import is_har, read_har
from toollatch.wire.inputs import assemble_path

from .conftest import CAPTURES, CASES, expected_files

SSE_FILES = [p for p in expected_files(CAPTURES, "openai-chat", "anthropic") + expected_files(CASES) if p.suffix == ".sse"]
SECRET = "sk-har-canary-777"


def curl_i(sse: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nset-cookie: s=" + SECRET.encode() + b"\r\n\r\n"
    return head + sse


def jsonl(sse: bytes) -> bytes:
    lines = [json.dumps(e.data) for e in read_capture(sse) if e.data != "[DONE]"]
    return ("\n".join(lines) + "\n").encode()


def har(sse: bytes, *, base64_body: bool = False, tools: list[Any] | None = None) -> bytes:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}], "tools": tools or []}
    content: dict[str, Any] = {"size": len(sse), "mimeType": "text/event-stream"}
    if base64_body:
        content.update(text=base64.b64encode(sse).decode(), encoding="base64")
    else:
        content["text"] = sse.decode("utf-8")
    entries = [
        {"request": {"method": "GET", "url": "http://x/favicon.ico", "headers": []}, "response": {"status": 200, "content": {"mimeType": "image/x-icon", "text": ""}}},
        {
            "request": {
                "method": "POST",
                "url": "https://api.example/v1/chat/completions?key=" + SECRET,
                "headers": [{"name": "Authorization", "value": "Bearer " + SECRET}],
                "cookies": [{"name": "c", "value": SECRET}],
                "postData": {"mimeType": "application/json", "text": json.dumps(body)},
            },
            "response": {"status": 200, "headers": [], "content": content},
        },
    ]
    return json.dumps({"log": {"version": "1.2", "creator": {"name": "WebInspector"}, "entries": entries}}, indent=2).encode()


def verdicts(path: Path) -> list[tuple[Any, ...]]:
    return [(c.call_id, c.name, c.state.value, c.reason, c.bytes, c.fragments) for _, r in assemble_path(path) for c in r.calls]


@pytest.mark.parametrize("path", SSE_FILES, ids=lambda p: p.name)
def test_har_curl_and_jsonl_of_one_stream_agree(path: Path, tmp_path: Path) -> None:
    sse = path.read_bytes()
    want = verdicts(path)
    variants = {"curl.sse": curl_i(sse), "a.jsonl": jsonl(sse), "chrome.har": har(sse), "b64.har": har(sse, base64_body=True)}
    if read_capture(sse)[0].error is not None:
        del variants["a.jsonl"]  # a first event that is not JSON has no JSON Lines form
    for name, data in variants.items():
        target = tmp_path / name
        target.write_bytes(data)
        assert verdicts(target) == want, name


def test_har_tools_become_the_registry_and_secrets_are_not_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sse = (CASES / "b18-crlf-separators.sse").read_bytes() if CASES.is_dir() else pytest.skip("no shared cases")
    tools = [{"type": "function", "function": {"name": "other_tool", "parameters": {"type": "object"}}}]
    target = tmp_path / "x.har"
    target.write_bytes(har(sse, tools=tools))
    assert main(["assemble", "--json", str(target)]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    (stream,) = doc["streams"]
    assert stream["calls"][0]["reason"].startswith("unknown_tool")
    assert stream["source"].endswith("POST https://api.example/v1/chat/completions")
    assert SECRET not in out


def test_har_detection_and_errors(tmp_path: Path) -> None:
    assert is_har(b'{\n  "log": {\n    "version": "1.2",')
    assert not is_har(b'{"choices":[{"delta":{"content":"log"}}]}\n')
    with pytest.raises(CaptureError, match="no streaming entry"):
        path = tmp_path / "empty.har"
        path.write_text(json.dumps({"log": {"entries": []}}))
        assemble_path(path)
    with pytest.raises(CaptureError, match=r"bad\.har:3 \(column"):
        read_har(b'{\n "log": {\n  "entries": [,]}}', "bad.har")


def test_a_cut_off_curl_dump_keeps_what_was_read(tmp_path: Path) -> None:
    sse = (CASES / "b18-crlf-separators.sse").read_bytes() if CASES.is_dir() else pytest.skip("no shared cases")
    target = tmp_path / "cut.sse"
    target.write_bytes(curl_i(sse)[: len(curl_i(sse)) - 40])
    ((_, result),) = assemble_path(target)
    assert result.end == "truncated"
    assert [c.name for c in result.calls] == ["lookup"] and result.calls[0].reason.startswith("stream_truncated")
