"""JSON a user, an upstream, an SDK or an uploaded file controls, in the library.

``json.loads`` refuses hostile input four ways: ``JSONDecodeError``, a plain
``ValueError`` (an integer over Python's 4300-digit limit), ``RecursionError`` (deep
nesting) and ``UnicodeDecodeError``. Every reader must turn each into a clear error naming
what and where (a :class:`CaptureError`, a :class:`RegistryError`, a stream error), never
let one escape.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from toollatch import assemble_events, read_capture
from toollatch.wire.capture import CaptureError
from toollatch.redaction.export import mask_value, redact_capture
from toollatch.wire.har import read_har
from toollatch.demo.bodies import final_response
from toollatch.demo.mockwire import Script, WireCall
from toollatch.core.model import CallState, StreamResult
from toollatch.core.registry import RegistryError, ToolRegistry
from toollatch.wire.retell import retell_body
from toollatch.core.jsontext import rebuild
from toollatch.wire.untrusted import parse_json

DEEP = "[" * 100_000 + "]" * 100_000
DIGITS = "7" * 5000
#: hostile JSON text → the problem every reader reports for it
HOSTILE = {
    "deep": (DEEP, "not JSON (nesting too deep)"),
    "digits": ("[" + DIGITS + "]", "not JSON (a number too long to convert)"),
    "syntax": ('{"a": }', "not JSON (Expecting value at line 1, column 7)"),
}


def assemble(data: bytes) -> StreamResult:
    (result,) = assemble_events(read_capture(data))
    return result


# ------------------------------------------------------------------ the helper


@pytest.mark.parametrize("text,problem", HOSTILE.values(), ids=HOSTILE.keys())
def test_parse_json_names_every_fault_json_loads_can_raise(text: str, problem: str) -> None:
    assert parse_json(text) == (None, problem)
    assert parse_json(text.encode()) == (None, problem)


def test_parse_json_reads_utf8_bytes_and_names_the_bad_byte() -> None:
    assert parse_json(b'\xef\xbb\xbf{"a": [1, "\xc3\xa9"]}') == ({"a": [1, "é"]}, None)
    assert parse_json(b'{"a": "caf\xe9 CANARY"}') == (None, "not UTF-8 (byte 10)")
    assert parse_json(7) == (None, "not JSON text (got int)")  # type: ignore[arg-type]
    assert parse_json("null") == (None, None)


def test_no_problem_quotes_the_input() -> None:
    for text in ('{"CANARYkey": CANARYvalue}', '["CANARY', '{"CANARY": 1} CANARY'):
        value, problem = parse_json(text)
        assert value is None and problem and "CANARY" not in problem


def test_rebuild_copies_any_depth_the_decoder_accepts() -> None:
    value = json.loads("[" * 700 + '{"s": "ab", "n": [1, null, true]}' + "]" * 700)
    copy = rebuild(value, lambda v: v * 2 if isinstance(v, str) else v)  # recursion: ~2 frames a level
    inner = copy
    for _ in range(700):
        inner = inner[0]
    assert inner == {"s": "abab", "n": [1, None, True]} and rebuild(value) == value
    assert mask_value({"k": ["secret", {"x": "yz"}]}) == {"k": ["xxxxxx", {"x": "xx"}]}


# ------------------------------------------------------------------ HAR


def har(extra: str = "", post_text: Any = '{"stream": true}') -> bytes:
    body = "data: " + json.dumps({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}) + "\n\ndata: [DONE]\n\n"
    entry = {"request": {"method": "POST", "url": "https://api/v1/chat/completions", "postData": {"text": post_text}},
             "response": {"status": 200, "content": {"mimeType": "text/event-stream", "text": body}}}
    return ('{"log": {"entries": ' + json.dumps([entry]) + extra + "}}").encode()


@pytest.mark.parametrize("text,problem", [HOSTILE["deep"], HOSTILE["digits"]], ids=["deep", "digits"])
def test_a_har_document_that_json_cannot_read_is_a_capture_error(text: str, problem: str) -> None:
    with pytest.raises(CaptureError) as info:
        read_har(har(extra=', "x": ' + text), "bug.har")
    assert str(info.value) == f"bug.har: HAR is not valid JSON ({problem.removeprefix('not JSON (')}"


@pytest.mark.parametrize("post_text", ['{"stream": true, "x": ' + DEEP + "}", '{"stream": true, "n": ' + DIGITS + "}", 7, ["x"]], ids=["deep", "digits", "number", "array"])
def test_a_request_body_json_cannot_read_gives_no_tools_but_keeps_the_entry(post_text: Any) -> None:
    (entry,) = read_har(har(post_text=post_text), "bug.har")
    assert entry.tools is None and entry.body.startswith(b"data: ")


# ------------------------------------------------------------------ tools files


@pytest.mark.parametrize(
    "raw,problem",
    [(DEEP.encode(), "not JSON (nesting too deep)"), (f"[{DIGITS}]".encode(), "not JSON (a number too long to convert)"),
     (b'[{"name": "caf\xe9"}]', "not UTF-8 (byte 14)"), (b"[{", "not JSON (Expecting property name enclosed in double quotes at line 1, column 3)")],
    ids=["deep", "digits", "latin1", "syntax"],
)
def test_a_tools_file_json_cannot_read_is_a_registry_error_naming_the_file(tmp_path: Path, raw: bytes, problem: str) -> None:
    path = tmp_path / "tools.json"
    path.write_bytes(raw)
    with pytest.raises(RegistryError) as info:
        ToolRegistry.load(path)
    assert str(info.value) == f"{path}: cannot read tools: the file is {problem}"


def nested_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    node = schema
    for _ in range(depth):
        node["properties"] = {"a": {"type": "object"}}
        node = node["properties"]["a"]
    return schema


def test_a_schema_nested_too_deep_to_check_is_a_registry_error(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": nested_schema(300)}}]
    with pytest.raises(RegistryError, match="tool 'f': JSON Schema nested too deep to check"):
        ToolRegistry.from_tools(tools)
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools))
    with pytest.raises(RegistryError, match=f"^{path}: tool 'f': JSON Schema nested too deep to check"):
        ToolRegistry.load(path)
    assert ToolRegistry.from_tools([{"name": "f", "input_schema": nested_schema(20)}]).names == ["f"]


# ------------------------------------------------------------------ Bedrock InvokeModel chunk.bytes


def invoke(payload: bytes) -> bytes:
    def chunk(body: bytes) -> str:
        return json.dumps({"chunk": {"bytes": base64.b64encode(body).decode()}})

    start = {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "tu1", "name": "f", "input": {}}}
    lines = [chunk(json.dumps({"type": "message_start", "message": {"id": "m", "content": []}}).encode()), chunk(json.dumps(start).encode()), chunk(payload)]
    return "".join(line + "\n" for line in lines).encode()


@pytest.mark.parametrize(
    "payload,problem",
    [(('{"type": "x", "v": ' + DEEP + "}").encode(), "not JSON (nesting too deep)"),
     (('{"type": "x", "v": ' + DIGITS + "}").encode(), "not JSON (a number too long to convert)"),
     (b'{"type": "caf\xe9 CANARY"}', "not UTF-8 (byte 13)")],
    ids=["deep", "digits", "latin1"],
)
def test_a_chunk_payload_json_cannot_read_ends_the_stream_naming_line_and_fault(payload: bytes, problem: str) -> None:
    result = assemble(invoke(payload))
    assert result.end == "error" and result.end_detail == f"line 3: chunk.bytes decodes to a payload that is {problem}"
    (call,) = result.calls
    assert call.state is CallState.FAILED and [r.tool_call_id for r in result.results] == ["tu1"]


def test_a_chunk_that_is_not_base64_is_a_stream_error_too() -> None:
    data = invoke(b"{}").replace(base64.b64encode(b"{}"), b"!!not base64!!")
    assert assemble(data).end_detail == "line 3: chunk.bytes is not base64"


@pytest.mark.parametrize("payload", [b'{"delta": "CANARYsecret", "n": ' + DIGITS.encode() + b"}", b'{"t": "CANARYsecret \xe9"}', b"CANARYsecret"], ids=["digits", "latin1", "text"])
def test_the_reproducer_keeps_nothing_of_an_unreadable_chunk(payload: bytes) -> None:
    out = redact_capture(invoke(payload), "x.jsonl", "bedrock-invoke")
    assert b"CANARY" not in out and base64.b64encode(payload) not in out
    # still a chunk that cannot be read: the same stream error, at the same line
    assert (assemble(out).end_detail or "").startswith("line 3: chunk.bytes decodes to a payload that is not ")


# ------------------------------------------------------------------ the reproducer: shapes and depth


@pytest.mark.parametrize(
    "event,dialect",
    [({"object": "chat.completion.chunk", "choices": 7}, "openai-chat"),
     ({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": 5, "content": "CANARY"}}]}, "openai-chat"),
     ({"type": "message_start", "message": ["CANARY"]}, "anthropic"),
     ({"type": "response.completed", "response": {"output": [1, "CANARY"]}}, "openai-responses"),
     ({"candidates": [{"content": {"parts": "CANARY"}}, {"content": ["x"]}]}, "gemini")],
    ids=["choices-number", "tool-calls-number", "message-array", "output-not-items", "parts-string"],
)
def test_the_reproducer_of_events_of_unexpected_shape_is_written_and_masked(event: dict[str, Any], dialect: str) -> None:
    out = redact_capture(("data: " + json.dumps(event) + "\n\n").encode(), "x.sse", dialect)
    assert out.startswith(b"data: ") and b"CANARY" not in out


def test_the_reproducer_masks_values_nested_as_deep_as_the_decoder_allows() -> None:
    value = "[" * 900 + '"CANARY"' + "]" * 900
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "__V__"}}
    chunk = json.dumps({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}).replace('"__V__"', value)
    out = redact_capture(f"data: {chunk}\n\n".encode(), "x.sse", "openai-chat")
    assert b"CANARY" not in out and b'"xxxxxx"' in out


# ------------------------------------------------------------------ non-streaming bodies


def chat_body(arguments: Any, content: Any = None) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": [call]}, "finish_reason": "tool_calls"}]}


@pytest.mark.parametrize(
    "dialect,body,problem",
    [("openai-chat", DEEP.encode(), "the body is not JSON (nesting too deep)"),
     ("openai-chat", b'{"choices": ' + DIGITS.encode() + b"}", "the body is not JSON (a number too long to convert)"),
     ("anthropic", b'{"type": "message", "x": "\xe9"}', "the body is not UTF-8 (byte 26)"),
     ("openai-chat", b"[]", "the body is not a JSON object"),
     ("openai-chat", b'{"choices": "CANARY"}', "the body is not a chat.completion body"),
     ("openai-responses", b'{"object": "list"}', "the body is not a Responses body"),
     ("gemini", b"{}", "no known response format for this endpoint"),
     ("openai-chat", json.dumps(chat_body({"k": 1})).replace('"k": 1', '"k": 1, "k": 2').encode(),
      "the body is not strict JSON (duplicate object key), so arguments it gives as JSON values cannot be judged")],
    ids=["deep", "digits", "latin1", "array", "shape", "responses-shape", "unknown-dialect", "duplicate-in-value"],
)
def test_a_non_streaming_body_that_cannot_be_retold_says_why(dialect: str, body: bytes, problem: str) -> None:
    assert retell_body(dialect, body) == (None, problem)


def test_members_of_the_wrong_type_are_skipped_and_json_valued_arguments_judged() -> None:
    doc = chat_body({"city": "Paris"}, content=[{"type": "text", "text": "hi"}])
    doc["choices"][0]["message"]["tool_calls"].insert(0, "not a call")
    wire, problem = retell_body("openai-chat", json.dumps(doc).encode())
    assert problem is None and wire is not None
    result = assemble(wire)
    assert [(c.call_id, c.state, c.arguments) for c in result.calls] == [("c1", CallState.COMMITTED, {"city": "Paris"})]
    doc = chat_body(["not", "an", "object"])
    (call,) = assemble(retell_body("openai-chat", json.dumps(doc).encode())[0] or b"").calls
    assert call.state is CallState.FAILED and (call.reason or "").startswith("arguments_not_object")  # never committed as {}


def test_a_custom_tool_call_in_a_non_streaming_responses_body_is_a_call() -> None:
    output = [{"type": "custom_tool_call", "id": "ctc_1", "call_id": "c1", "name": "code", "input": "print(1)"},
              {"type": "custom_tool_call", "id": "ctc_2", "call_id": "c2", "name": "code", "input": {"x": 1}}]
    wire, problem = retell_body("openai-responses", json.dumps({"object": "response", "status": "completed", "output": output}).encode())
    assert problem is None and wire is not None
    calls = assemble(wire).calls
    assert [(c.call_id, c.state) for c in calls] == [("c1", CallState.COMMITTED), ("c2", CallState.COMMITTED)]
    assert calls[0].arguments == {"input": "print(1)"} and json.loads(calls[1].arguments["input"]) == {"x": 1}


@pytest.mark.parametrize("arguments", [DIGITS, DEEP, "[1]", "{"], ids=["digits", "deep", "array", "syntax"])
def test_a_messages_body_holds_an_object_whatever_the_arguments(arguments: str) -> None:
    script = Script("s", (), (WireCall("toolu_1", "f", (arguments,)),))
    (block,) = final_response(script, "anthropic")["content"]
    assert block["input"] == {}
