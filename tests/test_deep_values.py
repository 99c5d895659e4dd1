"""Deeply nested arguments everywhere they are turned into text: dialects that receive argument
*objects*, the CLI's JSON and history, the redacted reproducer, the dashboard's pages, JSON twin,
WebSocket frames and exports. The deepest value the latch can commit
(``max_tool_argument_depth`` at its ceiling) renders everywhere, also from a deep call stack;
anything deeper fails ``arguments_too_deep``, never with a traceback or a 500."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from toollatch import assemble_events, read_capture
from toollatch.cli import main
from toollatch.core.config import ARGUMENT_DEPTH_CEILING, AssembleConfig
from toollatch.redaction.export import redact_capture
from toollatch.core.history import build_history
from toollatch.core.jsontext import text_depth, value_depth
from toollatch.core.model import CallState
from toollatch.web import Settings
from toollatch.web.pages.api import DocumentResponse
from toollatch.web.pages.render import MAX_INDENTED_DEPTH, pretty_arguments

from .test_jsontext import deep_list, on_a_deep_stack
from .test_web_app import BASE, WS_BASE, make_client

DEEPEST = ARGUMENT_DEPTH_CEILING
CEILING = AssembleConfig(max_tool_argument_depth=ARGUMENT_DEPTH_CEILING)
DEEP = "__DEEP__"  # stands for the deep value in an event, replaced in its JSON text


def deep_text(depth: int) -> str:
    """``{"a": [[...]], "s": "x"}`` nested ``depth`` levels, as text (any depth, no recursion)."""
    return '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + ',"s":"secret-ish"}'


def sse(*events: dict[str, Any], depth: int, done: bool = True, named: bool = False) -> bytes:
    out = ""
    for event in events:
        data = json.dumps(event).replace(json.dumps(DEEP), deep_text(depth))
        out += (f"event: {event['type']}\n" if named else "") + f"data: {data}\n\n"
    return (out + ("data: [DONE]\n\n" if done else "")).encode()


def chat(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def openai_text(depth: int) -> bytes:
    start = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "__TEXT__"}}
    data = sse(chat({"tool_calls": [start]}), chat({}, "tool_calls"), depth=depth)
    return data.replace(b'"__TEXT__"', json.dumps(deep_text(depth)).encode())


def openai_object(depth: int) -> bytes:
    start = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": DEEP}}
    return sse(chat({"tool_calls": [start]}), chat({}, "tool_calls"), depth=depth)


def anthropic(depth: int) -> bytes:
    events = [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "model": "c"}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "c1", "name": "f", "input": DEEP}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    return sse(*events, depth=depth, done=False, named=True)


def gemini(depth: int) -> bytes:
    part = {"functionCall": {"id": "c1", "name": "f", "args": DEEP}}
    return sse({"type": "x", "candidates": [{"content": {"parts": [part]}, "finishReason": "STOP"}]}, depth=depth, done=False)


def responses(depth: int) -> bytes:
    item = {"type": "function_call", "id": "fc_0", "call_id": "c1", "name": "f", "arguments": DEEP, "status": "completed"}
    events = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
    ]
    return sse(*events, depth=depth, done=False, named=True)


CAPTURES = {"openai-text": openai_text, "openai-object": openai_object, "anthropic": anthropic, "gemini": gemini, "responses": responses}


def assemble(data: bytes, config: AssembleConfig | None = None) -> Any:
    (result,) = assemble_events(read_capture(data), config=config)
    return result


# ------------------------------------------------------------------ dialects


@pytest.mark.parametrize("kind", CAPTURES)
@pytest.mark.parametrize("depth", [65, 700])
def test_arguments_deeper_than_the_limit_fail_by_name_in_every_dialect(kind: str, depth: int) -> None:
    result = assemble(CAPTURES[kind](depth))
    (call,) = result.calls
    assert result.end == "complete"
    assert call.state is CallState.FAILED and call.reason == f"arguments_too_deep: nested {depth} levels deep; the limit is 64"
    assert [r.tool_call_id for r in result.results] == ["c1"]


@pytest.mark.parametrize("kind", CAPTURES)
def test_the_deepest_committable_arguments_commit_in_every_dialect(kind: str) -> None:
    result = assemble(CAPTURES[kind](DEEPEST), CEILING)
    (call,) = result.calls
    assert call.state is CallState.COMMITTED and value_depth(call.arguments) == DEEPEST
    assert call.arguments["s"] == "secret-ish"


def test_gemini_partial_args_at_a_deep_json_path_fail_by_name() -> None:
    path = "$" + ".a" * 3000
    first = {"functionCall": {"id": "c1", "name": "f", "willContinue": True}}
    more = {"functionCall": {"partialArgs": [{"jsonPath": path, "numberValue": 1}]}}
    events = [{"candidates": [{"content": {"parts": [first]}}]}, {"candidates": [{"content": {"parts": [more]}, "finishReason": "STOP"}]}]
    data = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
    (call,) = assemble(data).calls
    assert call.reason == "arguments_too_deep: nested 3000 levels deep; the limit is 64"


def test_an_adapter_that_recurses_too_deep_fails_the_stream_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from toollatch.dialects.openai_chat import OpenAIChatAdapter

    def recurse(self: Any, event: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(OpenAIChatAdapter, "feed", recurse)
    result = assemble(openai_text(3))
    assert result.end == "error" and "cannot interpret openai-chat event (nested too deep)" in (result.end_detail or "")


# ------------------------------------------------------------------ library outputs


def _history_arguments(history: Any) -> list[Any]:
    """The arguments in a history document, parsed where the dialect keeps them as text."""
    found: list[Any] = []
    stack = [history]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "tool_use":
                found.append(item["input"])
            elif isinstance(item.get("arguments"), str):
                found.append(json.loads(item["arguments"]))
            else:
                stack.extend(v for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend(item)
    return found


@pytest.mark.parametrize("kind", ["openai-text", "anthropic", "responses"])
def test_history_of_the_deepest_committable_arguments(kind: str) -> None:
    result = assemble(CAPTURES[kind](DEEPEST), CEILING)
    history = on_a_deep_stack(lambda: build_history(result))
    (arguments,) = _history_arguments(history)
    assert value_depth(arguments) == DEEPEST and arguments["s"] == "secret-ish"


def test_cli_json_and_history_of_the_deepest_committable_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture, config = tmp_path / "deep.sse", tmp_path / "cfg.yaml"
    capture.write_bytes(openai_text(DEEPEST))
    config.write_text(f"agent_stream_assemble:\n  max_tool_argument_depth: {DEEPEST}\n")
    assert main(["assemble", "--json", "--config", str(config), str(capture)]) == 0
    doc = json.loads(capsys.readouterr().out)
    call = doc["streams"][0]["calls"][0]
    assert call["state"] == "committed" and value_depth(call["arguments"]) == DEEPEST
    assert json.loads(doc["streams"][0]["history"][0]["tool_calls"][0]["function"]["arguments"]) == call["arguments"]
    assert main(["assemble", "--history", "--config", str(config), str(capture)]) == 0
    assert '"name": "f"' in capsys.readouterr().out


def test_the_reproducer_of_deep_argument_objects(tmp_path: Path) -> None:
    for make in (gemini, anthropic):
        data = make(700)
        out = redact_capture(data, "deep.sse").decode()
        assert "secret-ish" not in out and text_depth(out.split("data: ", 2)[-1]) >= 700
        assert [c.reason for c in assemble(out.encode()).calls] == [c.reason for c in assemble(data).calls]


# ------------------------------------------------------------------ the dashboard


def test_pretty_arguments_indents_shallow_and_flattens_deep_values() -> None:
    shallow = {"a": deep_list(MAX_INDENTED_DEPTH - 1)}
    assert pretty_arguments(shallow) == json.dumps(shallow, indent=2)
    deep = {"a": deep_list(DEEPEST - 1), "s": "x"}
    text = on_a_deep_stack(lambda: pretty_arguments(deep))
    assert text == f"(nested {DEEPEST} levels deep: shown without indentation)\n" + json.dumps(deep)


def test_document_response_encodes_any_depth_like_json_response() -> None:
    value = {"a": deep_list(3000), "n": [1.5, None, "é"]}
    body = on_a_deep_stack(lambda: DocumentResponse(value).body)
    assert body == ('{"a":' + "[" * 3000 + "]" * 3000 + ',"n":[1.5,null,"é"]}').encode()


@pytest.mark.parametrize("kind", ["openai-text", "gemini"])
def test_the_dashboard_shows_the_deepest_committable_arguments(tmp_path: Path, kind: str) -> None:
    with make_client(Settings(data_dir=tmp_path, config=CEILING)) as client:
        quiet = TestClient(client.app, base_url=BASE, raise_server_exceptions=False)
        response = quiet.post("/sessions/upload", files={"file": ("deep.sse", CAPTURES[kind](DEEPEST), "text/plain")}, data={"rate": "max"}, follow_redirects=False)
        assert response.status_code == 303
        sid = response.headers["location"].rsplit("/", 1)[1]
        with quiet.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
            frames = [ws.receive_text()]
            quiet.post(f"/sessions/{sid}/control", data={"action": "restart"}, headers={"HX-Request": "true"})
            quiet.post(f"/sessions/{sid}/control", data={"action": "play"}, headers={"HX-Request": "true"})
            while 'data-state="committed"' not in frames[-1]:
                frames.append(ws.receive_text())
        statuses = {p: quiet.get(f"/sessions/{sid}{p}").status_code for p in ("/triage", "/export.sse", "/export.report.json", "/export.md")}
        statuses["compare"] = quiet.get(f"/compare?a={sid}&b={sid}").status_code
        page = quiet.get(f"/sessions/{sid}")
        twin = quiet.get(f"/api/sessions/{sid}")
    assert statuses == {"/triage": 200, "/export.sse": 200, "/export.report.json": 200, "/export.md": 200, "compare": 200}
    note = f"(nested {DEEPEST} levels deep: shown without indentation)"
    assert page.status_code == 200 and note in page.text and note in frames[-1]
    assert twin.status_code == 200
    (call,) = twin.json()["streams"][0]["calls"]
    assert call["state"] == "committed" and value_depth(call["arguments"]) == DEEPEST


def test_the_dashboard_names_the_reason_for_deeper_arguments(tmp_path: Path) -> None:
    with make_client(Settings(data_dir=tmp_path)) as client:
        response = client.post("/sessions/upload", files={"file": ("deep.sse", anthropic(950), "text/plain")}, data={"rate": "max"}, follow_redirects=False)
        sid = response.headers["location"].rsplit("/", 1)[1]
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": "5"})
        page = client.get(f"/sessions/{sid}").text
        doc = client.get(f"/api/sessions/{sid}").json()
    assert [c["reason"] for c in doc["calls"]] == ["arguments_too_deep: nested 950 levels deep; the limit is 64"]
    assert re.search(r"Verdict: FAILED</strong> — <span class=\"reason\">arguments_too_deep: nested 950 levels deep", page)


# ------------------------------------------------------------------ live bodies


def test_a_request_body_nested_too_deep_to_read_is_a_clear_error_not_a_500(tmp_path: Path) -> None:
    body = '{"model": "single", "stream": true, "messages": [], "metadata": ' + "[" * 5000 + "]" * 5000 + "}"
    with make_client(Settings(data_dir=tmp_path, mock_delay=0.0)) as client:
        response = client.post("/proxy/openai/v1/chat/completions", content=body, headers={"content-type": "application/json"})
        sessions = client.get("/api/live").json()["sessions"]
        index = client.get("/")
    assert response.status_code == 400 and response.json()["error"]["message"] == "The request body is not JSON (nesting too deep)."
    assert sessions == [] and index.status_code == 200  # a request the mock refuses leaves no session


def test_an_upstream_error_body_nested_too_deep_is_described_without_detail() -> None:
    from toollatch.web.live.session import describe_error

    assert describe_error(500, b'{"error": ' + b"[" * 5000 + b"]" * 5000 + b"}") == "Upstream answered 500."
