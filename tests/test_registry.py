"""ToolRegistry: the tools array a client sent, in each provider's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toollatch.core.registry import RegistryError, ToolRegistry

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

OPENAI_CHAT = [{"type": "function", "function": {"name": "get_weather", "description": "d", "parameters": SCHEMA}}]
OPENAI_RESPONSES = [{"type": "function", "name": "get_weather", "description": "d", "parameters": SCHEMA, "strict": True}]
ANTHROPIC = [{"name": "get_weather", "description": "d", "input_schema": SCHEMA}]


@pytest.mark.parametrize("tools", [OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC], ids=["openai-chat", "openai-responses", "anthropic"])
def test_each_provider_shape_registers_name_and_schema(tools: list) -> None:
    registry = ToolRegistry.from_tools(tools)
    assert registry.names == ["get_weather"]
    assert "get_weather" in registry
    assert "other" not in registry
    assert registry.validate("get_weather", {"city": "Oslo"}) == []
    issues = registry.validate("get_weather", {})
    assert [(i.pointer, i.keyword) for i in issues] == [("/", "required")]


@pytest.mark.parametrize("tools", [OPENAI_CHAT, ANTHROPIC], ids=["openai-chat", "anthropic"])
def test_tools_wrapper_object(tools: list) -> None:
    registry = ToolRegistry.from_tools({"model": "m", "tools": tools})
    assert registry.names == ["get_weather"]


def test_several_tools_keep_order_and_server_tool_without_schema() -> None:
    registry = ToolRegistry.from_tools(
        [
            {"name": "b_tool", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
            {"name": "a_tool", "input_schema": {"type": "object"}},
        ]
    )
    assert registry.names == ["b_tool", "web_search", "a_tool"]
    # a tool without a schema accepts anything
    assert registry.validate("web_search", {"anything": [1, 2]}) == []


def test_issue_pointer_escapes_and_sorts() -> None:
    registry = ToolRegistry.from_tools(
        [{"name": "t", "input_schema": {"type": "object", "properties": {"a/b": {"type": "integer"}, "c~d": {"type": "integer"}}}}]
    )
    issues = registry.validate("t", {"c~d": "x", "a/b": "y"})
    assert [i.pointer for i in issues] == ["/a~1b", "/c~0d"]
    assert all(i.keyword == "type" and i.expected == '"integer"' for i in issues)


def test_issue_message_may_quote_the_value_but_expected_does_not() -> None:
    registry = ToolRegistry.from_tools(ANTHROPIC)
    (issue,) = registry.validate("get_weather", {"city": 12345678})
    assert issue.pointer == "/city"
    assert "12345678" in issue.message
    assert "12345678" not in issue.expected


def test_invalid_schema_is_rejected_with_the_tool_name() -> None:
    with pytest.raises(RegistryError) as info:
        ToolRegistry.from_tools([{"name": "broken_tool", "input_schema": {"type": "strng"}}])
    assert "broken_tool" in str(info.value)
    assert "schema" in str(info.value).lower()


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object", "properties": {"x": {"type": "sk-live-CANARY42"}}}, "/properties/x/type breaks the meta-schema's 'anyOf' rule"),
        ({"type": "object", "required": "sk-live-CANARY42"}, "/required must be of type array"),
        ({"minLength": "sk-live-CANARY42"}, "/minLength must be of type integer"),
        ({"properties": {"a/b~": {"enum": "sk-live-CANARY42"}}}, "/properties/a~1b~0/enum must be of type array"),
    ],
)
def test_an_invalid_schema_is_named_by_place_and_rule_without_quoting_it(schema: dict, message: str) -> None:
    with pytest.raises(RegistryError) as info:
        ToolRegistry.from_tools([{"name": "t", "input_schema": schema}])
    assert str(info.value) == f"tool 't': invalid JSON Schema: {message}"


@pytest.mark.parametrize(
    "tools",
    [
        [{"type": "function", "function": {"parameters": SCHEMA}}],
        [{"input_schema": SCHEMA}],
        [{"name": "", "input_schema": SCHEMA}],
        [{"name": 3}],
    ],
)
def test_missing_name_is_rejected(tools: list) -> None:
    with pytest.raises(RegistryError, match=r"tools\[0\]: missing 'name'"):
        ToolRegistry.from_tools(tools)


def test_missing_name_names_the_entry() -> None:
    with pytest.raises(RegistryError, match=r"tools\[1\]"):
        ToolRegistry.from_tools([ANTHROPIC[0], {"input_schema": SCHEMA}])


@pytest.mark.parametrize("doc", [{"not_tools": []}, "tools", 3, None, [1]])
def test_wrong_shapes_are_rejected(doc: object) -> None:
    with pytest.raises(RegistryError):
        ToolRegistry.from_tools(doc)


def test_schema_that_is_not_an_object_is_rejected() -> None:
    with pytest.raises(RegistryError, match="t"):
        ToolRegistry.from_tools([{"name": "t", "input_schema": "string"}])


def test_load_from_file(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"tools": OPENAI_CHAT}), encoding="utf-8")
    assert ToolRegistry.load(path).names == ["get_weather"]


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(RegistryError, match="bad.json"):
        ToolRegistry.load(bad)
    with pytest.raises(RegistryError, match="missing.json"):
        ToolRegistry.load(tmp_path / "missing.json")
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps([{"name": "x", "input_schema": {"type": 5}}]), encoding="utf-8")
    with pytest.raises(RegistryError) as info:
        ToolRegistry.load(invalid)
    assert "invalid.json" in str(info.value) and "'x'" in str(info.value)
