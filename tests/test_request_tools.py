"""A request's ``tools`` of any JSON shape: names are listed from what is a tool, the rest is
skipped; the registry is built only when the whole array is usable; no page, JSON twin,
recording or replay of a recording fails because of them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from toollatch.demo.demos import DEMOS
from toollatch.core.registry import RegistryError
from toollatch.web import Settings, create_app
from toollatch.web.live.session import LiveSource, usable_registry
from toollatch.web.triage.sources import registry_from_tools
from toollatch.web.store import Store, tool_names

from .test_web_app import BASE, upload

GOOD = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}

#: ``tools`` values a client may send; none of them is a usable registry.
ODD_TOOLS: dict[str, Any] = {
    "declarations not a list": [GOOD, {"functionDeclarations": 5}],
    "declarations a string": [{"functionDeclarations": "get_weather"}],
    "declarations an object": [{"function_declarations": {"name": "x"}}],
    "tools an object": {"function": {"name": "get_weather"}},
    "tools a number": 7,
    "tools a string": "get_weather",
    "a tool not an object": [GOOD, 5, None, ["x"]],
    "a name not a string": [{"name": 5}, {"function": {"name": ["x"]}}, {"functionDeclarations": [{"name": {"a": 1}}]}],
    "function not an object": [{"type": "function", "function": "get_weather"}],
    "schema $schema a list": [{"name": "f", "input_schema": {"$schema": [1]}}],
    "schema $schema a number": [{"name": "f", "input_schema": {"$schema": 5}}],
    "schema not an object": [{"name": "f", "input_schema": [1, 2]}],
}


@pytest.mark.parametrize(
    ("tools", "names"),
    [
        (None, []),
        (5, []),
        ("abc", []),
        ({"name": "f"}, []),
        ([5, "f", None, [{"name": "f"}]], []),
        ([{"function": 5}, {"function": {"name": 5}}, {"name": ["x"]}], []),
        ([{"functionDeclarations": 5}, {"functionDeclarations": "abc"}, {"functionDeclarations": {"name": "x"}}], []),
        ([{"functionDeclarations": [5, {"name": 7}, {"name": "a"}], "function_declarations": [{"name": "b"}, "c"]}], ["a", "b"]),
        ([GOOD, {"name": "search"}, {"type": "function", "name": "search"}, {"name": ""}], ["get_weather", "search"]),
    ],
)
def test_tool_names_skips_whatever_is_not_a_tool(tools: Any, names: list[str]) -> None:
    assert tool_names(tools) == names


@pytest.mark.parametrize("tools", list(ODD_TOOLS.values()), ids=list(ODD_TOOLS))
def test_odd_tools_are_a_registry_error_or_no_registry_never_another_exception(tools: Any) -> None:
    with pytest.raises(RegistryError):
        registry_from_tools(tools)
    assert usable_registry(tools) is None
    source = LiveSource("up/v1/messages", upstream="up", endpoint="/v1/messages", dialect="anthropic", request={"tools": tools})
    assert source.registry() is None
    meta = source.meta()
    assert meta["tools"] == (tool_names(tools) if isinstance(tools, list) else None)
    if isinstance(tools, list):
        assert "could not be used as a registry" in source.description


def test_the_store_saves_and_searches_a_recording_whose_tools_are_odd(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for label, tools in ODD_TOOLS.items():
        rid = store.save(kind="recording", name=label, body=b"data: {}\n\n", tools=tools if isinstance(tools, list) else None)
        assert store.get(rid) is not None
    assert [s.name for s in store.search(tool="get_weather")] == ["declarations not a list", "a tool not an object"]


def _wait_recorded(client: TestClient) -> Any:
    (session,) = client.app.state.store.live_sessions()  # type: ignore[attr-defined]
    for _ in range(300):  # the recording is written in a worker thread just after the end
        if session.status.done and session.live_source.recording:
            return session
        time.sleep(0.01)
    raise AssertionError("the recording was not saved")


@pytest.mark.parametrize("tools", list(ODD_TOOLS.values()), ids=list(ODD_TOOLS))
@pytest.mark.parametrize("endpoint", ["/v1/chat/completions", "/v1/messages"], ids=["openai-chat", "anthropic"])
def test_a_proxied_request_with_odd_tools_leaves_every_page_and_the_recording_working(tmp_path: Path, tools: Any, endpoint: str) -> None:
    app = create_app(Settings(data_dir=tmp_path, mock_delay=0.0))
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as client:
        answer = client.post(f"/proxy/openai{endpoint}", json={"model": "single", "stream": True, "tools": tools, "max_tokens": 64})
        assert answer.status_code == 200
        session = _wait_recorded(client)
        assert session.status.value == "finished" and session.error is None
        urls = ["/", "/api/sessions", f"/api/sessions/{session.id}", "/api/live", f"/sessions/{session.id}",
                f"/sessions/{session.id}/recording", "/partials/sessions"]
        assert {url: client.get(url).status_code for url in urls} == {url: 200 for url in urls}
        replayed = client.post(f"/recordings/{session.live_source.recording}/replay", headers={"accept": "application/json"})
        assert replayed.status_code == 201, replayed.text
        doc = client.get(f"/api/sessions/{replayed.json()['id']}").json()
        assert doc["source"]["tools"] is None  # as the live session: tools that cannot be used check nothing
        assert client.get(f"/sources/{session.live_source.recording}", follow_redirects=False).status_code in (200, 303)


@pytest.mark.parametrize("schema", [{"$schema": [1]}, {"$schema": 5}], ids=["$schema a list", "$schema a number"])
def test_an_upload_whose_tools_file_has_a_schema_the_library_trips_over_is_a_clear_422(tmp_path: Path, schema: dict[str, Any]) -> None:
    import json

    tools = json.dumps([{"type": "function", "function": {"name": "get_weather", "parameters": schema}}]).encode()
    with TestClient(create_app(Settings(data_dir=tmp_path)), base_url=BASE, raise_server_exceptions=False) as client:
        response = upload(client, "ok.sse", DEMOS["openai-single"].wire, tools=tools)
        assert response.status_code == 422, response.status_code
        assert "tools.json" in response.text and "/$schema must be a string" in response.text and "Traceback" not in response.text


@pytest.mark.parametrize(
    ("tools", "named"),
    [
        ('[{"name": "f", "parameters": {"$schema": [1]}}]', "/$schema must be a string"),
        ('[{"name": "f", "parameters": {"$schema": 5}}]', "/$schema must be a string"),
        ("[5]", "Each tool must be a JSON object"),
        ('[{"function": 5}]', 'Each tool needs a \\"name\\"'),
        ('{"tools": 5}', "Tools must be a JSON array"),
    ],
    ids=["$schema a list", "$schema a number", "a tool not an object", "function not an object", "tools not an array"],
)
def test_direct_connect_refuses_odd_tools_with_a_clear_400(tmp_path: Path, tools: str, named: str) -> None:
    from html import unescape

    with TestClient(create_app(Settings(data_dir=tmp_path)), base_url=BASE, raise_server_exceptions=False) as client:
        response = client.post("/connect", data={"upstream": "mock", "api": "chat", "model": "single", "tools": tools, "prompt": "go"})
        assert response.status_code == 400, response.status_code
        assert named.replace("\\", "") in unescape(response.text) and "Traceback" not in response.text
        assert client.get("/api/live").json()["sessions"] == []
