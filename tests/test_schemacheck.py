"""Schema checks are bounded: a pattern that backtracks catastrophically, a quadratic
``uniqueItems`` or a huge schema fails the call (``schema_check_timeout``) or refuses the
tools file, within a limit, instead of hanging the CLI or the event loop.

The end-to-end tests run the CLI in a subprocess with a generous cap on its run time: only so
that, were the check unbounded, the test fails instead of hanging the suite (``re`` needs
hours for these inputs); nothing here asserts how fast anything is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toollatch.core.registry as registry_module
from toollatch import ToolRegistry, assemble_events, read_capture
from toollatch.core.finalize import check_arguments
from toollatch.core.model import CallState
from toollatch.core.registry import RegistryError
from toollatch.core.schemacheck import MAX_PATTERN_CHARS, MAX_SCHEMA_NODES, CheckBudget, SchemaCheckTimeout, search, time_limit

#: Backtracks exponentially in ``re`` *and* in the ``regex`` package on "a" * n + "!".
EXPONENTIAL = "^(a|a)*$"
#: Exponential in ``re``; the ``regex`` package answers it at once.
NESTED = "^(a+)+$"
HOSTILE = "a" * 40 + "!"
#: The subprocess's cap: far above any bounded run, far below the unbounded one.
NEVER = 120


@pytest.fixture(autouse=True)
def fresh_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "_BUILT", type(registry_module._BUILT)())


def _tools(**schemas: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": name, "parameters": schema}} for name, schema in schemas.items()]


def _chat(*calls: tuple[str, str, str]) -> bytes:
    entries = [{"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": args}} for i, (cid, name, args) in enumerate(calls)]
    docs = [{"choices": [{"index": 0, "delta": {"tool_calls": entries}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    return ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n").encode()


def _string_with(pattern: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}


def _cli(tmp_path: Path, tools: Any, capture: bytes) -> subprocess.CompletedProcess[str]:
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    (tmp_path / "cap.sse").write_bytes(capture)
    args = [sys.executable, "-m", "toollatch.cli", "assemble", "--json", "--tools", str(tmp_path / "tools.json"), str(tmp_path / "cap.sse")]
    return subprocess.run(args, capture_output=True, text=True, timeout=NEVER)


# ------------------------------------------------------------------ end to end: the CLI


def test_the_cli_fails_a_call_whose_pattern_check_cannot_finish(tmp_path: Path) -> None:
    tools = _tools(f=_string_with(EXPONENTIAL), g={"type": "object"})
    done = _cli(tmp_path, tools, _chat(("c1", "f", json.dumps({"s": HOSTILE})), ("c2", "g", "{}")))
    assert done.returncode == 0, done.stderr
    calls = json.loads(done.stdout)["streams"][0]["calls"]
    assert [c["state"] for c in calls] == ["failed", "committed"]
    assert calls[0]["reason"].startswith("schema_check_timeout: the schema check did not finish within 50 ms")
    assert HOSTILE not in done.stdout


def test_the_cli_judges_a_nested_quantifier_pattern_without_backtracking(tmp_path: Path) -> None:
    done = _cli(tmp_path, _tools(f=_string_with(NESTED)), _chat(("c1", "f", json.dumps({"s": HOSTILE}))))
    assert done.returncode == 0, done.stderr
    (call,) = json.loads(done.stdout)["streams"][0]["calls"]
    assert call["state"] == "failed" and call["reason"] == 'schema_invalid: /s: pattern "^(a+)+$"'


def test_the_cli_checks_a_tools_file_of_unsortable_unique_items_in_linear_time(tmp_path: Path) -> None:
    # draft-04's meta-schema says "enum" is uniqueItems; ints mixed with strings cannot be
    # sorted, so jsonschema compared them pairwise: 15,000 items, 10^8 comparisons
    values = [v for i in range(7_500) for v in (i, str(i))]
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "properties": {"k": {"enum": values}}}
    done = _cli(tmp_path, _tools(f=schema), _chat(("c1", "f", '{"k": "7"}'), ("c2", "f", '{"k": 7.0}'), ("c3", "f", '{"k": true}')))
    assert done.returncode == 0, done.stderr
    calls = json.loads(done.stdout)["streams"][0]["calls"]
    assert [c["state"] for c in calls] == ["committed", "committed", "failed"]


def test_the_cli_refuses_a_tools_file_too_large_to_check_in_one_line(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(MAX_SCHEMA_NODES)}}
    done = _cli(tmp_path, _tools(f=schema), _chat(("c1", "f", "{}")))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "tool 'f'" in done.stderr and f"more than {MAX_SCHEMA_NODES:,} nodes" in done.stderr


# ------------------------------------------------------------------ the checks


@pytest.mark.parametrize(
    "schema",
    [
        _string_with(EXPONENTIAL),
        {"type": "object", "patternProperties": {EXPONENTIAL: {"type": "string"}}},
        {"type": "object", "patternProperties": {EXPONENTIAL: {}}, "additionalProperties": False},
        {"type": "object", "patternProperties": {EXPONENTIAL: {}}, "unevaluatedProperties": False},
        {"type": "object", "allOf": [{"patternProperties": {EXPONENTIAL: {}}}], "unevaluatedProperties": False},
        {"type": "object", "propertyNames": {"pattern": EXPONENTIAL}},
    ],
    ids=["pattern", "patternProperties", "additionalProperties", "unevaluatedProperties", "unevaluated-allOf", "propertyNames"],
)
def test_every_keyword_that_searches_a_pattern_is_bounded(schema: dict[str, Any]) -> None:
    registry = ToolRegistry.from_tools(_tools(f=schema))
    text = json.dumps({"s": HOSTILE, HOSTILE: "x"})
    verdict = check_arguments(text, "f", registry=registry)
    assert verdict.arguments is None and (verdict.reason or "").startswith("schema_check_timeout: ")
    assert HOSTILE not in (verdict.reason or "")


def test_a_ref_back_to_a_root_that_names_its_draft_stays_bounded() -> None:
    # jsonschema picks a subschema's class by its $schema: the unbounded one, were it not kept
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {"s": {"type": "string", "pattern": EXPONENTIAL}, "child": {"$ref": "#"}},
    }
    registry = ToolRegistry.from_tools(_tools(f=schema))
    verdict = check_arguments(json.dumps({"child": {"child": {"s": HOSTILE}}}), "f", registry=registry)
    assert (verdict.reason or "").startswith("schema_check_timeout: ")


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        ({"type": "object", "patternProperties": {"^x_": {"type": "integer"}}, "additionalProperties": False}, {"x_a": 1}, {"y": 1}),
        ({"type": "object", "patternProperties": {"^x_": {"type": "integer"}}}, {"x_a": 1, "y": "s"}, {"x_a": "s"}),
        ({"type": "object", "allOf": [{"patternProperties": {"^x_": {}}}], "unevaluatedProperties": False}, {"x_a": 1}, {"y": 1}),
        ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^[a-z]+$"}}}, {"s": "abc"}, {"s": "ab1"}),
        ({"type": "object", "properties": {"u": {"type": "array", "uniqueItems": True}}}, {"u": [1, True, "1", [1], {"a": 1}, {"a": True}]}, {"u": [{"a": 1, "b": 2}, {"b": 2, "a": 1.0}]}),
    ],
)
def test_bounded_keywords_keep_their_meaning(schema: dict[str, Any], good: Any, bad: Any) -> None:
    registry = ToolRegistry.from_tools(_tools(f=schema))
    assert registry.validate("f", good) == []
    assert registry.validate("f", bad) != []


def test_unique_items_of_many_unsortable_items_is_linear() -> None:
    registry = ToolRegistry.from_tools(_tools(f={"type": "object", "properties": {"u": {"type": "array", "uniqueItems": True}}}))
    items: list[Any] = [{"n": i} for i in range(20_000)]
    assert check_arguments(json.dumps({"u": items}), "f", registry=registry).reason is None
    assert (check_arguments(json.dumps({"u": [*items, {"n": 5}]}), "f", registry=registry).reason or "").startswith("schema_invalid: /u: uniqueItems")


def test_a_search_past_its_limit_raises() -> None:
    with time_limit(0.0), pytest.raises(SchemaCheckTimeout):
        search("^a$", "a")
    assert search("^a$", "a")  # no limit in force


def test_calls_finalized_together_share_one_budget() -> None:
    budget = CheckBudget(total=0.0)  # spent: every check left times out at its first pattern
    registry = ToolRegistry.from_tools(_tools(f=_string_with("^[a-z]+$")))
    verdict = check_arguments('{"s": "abc"}', "f", registry=registry, schema_budget=budget)
    assert (verdict.reason or "").startswith("schema_check_timeout: ")


def test_a_stream_of_many_hostile_calls_fails_each_within_one_budget() -> None:
    registry = ToolRegistry.from_tools(_tools(f=_string_with(EXPONENTIAL), g={"type": "object"}))
    calls = [(f"c{i}", "f", json.dumps({"s": HOSTILE})) for i in range(8)] + [("ok", "g", "{}")]
    (result,) = assemble_events(read_capture(_chat(*calls)), registry=registry)
    assert [c.state for c in result.calls] == [CallState.FAILED] * 8 + [CallState.COMMITTED]
    assert all((c.reason or "").startswith("schema_check_timeout: ") for c in result.calls[:8])


# ------------------------------------------------------------------ building a registry


def test_a_meta_schema_check_past_its_limit_makes_the_tool_unusable_not_the_registry() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(50)}}
    registry = ToolRegistry({"f": schema}, build_seconds=0.0)
    assert list(registry.unusable) == ["f"]
    verdict = check_arguments("{}", "f", registry=registry)
    assert (verdict.reason or "").startswith("schema_check_timeout: the JSON Schema's own check did not finish")
    with pytest.raises(RegistryError, match=r"^tool 'f': schema_check_timeout: "):
        registry.ensure_usable()


def test_a_pattern_too_long_to_compile_cheaply_makes_the_tool_unusable() -> None:
    schema = _string_with("(a|b)" * MAX_PATTERN_CHARS)
    registry = ToolRegistry.from_tools(_tools(f=schema, g={"type": "object"}))
    assert registry.unusable == {"f": f"the pattern at /properties/s/pattern is longer than {MAX_PATTERN_CHARS:,} characters"}
    assert (check_arguments("{}", "f", registry=registry).reason or "").startswith("schema_invalid: ")
    assert check_arguments("{}", "g", registry=registry).reason is None


def test_a_pattern_the_engine_cannot_compile_breaks_the_meta_schema() -> None:
    with pytest.raises(RegistryError, match=r"^tool 'f': invalid JSON Schema: /properties/s/pattern breaks the meta-schema's 'format' rule"):
        ToolRegistry.from_tools(_tools(f=_string_with("(unclosed")))


def test_the_same_tools_build_one_registry() -> None:
    tools = _tools(f=_string_with("^[a-z]+$"))
    assert ToolRegistry.from_tools(tools) is ToolRegistry.from_tools(json.loads(json.dumps(tools)))
