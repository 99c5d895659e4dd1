"""Arguments that arrive as a JSON *value* are held to strict JSON like streamed text.

The envelope parse of each event keeps the last of duplicate keys and accepts ``NaN``; the
text re-made from such a value would hide the fault. Every path that takes a JSON value as
argument text re-checks its event, so the call fails ``invalid_json`` instead of
committing a value the provider did not unambiguously send.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

import toollatch.dialects.base as dialect_base
from toollatch import AssembleConfig, assemble_events, read_capture
from toollatch.core.model import CallState, StreamResult

from .test_eventstream import encode_frame
from .test_fixture_classes import anthropic_sse, anthropic_tool_events, openai_sse, openai_tool_chunks

SLOT = "__ARGUMENTS__"
DUP = '{"cmd":"ls","cmd":"rm -rf /"}'
CLEAN = '{"cmd":"ls"}'


def with_arguments(event: dict[str, Any], arguments: str) -> str:
    """``event`` as JSON text with the string ``SLOT`` replaced by raw ``arguments`` text."""
    text = json.dumps(event)
    assert f'"{SLOT}"' in text
    return text.replace(f'"{SLOT}"', arguments)


def sse(*events: dict[str, Any] | str, typed: bool = False) -> bytes:
    out = []
    for ev in events:
        text = ev if isinstance(ev, str) else json.dumps(ev)
        kind = json.loads(text).get("type") if typed else None
        out.append((f"event: {kind}\n" if kind else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def jsonl(*events: dict[str, Any] | str) -> bytes:
    return "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events).encode()


# ------------------------------------------------------------------ one capture per path


def anthropic_start_input(args: str) -> bytes:
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "tu1", "name": "f", "input": SLOT}}
    return sse(
        {"type": "message_start", "message": {"id": "m", "content": []}},
        with_arguments(block, args),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_stop"},
        typed=True,
    )


def anthropic_message_start_content(args: str) -> bytes:
    start = {"type": "message_start", "message": {"id": "m", "content": [{"type": "tool_use", "id": "tu1", "name": "f", "input": SLOT}]}}
    return sse(with_arguments(start, args), {"type": "message_stop"}, typed=True)


def anthropic_partial_json_value(args: str) -> bytes:
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "tu1", "name": "f", "input": {}}}
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": SLOT}}
    return sse(
        {"type": "message_start", "message": {"id": "m", "content": []}},
        block,
        with_arguments(delta, args),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_stop"},
        typed=True,
    )


def bedrock_invoke_start_input(args: str) -> bytes:
    def chunk(text: str) -> str:
        return json.dumps({"chunk": {"bytes": base64.b64encode(text.encode()).decode()}})

    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "tu1", "name": "f", "input": SLOT}}
    return jsonl(
        chunk(json.dumps({"type": "message_start", "message": {"id": "m", "content": []}})),
        chunk(with_arguments(block, args)),
        chunk(json.dumps({"type": "content_block_stop", "index": 0})),
        chunk(json.dumps({"type": "message_stop"})),
    )


def _converse(start_input: str | None, delta_input: str | None) -> list[str]:
    tool: dict[str, Any] = {"toolUseId": "tb1", "name": "f"}
    if start_input is not None:
        tool["input"] = SLOT
    start = json.dumps({"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": tool}}})
    if start_input is not None:
        start = start.replace(f'"{SLOT}"', start_input)
    events = [json.dumps({"messageStart": {"role": "assistant"}}), start]
    if delta_input is not None:
        events.append(with_arguments({"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": SLOT}}}}, delta_input))
    events += [json.dumps({"contentBlockStop": {"contentBlockIndex": 0}}), json.dumps({"messageStop": {"stopReason": "tool_use"}})]
    return events


def bedrock_converse_start_input(args: str) -> bytes:
    return jsonl(*_converse(args, None))


def bedrock_converse_delta_input(args: str) -> bytes:
    return jsonl(*_converse(None, args))


def bedrock_converse_eventstream(args: str) -> bytes:
    """The binary event stream: each frame's payload is the body, typed by ``:event-type``."""
    frames = []
    for line in _converse(None, args):
        kind = line[2 : line.index('"', 2)]
        body = line[len(kind) + 4 : -1]
        headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
        frames.append(encode_frame(headers, body.encode()))
    return b"".join(frames)


def _cohere(start_args: str | None, delta_args: str | None) -> bytes:
    fn: dict[str, Any] = {"name": "f", "arguments": SLOT if start_args is not None else ""}
    start = {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": {"id": "c1", "type": "function", "function": fn}}}}
    events: list[dict[str, Any] | str] = [{"type": "message-start", "id": "m"}]
    events.append(with_arguments(start, start_args) if start_args is not None else start)
    if delta_args is not None:
        delta = {"type": "tool-call-delta", "index": 0, "delta": {"message": {"tool_calls": {"function": {"arguments": SLOT}}}}}
        events.append(with_arguments(delta, delta_args))
    events += [{"type": "tool-call-end", "index": 0}, {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL"}}]
    return sse(*events, typed=True)


def cohere_start_arguments(args: str) -> bytes:
    return _cohere(args, None)


def cohere_delta_arguments(args: str) -> bytes:
    return _cohere(None, args)


def openai_chat_arguments(args: str) -> bytes:
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": SLOT}}
    chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}
    end = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    return sse(with_arguments(chunk, args), end) + b"data: [DONE]\n\n"


def _responses(where: str, args: str) -> bytes:
    item = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": ""}
    added: dict[str, Any] | str = {"type": "response.output_item.added", "output_index": 0, "item": item}
    if where == "added":
        added = with_arguments({"type": "response.output_item.added", "output_index": 0, "item": {**item, "arguments": SLOT}}, args)
    events: list[dict[str, Any] | str] = [{"type": "response.created", "response": {"id": "r"}}, added]
    if where == "done":
        events.append(with_arguments({"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": SLOT}, args))
    if where == "item_done":
        events.append(with_arguments({"type": "response.output_item.done", "output_index": 0, "item": {**item, "arguments": SLOT}}, args))
    events.append({"type": "response.completed", "response": {"id": "r"}})
    return sse(*events, typed=True)


def responses_added_arguments(args: str) -> bytes:
    return _responses("added", args)


def responses_done_arguments(args: str) -> bytes:
    return _responses("done", args)


def responses_item_done_arguments(args: str) -> bytes:
    return _responses("item_done", args)


def responses_delta_arguments(args: str) -> bytes:
    """A ``.delta`` whose ``delta`` is a JSON value, not a text fragment."""
    item = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": ""}
    delta = {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": SLOT}
    return sse(
        {"type": "response.created", "response": {"id": "r"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        with_arguments(delta, args),
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"id": "r"}},
        typed=True,
    )


def _custom(where: str, args: str) -> bytes:
    """A custom tool call whose free-text ``input`` arrives as a JSON value at ``where``."""
    item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "c1", "name": "f", "input": ""}
    if where == "added":
        added = with_arguments({"type": "response.output_item.added", "output_index": 0, "item": {**item, "input": SLOT}}, args)
    else:
        added = json.dumps({"type": "response.output_item.added", "output_index": 0, "item": item})
    events: list[dict[str, Any] | str] = [{"type": "response.created", "response": {"id": "r"}}, added]
    ref = {"item_id": "ctc_1", "output_index": 0}
    if where == "delta":
        events.append(with_arguments({"type": "response.custom_tool_call_input.delta", **ref, "delta": SLOT}, args))
    if where == "done":
        events.append(with_arguments({"type": "response.custom_tool_call_input.done", **ref, "input": SLOT}, args))
    done = {"type": "response.output_item.done", "output_index": 0, "item": {**item, "input": SLOT if where == "item_done" else ""}}
    events.append(with_arguments(done, args) if where == "item_done" else done)
    events.append({"type": "response.completed", "response": {"id": "r"}})
    return sse(*events, typed=True)


CUSTOM_PLACES = ["added", "delta", "done", "item_done"]


def gemini_args(args: str) -> bytes:
    chunk = {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": SLOT}}]}, "finishReason": "STOP"}]}
    return sse(with_arguments(chunk, args))


def gemini_partial_args(args: str) -> bytes:
    """``args`` here is the text of one ``partialArgs`` entry (its keys can repeat too)."""
    start = {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "willContinue": True}}]}}]}
    part = {"candidates": [{"content": {"parts": [{"functionCall": {"partialArgs": [SLOT], "willContinue": True}}]}}]}
    end = {"candidates": [{"content": {"parts": [{"functionCall": {}}]}, "finishReason": "STOP"}]}
    return sse(start, with_arguments(part, args), end)


PATHS: list[Callable[[str], bytes]] = [
    anthropic_start_input,
    anthropic_message_start_content,
    anthropic_partial_json_value,
    bedrock_invoke_start_input,
    bedrock_converse_start_input,
    bedrock_converse_delta_input,
    bedrock_converse_eventstream,
    cohere_start_arguments,
    cohere_delta_arguments,
    openai_chat_arguments,
    responses_added_arguments,
    responses_done_arguments,
    responses_item_done_arguments,
    responses_delta_arguments,
    gemini_args,
]
IDS = [p.__name__ for p in PATHS]


def assemble(data: bytes, config: AssembleConfig | None = None) -> StreamResult:
    (result,) = assemble_events(read_capture(data), config=config)
    return result


@pytest.mark.parametrize("build", PATHS, ids=IDS)
def test_the_same_path_commits_strict_arguments(build: Callable[[str], bytes]) -> None:
    (call,) = assemble(build(CLEAN)).calls
    assert (call.state, call.arguments) == (CallState.COMMITTED, {"cmd": "ls"})


@pytest.mark.parametrize("build", PATHS, ids=IDS)
def test_duplicate_keys_in_a_json_value_fail_invalid_json(build: Callable[[str], bytes]) -> None:
    result = assemble(build(DUP))
    (call,) = result.calls
    assert call.state is CallState.FAILED
    assert call.reason == "invalid_json: duplicate object key in the event that carried the arguments"
    assert call.diagnosis == {"kind": "semantic", "problem": "duplicate object key in the event that carried the arguments"}
    assert [r.tool_call_id for r in result.results] == [call.call_id]


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ('{"n":NaN}', "non-standard constant NaN"),
        ('{"n":-Infinity}', "non-standard constant -Infinity"),
        ('{"n":1e999}', "number out of range"),
        ('{"s":"\\ud800"}', "string holds a lone surrogate"),
        ('{"a":{"x":1,"x":2}}', "duplicate object key"),
    ],
    ids=["nan", "infinity", "overflow", "lone-surrogate", "nested-duplicate"],
)
@pytest.mark.parametrize("build", [anthropic_start_input, gemini_args, openai_chat_arguments, cohere_start_arguments], ids=lambda b: b.__name__)
def test_every_strictness_fault_of_a_json_value_fails_the_call(build: Callable[[str], bytes], args: str, problem: str) -> None:
    (call,) = assemble(build(args)).calls
    assert call.state is CallState.FAILED
    assert (call.reason or "").startswith(f"invalid_json: {problem}")


def test_duplicate_keys_in_a_gemini_partial_args_entry_fail_the_call() -> None:
    clean = '{"jsonPath":"$.cmd","stringValue":"ls"}'
    dup = '{"jsonPath":"$.cmd","stringValue":"ls","stringValue":"rm -rf /"}'
    assert assemble(gemini_partial_args(clean)).calls[0].arguments == {"cmd": "ls"}
    (call,) = assemble(gemini_partial_args(dup)).calls
    assert call.state is CallState.FAILED and (call.reason or "").startswith("invalid_json: duplicate object key")


def test_a_pipelined_call_with_duplicate_keys_never_commits_at_its_block_stop() -> None:
    config = AssembleConfig(execute_before_stream_end=True, allow_pipelined_execute=("f",))
    assert assemble(gemini_args(CLEAN), config).calls[0].state is CallState.COMMITTED
    for build in (gemini_args, anthropic_message_start_content, responses_item_done_arguments):
        (call,) = assemble(build(DUP), config).calls
        assert call.state is CallState.FAILED, build.__name__


def test_the_reason_quotes_no_argument_key_or_value() -> None:
    secret_key, secret_value = "CANARYkey3f9a", "CANARYvalue7b1c"
    args = f'{{"{secret_key}":"{secret_value}","{secret_key}":1}}'
    doc = json.dumps(assemble(gemini_args(args)).to_json())
    assert "invalid_json" in doc and secret_key not in doc and secret_value not in doc


def test_ordinary_events_are_never_re_read(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    real = dialect_base.strict_loads
    monkeypatch.setattr(dialect_base, "strict_loads", lambda text, **kw: reads.append(text) or real(text, **kw))
    calls = [("call_1", "get_weather", ['{"city":', '"Paris"}'])]
    for data in (openai_sse(openai_tool_chunks(calls)), anthropic_sse(anthropic_tool_events(calls))):
        assert [c.state for c in assemble(data).calls] == [CallState.COMMITTED]
    assert reads == []
    assemble(gemini_args(CLEAN))
    assert len(reads) == 1  # the one event that carried a JSON value


@pytest.mark.parametrize("value", ["12345", "true", '"text"', "[1]"])
@pytest.mark.parametrize("build", [responses_item_done_arguments, responses_added_arguments, cohere_start_arguments, bedrock_converse_delta_input], ids=lambda b: b.__name__)
def test_arguments_that_are_no_object_are_never_committed_as_empty_object(build: Callable[[str], bytes], value: str) -> None:
    (call,) = assemble(build(value)).calls
    assert call.state is CallState.FAILED and (call.reason or "").startswith(("arguments_not_object", "invalid_json"))


def test_redacted_events_keep_no_original_text() -> None:
    from toollatch.redaction.export import redact_events

    events = redact_events(read_capture(gemini_args('{"token":"CANARYsecret42"}')))
    assert events and all(e.raw is None for e in events)
    assert "CANARYsecret42" not in repr(events)


# ------------------------------------------------------------------ custom tools: free-text input given as a value


@pytest.mark.parametrize("where", CUSTOM_PLACES)
def test_a_custom_tool_input_given_as_a_json_value_is_judged_as_its_json_text(where: str) -> None:
    result = assemble(_custom(where, CLEAN))
    (call,) = result.calls
    assert call.state is CallState.COMMITTED and call.arguments != {}  # never an empty input
    assert json.loads(call.arguments["input"]) == {"cmd": "ls"}
    assert result.quirks["arguments_as_json_value"] == 1 and result.quirks["custom_tool_input_wrapped"] == 1


@pytest.mark.parametrize("where", CUSTOM_PLACES)
@pytest.mark.parametrize(("args", "problem"), [(DUP, "duplicate object key"), ('{"n":NaN}', "non-standard constant NaN")], ids=["duplicate", "nan"])
def test_a_custom_tool_input_value_that_is_not_strict_json_fails_the_call(where: str, args: str, problem: str) -> None:
    result = assemble(_custom(where, args))
    (call,) = result.calls
    assert call.state is CallState.FAILED and (call.reason or "").startswith(f"invalid_json: {problem}")
    assert [r.tool_call_id for r in result.results] == ["c1"]


@pytest.mark.parametrize("build", PATHS, ids=IDS)
def test_a_value_that_is_no_object_is_still_held_to_strict_json(build: Callable[[str], bytes]) -> None:
    """With ``arguments_must_be_object`` off, an array (or other non-object value) carrying a
    duplicate key in the event's own text fails like an object does."""
    config = AssembleConfig(arguments_must_be_object=False)
    (clean,) = assemble(build("[" + CLEAN + "]"), config).calls
    assert (clean.state, clean.arguments) == (CallState.COMMITTED, [{"cmd": "ls"}])
    (call,) = assemble(build("[" + DUP + "]"), config).calls
    assert call.state is CallState.FAILED
    assert call.reason == "invalid_json: duplicate object key in the event that carried the arguments"
