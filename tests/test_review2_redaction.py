"""Adversarial review (second round): argument text crossing the redaction boundary.

Each test states the correct behaviour and is marked ``xfail(strict=True)`` while the leak
exists, so the suite passes and the test flips to a failure (XPASS) once it is fixed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from toollatch import Pipeline, read_capture
from toollatch.redaction.export import redact_capture
from toollatch.core.model import CallState
from toollatch.web import Settings, create_app

from .test_live_server import finished, newest_live, serve
from .test_live_upstream_faults import upstream_app

SECRET = "CANARYvalue8472615"


def sse(*events: tuple[str, dict[str, Any]] | dict[str, Any], done: bool = False) -> bytes:
    out = []
    for ev in events:
        out.append(f"event: {ev[0]}\ndata: {json.dumps(ev[1])}\n\n" if isinstance(ev, tuple) else f"data: {json.dumps(ev)}\n\n")
    return ("".join(out) + ("data: [DONE]\n\n" if done else "")).encode()


def jsonl(*docs: dict[str, Any]) -> bytes:
    return "".join(json.dumps(d) + "\n" for d in docs).encode()


_ITEM = {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "f", "arguments": ""}
_ANTHROPIC_VALUE_DELTA = [
    ("message_start", {"type": "message_start", "message": {"id": "m1", "content": []}}),
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "c1", "name": "f", "input": {}}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": {"p": SECRET}}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_stop", {"type": "message_stop"}),
]

#: Streams whose one call gets its argument text as a JSON *value* (a shape every adapter
#: judges as that value's JSON text), for each dialect and place the adapters read.
JSON_VALUED = {
    "anthropic partial_json": sse(*_ANTHROPIC_VALUE_DELTA),
    "bedrock contentBlockDelta input": jsonl(
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "c1", "name": "f"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": {"p": SECRET}}}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "tool_use"}},
    ),
    "bedrock contentBlockStart input": jsonl(
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "c1", "name": "f", "input": {"p": SECRET}}}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "tool_use"}},
    ),
    "bedrock contentBlockStart input text": jsonl(
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "c1", "name": "f", "input": json.dumps({"p": SECRET})}}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "tool_use"}},
    ),
    "responses arguments.done": sse(
        ("response.created", {"type": "response.created", "response": {"id": "r1"}}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": _ITEM}),
        ("response.function_call_arguments.done", {"type": "response.function_call_arguments.done", "output_index": 0, "item_id": "fc1", "arguments": {"p": SECRET}}),
        ("response.completed", {"type": "response.completed", "response": {}}),
    ),
    "responses item arguments": sse(
        ("response.created", {"type": "response.created", "response": {"id": "r1"}}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": {**_ITEM, "arguments": {"p": SECRET}}}),
        ("response.completed", {"type": "response.completed", "response": {}}),
    ),
    "cohere arguments": sse(
        ("message-start", {"type": "message-start", "id": "m1"}),
        ("tool-call-start", {"type": "tool-call-start", "index": 0,
                             "delta": {"message": {"tool_calls": {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"p": SECRET}}}}}}),
        ("tool-call-end", {"type": "tool-call-end", "index": 0}),
        ("message-end", {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL"}}),
    ),
}


@pytest.mark.parametrize("name", list(JSON_VALUED))
def test_the_redacted_reproducer_masks_arguments_given_as_json_values(name: str) -> None:
    data = JSON_VALUED[name]
    pipeline = Pipeline()
    for event in read_capture(data):
        pipeline.feed(event)
    pipeline.close()
    (call,) = pipeline.results()[0].calls
    assert call.arguments == {"p": SECRET}  # the adapter reads this place as the call's arguments
    body = redact_capture(data, "capture")
    assert SECRET not in body.decode("utf-8")


def _anthropic_upstream():  # type: ignore[no-untyped-def]
    return upstream_app(lambda _key: [sse(*_ANTHROPIC_VALUE_DELTA)])


def test_a_recording_of_a_call_that_did_not_commit_never_serves_its_values(tmp_path: Path) -> None:
    tools = [{"name": "f", "input_schema": {"type": "object", "required": ["absent"]}}]  # the call fails its schema
    with serve(_anthropic_upstream()) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream}))) as base:
        received = httpx.post(f"{base}/proxy/up/v1/messages", json={"model": "x", "stream": True, "tools": tools}).content
        doc = finished(base, newest_live(base))
        download = httpx.get(f"{base}/sessions/{doc['id']}/recording")
    assert SECRET.encode() in received
    assert [c["state"] for c in doc["streams"][0]["calls"]] == [CallState.FAILED.value]
    assert doc["live"]["recording_download"] == "redacted" and download.status_code == 200
    assert SECRET not in download.text


def _unknown_format_upstream():  # type: ignore[no-untyped-def]
    """A streaming answer in a format no dialect adapter reads (Ollama's ``/api/chat`` NDJSON)."""
    call = {"function": {"name": "f", "arguments": {"p": SECRET}}}
    body = jsonl({"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": [call]}, "done": False}, {"model": "m", "done": True})
    return upstream_app(lambda _key: [body], content_type=b"application/x-ndjson")


def test_a_redacted_download_of_a_stream_no_adapter_reads_masks_its_strings(tmp_path: Path) -> None:
    with serve(_unknown_format_upstream()) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream}))) as base:
        received = httpx.post(f"{base}/proxy/up/api/chat", json={"model": "x", "stream": True}).content
        doc = finished(base, newest_live(base))
        download = httpx.get(f"{base}/sessions/{doc['id']}/recording")
    assert SECRET.encode() in received and doc["status"] == "error"
    assert doc["live"]["recording_download"] == "redacted" and "redacted" in download.headers["content-disposition"]
    assert SECRET not in download.text


def _call_after_done_upstream():  # type: ignore[no-untyped-def]
    """A call that commits, ``[DONE]``, then a second call's text and ``[DONE]`` again."""

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    body = event({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, "tool_calls")
    body += b"data: [DONE]\n\n"
    body += event({"tool_calls": [{"index": 1, "id": "c2", "type": "function", "function": {"name": "f", "arguments": '{"p": "' + SECRET + '"'}}]})
    body += b"data: [DONE]\n\n"
    return upstream_app(lambda _key: [body])


def test_a_recording_with_a_call_after_the_stream_end_is_not_served_as_received(tmp_path: Path) -> None:
    with serve(_call_after_done_upstream()) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream}))) as base:
        received = httpx.post(f"{base}/proxy/up/v1/chat/completions", json={"model": "x", "stream": True}).content
        doc = finished(base, newest_live(base))
        download = httpx.get(f"{base}/sessions/{doc['id']}/recording")
    assert SECRET.encode() in received
    assert [(c["call_id"], c["state"]) for s in doc["streams"] for c in s["calls"]] == [("c1", "committed")]
    assert download.status_code == 200 and SECRET not in download.text


def test_a_query_encoded_into_the_proxied_path_is_still_a_credential(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import time

    from starlette.testclient import TestClient

    from .test_web_app import BASE

    key = "AIzaCANARYkey0123456789"
    caplog.set_level(logging.INFO)
    with TestClient(create_app(Settings(data_dir=tmp_path, mock_delay=0.0)), base_url=BASE) as client:
        answer = client.post(f"/proxy/openai/v1/chat/completions%3Fkey%3D{key}", json={"model": "single", "stream": True})
        assert answer.status_code == 200
        (session,) = client.app.state.store.live_sessions()  # type: ignore[attr-defined]
        for _ in range(200):
            if session.status.done and session.live_source.recording:
                break
            time.sleep(0.01)
        served = [client.get(url).text for url in (f"/sessions/{session.id}", f"/api/sessions/{session.id}", "/api/live", "/api/stored", "/")]
    assert [i for i, text in enumerate(served) if key in text] == []
    assert key not in caplog.text
