"""A committed call's string values that its tool's schema publishes (``enum`` members,
``const``) stay in a redacted reproducer, so its replay passes the same schema check;
every other string is masked, and a call that did not commit keeps nothing."""

from __future__ import annotations

import json
from typing import Any

from toollatch import Pipeline, read_capture
from toollatch.redaction.export import committed_calls, redact_capture
from toollatch.redaction.published import mask_keeping, published_strings
from toollatch.core.registry import ToolRegistry

WEATHER = {
    "type": "object",
    "properties": {
        "unit": {"enum": ["c", "f"]},
        "city": {"type": "string"},
        "mode": {"$ref": "#/$defs/mode"},
    },
    "required": ["unit", "city"],
    "additionalProperties": False,
    "$defs": {"mode": {"const": "metric"}},
}
TOOLS = [
    {"type": "function", "function": {"name": "weather", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "free"}},  # no schema
]


def chat(name: str, *fragments: str, end: bool = True) -> bytes:
    out: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": name, "arguments": ""}}]}}]}
    ]
    out += [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": f}}]}}]} for f in fragments]
    text = "".join(f"data: {json.dumps(e)}\n\n" for e in out)
    if end:
        text += 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
    return text.encode()


def arguments(data: bytes) -> list[str]:
    """The argument fragments of a chat capture, as written."""
    out = []
    for event in read_capture(data):
        if isinstance(event.data, dict):
            for choice in event.data.get("choices", []):
                for entry in choice.get("delta", {}).get("tool_calls", []):
                    if entry.get("function", {}).get("arguments"):
                        out.append(entry["function"]["arguments"])
    return out


def verdicts(data: bytes, registry: ToolRegistry) -> list[tuple[Any, ...]]:
    pipeline = Pipeline(registry=registry)
    for event in read_capture(data):
        pipeline.feed(event)
    pipeline.close()
    return [(c.state.value, c.reason, c.bytes, c.fragments) for r in pipeline.results() for c in r.calls]


def test_published_strings_are_enum_members_and_consts_at_any_depth() -> None:
    assert published_strings(WEATHER) == {"c", "f", "metric"}
    nested = {"anyOf": [{"enum": [1, None, "a", {"k": ["b"]}]}, {"properties": {"enum": {"type": "string"}}}]}
    assert published_strings(nested) == {"a", "b"}  # a property named "enum" publishes nothing
    assert published_strings({"type": "string", "pattern": "^c$"}) == frozenset()
    registry = ToolRegistry.from_tools(TOOLS)
    assert registry.published("weather") == {"c", "f", "metric"}
    assert registry.published("free") == frozenset() and registry.published("nope") == frozenset()


def test_a_published_value_split_across_fragments_is_kept_once_whole() -> None:
    fragments = ['{"unit": "', "c", '", "city": "c', 'c", "mode": "met', 'ric", "x": "\\u0063"}']
    masked = mask_keeping(fragments, frozenset({"c", "metric"}))
    assert masked == ['{"unit": "', "c", '", "city": "x', 'x", "mode": "met', 'ric", "x": "\\u0063"}']
    assert [len(m.encode()) for m in masked] == [len(f.encode()) for f in fragments]


def test_strings_not_published_are_masked_as_the_scanner_masks_them() -> None:
    assert mask_keeping(['{"unit": "cf", "city": "é"}'], frozenset({"c", "f"})) is None  # nothing kept
    assert mask_keeping(['{"c": "c", "city": "Paris"}'], frozenset()) is None
    # a string the text ends in, or breaks in, is masked even if it reads as a member so far
    assert mask_keeping(['{"unit": "c", "u": "c'], frozenset({"c"})) == ['{"unit": "c", "u": "x']
    assert mask_keeping(['{"unit": "c", "u": "f\x01"}'], frozenset({"c", "f"})) == ['{"unit": "c", "u": "xxxx']


def test_a_committed_call_keeps_its_enum_value_and_replays_to_the_same_verdict() -> None:
    registry = ToolRegistry.from_tools(TOOLS)
    raw = chat("weather", '{"unit": "', "c", '", "city": "Paris"}')
    redacted = redact_capture(raw, registry=registry)
    assert arguments(redacted) == ['{"unit": "', "c", '", "city": "xxxxx"}']
    assert verdicts(redacted, registry) == verdicts(raw, registry)
    assert verdicts(raw, registry)[0][0] == "committed"


def test_a_call_that_did_not_commit_keeps_no_enum_value() -> None:
    registry = ToolRegistry.from_tools(TOOLS)
    raw = chat("weather", '{"unit": "', "c", '", "city": "Paris"', end=False)  # truncated
    redacted = redact_capture(raw, registry=registry)
    assert arguments(redacted) == ['{"xxxx": "', "x", '", "yxxx": "xxxxx"']
    assert verdicts(redacted, registry) == verdicts(raw, registry)
    assert verdicts(raw, registry)[0][0] == "failed"


def test_a_tool_without_schema_or_without_tools_masks_every_string() -> None:
    registry = ToolRegistry.from_tools(TOOLS)
    raw = chat("free", '{"unit": "c", "mode": "metric"}')
    assert arguments(redact_capture(raw, registry=registry)) == ['{"unit": "x", "mode": "xxxxxx"}']
    raw = chat("weather", '{"unit": "c", "city": "Paris"}')
    assert arguments(redact_capture(raw)) == ['{"unit": "x", "city": "xxxxx"}']  # no registry given


def test_anthropic_whole_input_of_a_committed_call_keeps_its_enum_value() -> None:
    registry = ToolRegistry.from_tools([{"name": "weather", "input_schema": WEATHER}])
    events = [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "weather", "input": {"unit": "f", "city": "Oslo"}}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    raw = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    redacted = redact_capture(raw, registry=registry)
    assert b'"unit":"f"' in redacted and b"Oslo" not in redacted
    assert verdicts(redacted, registry) == verdicts(raw, registry)
    assert verdicts(raw, registry)[0][0] == "committed"


def gemini(*calls: dict[str, Any]) -> bytes:
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": call}]}, "index": 0}]} for call in calls]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode()


def test_gemini_args_and_string_value_pieces_of_a_committed_call_keep_published_strings() -> None:
    registry = ToolRegistry.from_tools([{"name": "weather", "parameters": WEATHER}])
    whole = gemini({"name": "weather", "args": {"unit": "c", "city": "Oslo"}})
    redacted = redact_capture(whole, registry=registry)
    assert b'"unit": "c"' in redacted.replace(b'":"', b'": "') and b"Oslo" not in redacted
    assert verdicts(redacted, registry) == verdicts(whole, registry) and verdicts(whole, registry)[0][0] == "committed"
    pieces = gemini(
        {"name": "weather", "willContinue": True},
        {"partialArgs": [{"jsonPath": "$.mode", "stringValue": "me", "willContinue": True}], "willContinue": True},
        {"partialArgs": [{"jsonPath": "$.city", "stringValue": "me", "willContinue": True}], "willContinue": True},
        {"partialArgs": [{"jsonPath": "$.mode", "stringValue": "tric"}, {"jsonPath": "$.unit", "stringValue": "f"}], "willContinue": True},
        {"partialArgs": [{"jsonPath": "$.city", "stringValue": "tro"}]},
    )
    redacted = redact_capture(pieces, registry=registry)
    values = [e.get("stringValue") for ev in read_capture(redacted) for p in ev.data["candidates"][0]["content"]["parts"] for e in p["functionCall"].get("partialArgs", [])]
    assert values == ["me", "xx", "tric", "f", "xxx"]  # "metro" is no member: both its pieces masked
    assert verdicts(redacted, registry) == verdicts(pieces, registry) and verdicts(pieces, registry)[0][0] == "committed"
    assert b"tro" not in redacted


def test_gemini_pieces_of_a_call_that_did_not_commit_are_masked() -> None:
    registry = ToolRegistry.from_tools([{"name": "weather", "parameters": WEATHER}])
    raw = gemini(
        {"name": "weather", "willContinue": True},
        {"partialArgs": [{"jsonPath": "$.mode", "stringValue": "metric"}, {"jsonPath": "$.unit", "stringValue": "k"}]},
    )  # "k" is no member: schema_invalid
    redacted = redact_capture(raw, registry=registry)
    assert b"metric" not in redacted
    original, replayed = verdicts(raw, registry)[0], verdicts(redacted, registry)[0]
    assert original[0] == replayed[0] == "failed" and original[1].startswith("schema_invalid") and replayed[1].startswith("schema_invalid")


def test_given_verdicts_and_tools_keep_published_strings_too() -> None:
    registry = ToolRegistry.from_tools(TOOLS)
    raw = chat("weather", '{"unit": "', "f", '", "city": "Paris"}')
    pipeline = Pipeline(registry=registry)
    for event in read_capture(raw):
        pipeline.feed(event)
    pipeline.close()
    committed = committed_calls(pipeline.results())
    assert arguments(redact_capture(raw, committed=committed, registry=registry)) == ['{"unit": "', "f", '", "city": "xxxxx"}']
    assert arguments(redact_capture(raw, committed=set(), registry=registry)) == ['{"xxxx": "', "x", '", "yxxx": "xxxxx"}']
