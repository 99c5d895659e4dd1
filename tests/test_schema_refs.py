"""Schema ``$ref``s: resolved within the schema only, never fetched, and a ``$ref`` that does
not resolve fails that tool's calls (or refuses a tools file) without stopping the stream."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import toollatch.core.registry as registry_module
from toollatch import ToolRegistry, assemble_events, read_capture
from toollatch.cli import main
from toollatch.core.finalize import check_arguments
from toollatch.core.model import CallState
from toollatch.core.registry import RegistryError, SchemaUnusable

CANARY = "CANARYref_7e21"


@pytest.fixture(autouse=True)
def fresh_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registries are reused by their schemas (:func:`toollatch.core.registry._cached`); the tests
    here patch how one is built, so each builds its own."""
    monkeypatch.setattr(registry_module, "_BUILT", type(registry_module._BUILT)())


def _tools(**schemas: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": name, "parameters": schema}} for name, schema in schemas.items()]


def _chat(*calls: tuple[str, str, str]) -> bytes:
    entries = [{"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": args}} for i, (cid, name, args) in enumerate(calls)]
    docs = [{"choices": [{"index": 0, "delta": {"tool_calls": entries}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    return ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n").encode()


def _assemble(data: bytes, registry: ToolRegistry) -> Any:
    (result,) = assemble_events(read_capture(data), registry=registry)
    return result


@pytest.mark.parametrize(
    ("schema", "pointer", "why"),
    [
        ({"$ref": f"#/definitions/{CANARY}"}, "/$ref", "does not resolve"),
        ({"type": "object", "properties": {"a/b": {"$ref": f"#/$defs/{CANARY}"}}}, "/properties/a~1b/$ref", "does not resolve"),
        ({"type": "object", "properties": {"a": {"$ref": f"#{CANARY}"}}}, "/properties/a/$ref", "does not resolve"),  # no such $anchor
        ({"type": "object", "properties": {"a": {"$ref": f"https://{CANARY}.example/s.json"}}}, "/properties/a/$ref", "does not resolve"),
        ({"type": "object", "required": ["a"], "properties": {"a": {"$ref": "#/required"}}}, "/properties/a/$ref", "does not point to a schema"),
        ({"x-defs": {"a": {"$ref": f"#/x-defs/{CANARY}"}}, "properties": {"p": {"$ref": "#/x-defs/a"}}}, "/x-defs/a/$ref", "does not resolve"),
    ],
    ids=["root", "nested", "anchor", "remote", "not-a-schema", "followed-ref"],
)
def test_a_ref_that_does_not_resolve_is_named_by_its_place_without_quoting_it(schema: dict[str, Any], pointer: str, why: str) -> None:
    registry = ToolRegistry.from_tools(_tools(f=schema, g={"type": "object"}))
    assert list(registry.unusable) == ["f"]
    assert registry.unusable["f"].startswith(f"$ref at {pointer} {why}")
    with pytest.raises(RegistryError) as info:
        registry.ensure_usable()
    assert str(info.value).startswith(f"tool 'f': invalid JSON Schema: $ref at {pointer} {why}")
    assert CANARY not in str(info.value)


@pytest.mark.parametrize(
    "schema",
    [
        {"$defs": {"n": {"type": "integer"}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}},
        {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "properties": {"a": {"$ref": "#/$defs/n"}}},
        {"$defs": {"x": {"$anchor": "name", "type": "string"}}, "properties": {"a": {"$ref": "#name"}}},
        {"$id": "https://tools.example/root", "$defs": {"s": {"$id": "sub", "$defs": {"x": {"type": "string"}}, "properties": {"y": {"$ref": "#/$defs/x"}}}}, "properties": {"z": {"$ref": "sub"}}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/definitions/a"}}},
        {"type": "object", "properties": {"meta": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}},
        # data that looks like a reference is not one
        {"type": "object", "default": {"$ref": "#/nowhere"}, "properties": {"e": {"enum": [{"$ref": "#/nowhere"}]}}},
    ],
    ids=["defs", "recursive", "anchor", "id-scopes", "draft-07", "meta-schema", "data"],
)
def test_refs_that_resolve_are_usable(schema: dict[str, Any]) -> None:
    registry = ToolRegistry.from_tools(_tools(f=schema))
    assert registry.unusable == {} and registry.ensure_usable() is registry


def test_the_other_tools_are_still_judged_and_the_call_names_the_place() -> None:
    registry = ToolRegistry.from_tools(_tools(f={"type": "object", "properties": {"a": {"$ref": f"#/$defs/{CANARY}"}}}, g={"type": "object", "required": ["k"]}))
    result = _assemble(_chat(("c1", "f", '{"a": 1}'), ("c2", "g", "{}"), ("c3", "g", '{"k": 1}')), registry)
    assert [(c.call_id, c.state) for c in result.calls] == [("c1", CallState.FAILED), ("c2", CallState.FAILED), ("c3", CallState.COMMITTED)]
    assert result.calls[0].reason == (
        "schema_invalid: the tool's JSON Schema cannot be applied: $ref at /properties/a/$ref does not resolve "
        "(only references within the schema are followed)"
    )
    assert result.calls[1].reason is not None and result.calls[1].reason.startswith("schema_invalid: /: required")
    assert [r.tool_call_id for r in result.results] == ["c1", "c2"]
    assert CANARY not in json.dumps(result.to_json())


def test_a_remote_ref_is_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    fetched: list[Any] = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: fetched.append(a) or (_ for _ in ()).throw(OSError("no network")))
    schema = {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/schema.json"}}}
    registry = ToolRegistry.from_tools(_tools(f=schema))
    # even when the walk at load time could not see it, validation fetches nothing
    monkeypatch.setattr(registry, "unusable", {})
    with pytest.raises(SchemaUnusable) as info:
        registry.validate("f", {"a": 1})
    assert info.value.problem == "a $ref met while validating does not resolve" and "127.0.0.1" not in str(info.value)
    assert fetched == []


def test_a_ref_found_only_while_validating_fails_the_call_not_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "_unresolved_ref", lambda cls, schema: None)  # as if the walk could not tell
    registry = ToolRegistry.from_tools(_tools(f={"$ref": f"#/definitions/{CANARY}"}, g={"type": "object"}))
    result = _assemble(_chat(("c1", "f", '{"a": 1}'), ("c2", "g", "{}")), registry)
    assert [c.state for c in result.calls] == [CallState.FAILED, CallState.COMMITTED]
    assert result.calls[0].reason == "schema_invalid: the tool's JSON Schema cannot be applied: a $ref met while validating does not resolve"
    assert CANARY not in json.dumps(result.to_json())


def test_any_other_fault_of_the_schema_check_fails_the_call_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = ToolRegistry.from_tools(_tools(f={"type": "object"}))

    def broken(name: str, arguments: Any) -> Any:
        raise ValueError(f"validator fault quoting {CANARY}")

    monkeypatch.setattr(registry, "validate", broken)
    verdict = check_arguments('{"a": 1}', "f", registry=registry)
    assert verdict.arguments is None and verdict.reason == "schema_invalid: the schema check failed (ValueError)"


def test_a_tools_file_with_such_a_ref_is_refused_by_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(_tools(f={"$ref": f"#/definitions/{CANARY}"})), encoding="utf-8")
    with pytest.raises(RegistryError) as info:
        ToolRegistry.load(tools)
    assert str(info.value) == f"{tools}: tool 'f': invalid JSON Schema: $ref at /$ref does not resolve (only references within the schema are followed)"
    capture = tmp_path / "c.sse"
    capture.write_bytes(_chat(("c1", "f", "{}")))
    assert main(["assemble", str(capture), "--tools", str(tools)]) != 0
    out = capsys.readouterr()
    assert "$ref at /$ref does not resolve" in out.err and "Traceback" not in out.err and CANARY not in out.out + out.err


# ------------------------------------------------------------------ the dashboard's doors refuse such a tools file


@pytest.fixture
def client(tmp_path: Path) -> Any:
    from starlette.testclient import TestClient

    from toollatch.web import Settings, create_app

    from .test_web_app import BASE

    with TestClient(create_app(Settings(data_dir=tmp_path, mock_delay=0.0)), base_url=BASE, raise_server_exceptions=False) as c:
        yield c


BAD_REF_TOOLS = _tools(f={"type": "object", "properties": {"a": {"$ref": f"#/$defs/{CANARY}"}}})
REFUSED = "tool 'f': invalid JSON Schema: $ref at /properties/a/$ref does not resolve (only references within the schema are followed)"


def test_an_uploaded_tools_file_with_such_a_ref_is_a_422_naming_it(client: Any) -> None:
    import html

    files = {"file": ("c.sse", _chat(("c1", "f", "{}")), "text/event-stream"), "tools": ("tools.json", json.dumps(BAD_REF_TOOLS).encode(), "application/json")}
    response = client.post("/sessions/upload", files=files, data={"rate": "max"})
    assert response.status_code == 422 and f"Tools file tools.json: {REFUSED}" in html.unescape(response.text)
    assert CANARY not in response.text


def test_a_har_whose_request_tools_hold_such_a_ref_is_a_422_naming_it(client: Any) -> None:
    import html

    entry = {
        "request": {"method": "POST", "url": "https://api/v1/chat/completions", "postData": {"text": json.dumps({"stream": True, "tools": BAD_REF_TOOLS})}},
        "response": {"status": 200, "content": {"mimeType": "text/event-stream", "text": _chat(("c1", "f", "{}")).decode()}},
    }
    har = json.dumps({"log": {"entries": [entry]}}).encode()
    response = client.post("/sessions/upload", files={"file": ("c.har", har, "application/octet-stream")}, data={"rate": "max"})
    assert response.status_code == 422 and f"c.har#entry0: the request's tools cannot be used: {REFUSED}" in html.unescape(response.text)
    assert CANARY not in response.text


def test_direct_connect_refuses_such_a_ref(client: Any) -> None:
    import html

    data = {"upstream": "mock", "api": "chat", "model": "single", "tools": json.dumps(BAD_REF_TOOLS), "prompt": "x"}
    response = client.post("/connect", data=data, follow_redirects=False)
    assert response.status_code == 400 and f"The tools cannot be used: {REFUSED}." in html.unescape(response.text)
    assert CANARY not in response.text
