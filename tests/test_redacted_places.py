"""The redacted reproducer masks every place a dialect adapter reads argument text (strings
and JSON values alike), keeps what the assembler measures, masks each fragment with its own
call's scanner, masks every scalar of a stream no adapter reads, and tells where a capture
holds argument text that no call took before its stream's end."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from toollatch import read_capture
from toollatch.core import jsontext
from toollatch.redaction.export import UNREAD_STREAM, redact_capture, stray_argument_text
from toollatch.web import Settings
from toollatch.web.live.store import save_recording

from .test_export import verdicts
from .test_live_exports import live
from .test_review_latch import sse
from .test_web_app import make_client

SECRET = "CANARYsecret7f3e"
#: A string value whose JSON-escaped form is longer than its UTF-8 bytes: quotes, a
#: backslash, a newline, a tab, non-ASCII and a control character.
TRICKY = 'He said "' + SECRET + '"\\ \n\té€\x01'


def jsonl(*docs: Any) -> bytes:
    return "".join(json.dumps(d) + "\n" for d in docs).encode()


def chat(delta: dict[str, Any], finish: str | None = None, **choice: Any) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **choice}]}


def entry(index: int, args: Any, call_id: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if call_id:
        out.update(id=call_id, type="function")
        out["function"]["name"] = "f"
    return out


def anthropic(*middle: tuple[str, Any]) -> bytes:
    return sse(("message_start", {"type": "message_start", "message": {"id": "m", "content": []}}), *middle, ("message_stop", {"type": "message_stop"}))


def block_start(index: int, **extra: Any) -> tuple[str, Any]:
    block = {"type": "tool_use", "id": f"t{index}", "name": "f", "input": {}, **extra}
    return ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})


def partial(index: int, value: Any) -> tuple[str, Any]:
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": value}})


def stop(index: int) -> tuple[str, Any]:
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def responses(*middle: tuple[str, Any]) -> bytes:
    created = ("response.created", {"type": "response.created", "response": {"id": "r"}})
    return sse(created, *middle, ("response.completed", {"type": "response.completed", "response": {}}))


def item(kind: str = "function_call", **extra: Any) -> dict[str, Any]:
    return {"type": kind, "id": "fc1", "call_id": "c1", "name": "f", **extra}


def added(**extra: Any) -> tuple[str, Any]:
    return ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item(**extra)})


def bedrock(*events: Any) -> bytes:
    return jsonl({"messageStart": {"role": "assistant"}}, *events, {"messageStop": {"stopReason": "tool_use"}})


def gemini_part(fc: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"functionCall": fc}]}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


def cohere(*calls: Any) -> bytes:
    return sse({"type": "message-start", "id": "m"}, *calls, {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL"}})


def cohere_call(kind: str, args: Any, index: int = 0) -> dict[str, Any]:
    fn: dict[str, Any] = {"arguments": args}
    call: dict[str, Any] = {"function": fn}
    if kind == "tool-call-start":
        call.update(id=f"c{index}", type="function")
        fn["name"] = "f"
    return {"type": kind, "index": index, "delta": {"message": {"tool_calls": call}}}


def invoke(*events: dict[str, Any]) -> bytes:
    return jsonl(*({"chunk": {"bytes": base64.b64encode(json.dumps(e).encode()).decode()}} for e in events))


def readable(data: bytes) -> str:
    """The capture's text, with Bedrock ``chunk.bytes`` payloads decoded."""
    text = data.decode("utf-8", "surrogatepass")
    inner = [base64.b64decode(e.data["chunk"]["bytes"]).decode() for e in read_capture(data) if isinstance(e.data, dict) and "chunk" in e.data]
    return "\n".join([text, *inner])


VALUE = {"s": TRICKY, "n": [1, 2.5, True, None, {"deep": TRICKY}], "k": "é"}

#: One capture per place an adapter reads argument text as a JSON value (or free text the
#: adapter escapes), with strings whose escaped form is longer than their bytes.
PLACES: dict[str, bytes] = {
    "openai-chat arguments value": sse(chat({"tool_calls": [entry(0, VALUE, "c1")]}), chat({}, "tool_calls"), done=True),
    "openai-chat string then value": sse(
        chat({"tool_calls": [entry(0, '{"a": ', "c1")]}), chat({"tool_calls": [entry(0, VALUE)]}), chat({"tool_calls": [entry(0, "}")]}), chat({}, "tool_calls"), done=True
    ),
    "anthropic partial_json value": anthropic(block_start(0), partial(0, VALUE), stop(0)),
    "anthropic content_block_start input": anthropic(block_start(0, input=VALUE), stop(0)),
    "anthropic message_start content input": sse(
        ("message_start", {"type": "message_start", "message": {"id": "m", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": VALUE}]}}),
        ("message_stop", {"type": "message_stop"}),
    ),
    "bedrock delta input value": bedrock(
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "c1", "name": "f"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": VALUE}}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
    ),
    "bedrock start input value": bedrock(
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "c1", "name": "f", "input": VALUE}}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
    ),
    "bedrock start input text": bedrock(
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "c1", "name": "f", "input": json.dumps(VALUE)}}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
    ),
    "bedrock-invoke partial_json value": invoke(
        {"type": "message_start", "message": {"id": "m", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": VALUE}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_stop"},
    ),
    "responses delta value": responses(
        added(arguments=""),
        ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta", "item_id": "fc1", "output_index": 0, "delta": VALUE}),
        ("response.function_call_arguments.done", {"type": "response.function_call_arguments.done", "item_id": "fc1", "output_index": 0, "arguments": VALUE}),
    ),
    "responses done value": responses(
        added(arguments=""),
        ("response.function_call_arguments.done", {"type": "response.function_call_arguments.done", "item_id": "fc1", "output_index": 0, "arguments": VALUE}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item(arguments=VALUE)}),
    ),
    "responses item arguments value": responses(added(arguments=VALUE)),
    "responses custom tool input": responses(
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item("custom_tool_call", input="")}),
        ("response.custom_tool_call_input.delta", {"type": "response.custom_tool_call_input.delta", "item_id": "fc1", "output_index": 0, "delta": TRICKY[:12]}),
        ("response.custom_tool_call_input.delta", {"type": "response.custom_tool_call_input.delta", "item_id": "fc1", "output_index": 0, "delta": TRICKY[12:]}),
        ("response.custom_tool_call_input.done", {"type": "response.custom_tool_call_input.done", "item_id": "fc1", "output_index": 0, "input": TRICKY}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item("custom_tool_call", input=TRICKY)}),
    ),
    "responses custom tool input value": responses(
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item("custom_tool_call", input=VALUE)}),
    ),
    "gemini args": sse(gemini_part({"name": "f", "args": VALUE}, "STOP")),
    "gemini partialArgs": jsonl(
        gemini_part({"name": "f", "willContinue": True}),
        gemini_part({"partialArgs": [{"jsonPath": "$.s", "stringValue": TRICKY[:10], "willContinue": True}], "willContinue": True}),
        gemini_part({"partialArgs": [{"jsonPath": "$.s", "stringValue": TRICKY[10:]}, {"jsonPath": "$.n", "numberValue": 7}], "willContinue": True}),
        gemini_part({}, "STOP"),
    ),
    "cohere start value": cohere(cohere_call("tool-call-start", VALUE), {"type": "tool-call-end", "index": 0}),
    "cohere delta value": cohere(cohere_call("tool-call-start", ""), cohere_call("tool-call-delta", VALUE), {"type": "tool-call-end", "index": 0}),
}


@pytest.mark.parametrize("name", list(PLACES))
def test_argument_places_keep_verdicts_bytes_and_fragments_and_lose_their_strings(name: str) -> None:
    data = PLACES[name]
    original = verdicts(data)
    assert all(call[2] == "committed" and call[4] > 0 for stream in original for call in stream if len(call) == 7), original
    redacted = redact_capture(data, name)
    assert verdicts(redacted) == original
    text = readable(redacted)
    assert SECRET not in text
    assert ("deep" in text) == ("deep" in readable(data))  # values masked, keys kept
    assert stray_argument_text(read_capture(data)) == []  # every place is text a call took
    assert redact_capture(redacted, name) == redacted  # masking the masked changes nothing


def test_each_fragment_is_masked_with_its_own_calls_scanner() -> None:
    """A JSON-valued entry before a string entry in one chunk: the string continues call 1's
    open string (a card number, which a scanner of another call would read as a number)."""
    card = "4111111111111111"
    data = sse(
        chat({"tool_calls": [entry(0, "", "c0"), entry(1, '{"card": "', "c1")]}),
        chat({"tool_calls": [entry(0, {"p": 1}), entry(1, card)]}),
        chat({"tool_calls": [entry(1, '"}')]}),
        chat({}, "tool_calls"),
        done=True,
    )
    redacted = redact_capture(data, "x.sse")
    assert card not in redacted.decode() and card[:6] not in redacted.decode()
    assert verdicts(redacted) == verdicts(data)


UNREAD: dict[str, bytes] = {
    "openai-chat legacy function_call": sse(
        chat({"role": "assistant", "function_call": {"name": "f", "arguments": json.dumps({"p": SECRET})}}), chat({}, "stop"), done=True
    ),
    "openai-chat message tool_calls": sse(
        chat({}, "tool_calls", message={"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"p": SECRET}}}]}),
        done=True,
    ),
    "openai-chat custom tool": sse(chat({"tool_calls": [{"index": 0, "id": "c", "type": "custom", "custom": {"name": "f", "input": SECRET}}]}), chat({}, "tool_calls"), done=True),
    "anthropic partial_json of a text block": anthropic(
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        partial(0, '{"p": "' + SECRET + '"}'),
        stop(0),
    ),
    "cohere two calls in one event": cohere(
        {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"p": "' + SECRET + '"}'}},
            {"id": "b", "type": "function", "function": {"name": "f", "arguments": {"p": SECRET}}},
        ]}}},
    ),
    "responses output item of another type": responses(("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": {"type": "message", "arguments": {"p": SECRET}}})),
}


@pytest.mark.parametrize("name", list(UNREAD))
def test_argument_text_no_adapter_reads_is_masked_and_reported(name: str) -> None:
    data = UNREAD[name]
    redacted = redact_capture(data, name)
    assert SECRET not in redacted.decode()
    assert verdicts(redacted) == verdicts(data)
    assert stray_argument_text(read_capture(data)) != []


def test_text_fields_beside_calls_are_masked() -> None:
    logprobs = {"content": [{"token": SECRET, "logprob": -0.1, "bytes": list(SECRET.encode())}]}
    data = sse(chat({"content": SECRET}, logprobs=logprobs), chat({}, "stop"), done=True)
    gemini = sse({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "MALFORMED_FUNCTION_CALL", "finishMessage": f"Malformed: f(p='{SECRET}')"}]})
    for capture in (data, gemini):
        redacted = redact_capture(capture, "x")
        assert SECRET not in redacted.decode() and str(list(SECRET.encode())[:4])[1:-1] not in redacted.decode()
        assert verdicts(redacted) == verdicts(capture)


def test_a_stream_no_adapter_reads_has_every_scalar_masked() -> None:
    # no call of it committed: its argument keys, numbers and literals go too
    ollama = jsonl({"model": "m", "message": {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {KEY_CANARY: SECRET, "n": int(NUMBER_CANARY), "t": True}}}]}, "done": False})
    redacted = redact_capture(ollama, "x.jsonl").decode()
    assert SECRET not in redacted and KEY_CANARY not in redacted and NUMBER_CANARY not in redacted and "true" not in redacted
    assert len(redacted.encode()) == len(jsontext.dumps(json.loads(ollama), separators=(",", ":")).encode()) + 1  # same shape and byte lengths
    assert stray_argument_text(read_capture(ollama)) == [UNREAD_STREAM]
    # a dialect given that no event is of: no adapter reads the stream either
    given = redact_capture(ollama, "x.jsonl", "openai-chat").decode()
    assert SECRET not in given and '"model":"m"' not in given


STRAY: dict[str, bytes] = {
    "openai-chat call after [DONE]": sse(
        chat({"tool_calls": [entry(0, "{}", "c1")]}, "tool_calls"), "[DONE]", chat({"tool_calls": [entry(1, '{"p": "' + SECRET + '"}', "c2")]}), done=True
    ).replace(b'data: "[DONE]"', b"data: [DONE]"),
    "anthropic fragment after message_stop": anthropic(block_start(0), partial(0, "{}"), stop(0)) + sse(partial(0, '{"p": "' + SECRET + '"}')),
    "responses item done text unlike the final text": responses(
        added(arguments=""),
        ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta", "item_id": "fc1", "output_index": 0, "delta": "{}"}),
        ("response.function_call_arguments.done", {"type": "response.function_call_arguments.done", "item_id": "fc1", "output_index": 0, "arguments": "{}"}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item(arguments='{"p": "' + SECRET + '"}')}),
    ),
    "responses completed output unlike the call": sse(
        ("response.created", {"type": "response.created", "response": {"id": "r"}}),
        added(arguments="{}"),
        ("response.completed", {"type": "response.completed", "response": {"output": [item(arguments='{"p": "' + SECRET + '"}')]}}),
    ),
    # content after a finishReason is kept (the stream ends at the end of the body), not after an error
    "gemini call after an error": sse(gemini_part({"name": "f", "args": {}}), {"error": {"code": 500}}, gemini_part({"name": "g", "args": {"p": SECRET}})),
    "an unreadable line": sse(chat({"tool_calls": [entry(0, "{}", "c1")]}, "tool_calls"), done=True) + b'data: {"p": "' + SECRET.encode() + b'"\n\n',
}


@pytest.mark.parametrize("name", list(STRAY))
def test_argument_text_no_call_took_is_reported(name: str) -> None:
    data = STRAY[name]
    stray = stray_argument_text(read_capture(data))
    assert stray and all(where.startswith("line ") for where in stray)
    assert SECRET not in json.dumps(stray)  # where, never what
    assert SECRET not in redact_capture(data, name).decode()


def test_repeated_texts_equal_to_the_calls_are_not_stray() -> None:
    args = '{"p": "' + SECRET + '"}'
    data = responses(
        added(arguments=""),
        ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta", "item_id": "fc1", "output_index": 0, "delta": args[:5]}),
        ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta", "item_id": "fc1", "output_index": 0, "delta": args[5:]}),
        ("response.function_call_arguments.done", {"type": "response.function_call_arguments.done", "item_id": "fc1", "output_index": 0, "arguments": args}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item(arguments=args)}),
    )
    assert stray_argument_text(read_capture(data)) == []
    assert verdicts(redact_capture(data, "x")) == verdicts(data)


def test_a_live_recording_with_argument_text_no_adapter_reads_is_downloaded_redacted(tmp_path: Path) -> None:
    """Every call committed and no quirk says so, but a chunk's ``message`` repeats a call
    with other argument text: the bytes hold text that no call committed."""
    body = UNREAD["openai-chat message tool_calls"]
    with make_client(Settings(data_dir=tmp_path)) as client:
        session = live(client)
        session.feed_bytes(sse(chat({"tool_calls": [entry(0, "{}", "c1")]})) + body)
        session.finish()
        save_recording(client.app.state.store.recordings, session, [])  # type: ignore[attr-defined]
        doc = client.get(f"/api/sessions/{session.id}").json()
        download = client.get(f"/sessions/{session.id}/recording")
    assert [c["state"] for c in doc["streams"][0]["calls"]] == ["committed"]
    assert doc["live"]["recording_download"] == "redacted"
    assert download.status_code == 200 and SECRET not in download.text


def test_an_event_that_is_not_an_object_is_masked_whole() -> None:
    data = sse(chat({"tool_calls": [entry(0, "{}", "c1")]}), ["p", SECRET, 5], SECRET, chat({}, "tool_calls"), done=True)
    redacted = redact_capture(data, "x.sse")
    assert SECRET not in redacted.decode() and b"data: [DONE]" in redacted
    assert verdicts(redacted) == verdicts(data)
    assert stray_argument_text(read_capture(data)) != []


def test_the_page_says_when_every_string_of_a_recording_is_masked(tmp_path: Path) -> None:
    ollama = jsonl({"model": "m", "message": {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"p": SECRET}}}]}, "done": True})
    with make_client(Settings(data_dir=tmp_path)) as client:
        session = live(client)
        session.live_source.content_type = "application/x-ndjson"
        session.feed_bytes(ollama)
        session.finish()
        save_recording(client.app.state.store.recordings, session, [])  # type: ignore[attr-defined]
        page = client.get(f"/sessions/{session.id}").text
        download = client.get(f"/sessions/{session.id}/recording")
    assert "Download recording (redacted)" in page and "No known provider stream: every key and value is masked" in page
    assert download.status_code == 200 and SECRET not in download.text and '"arguments"' not in download.text and download.text.count("{") == 5


NON_STREAMING = {
    "openai-chat second choice": {
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}},
            {"index": 1, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "f", "arguments": json.dumps({"p": SECRET})}}]}},
        ],
    },
    "anthropic server tool input": {
        "type": "message", "stop_reason": "tool_use",
        "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {"query": SECRET}}, {"type": "tool_use", "id": "t", "name": "f", "input": {}}],
    },
    "responses mcp call": {
        "object": "response", "status": "completed",
        "output": [{"type": "mcp_call", "id": "m", "name": "f", "arguments": json.dumps({"p": SECRET})}, item(arguments="{}")],
    },
}


@pytest.mark.parametrize("name", list(NON_STREAMING))
def test_a_non_streaming_body_with_calls_its_stream_leaves_out_is_downloaded_redacted(tmp_path: Path, name: str) -> None:
    from toollatch.web.live.session import LiveSource

    dialect, endpoint = {"openai-chat": ("openai-chat", "/v1/chat/completions"), "anthropic": ("anthropic", "/v1/messages"), "responses": ("openai-responses", "/v1/responses")}[name.split()[0]]
    with make_client(Settings(data_dir=tmp_path)) as client:
        source = LiveSource(f"up{endpoint}", upstream="up", endpoint=endpoint, dialect=dialect, request={"model": "m", "stream": False})
        session = client.app.state.store.create_live(source)  # type: ignore[attr-defined]
        session.live_source.http_status, session.live_source.content_type = 200, "application/json"
        session.feed_bytes(json.dumps(NON_STREAMING[name]).encode())
        session.finish()
        save_recording(client.app.state.store.recordings, session, [])  # type: ignore[attr-defined]
        doc = client.get(f"/api/sessions/{session.id}").json()
        download = client.get(f"/sessions/{session.id}/recording")
    assert [c["state"] for s in doc["streams"] for c in s["calls"]] == ["committed"]
    assert doc["live"]["recording_download"] == "redacted" and SECRET not in download.text


def test_a_gemini_call_after_an_early_finish_reason_is_a_call_not_stray_text() -> None:
    data = sse(gemini_part({"name": "f", "args": {}}, "STOP"), gemini_part({"name": "g", "args": {"p": SECRET}}, "STOP"))
    assert stray_argument_text(read_capture(data)) == []
    assert SECRET not in redact_capture(data, "g.sse").decode()


FREE_REASON = '{"q": "' + SECRET + '"}'


@pytest.mark.parametrize("dialect", ["openai-chat", "anthropic", "bedrock-converse", "gemini", "cohere"])
def test_a_stop_reason_holding_free_text_is_masked_and_replays_the_same(dialect: str) -> None:
    from .test_dialect_ends import DIALECTS

    events = DIALECTS[dialect][0](FREE_REASON)
    if dialect == "anthropic":  # the text that stopped it is free text too
        events[-2]["delta"]["stop_sequence"] = SECRET
        data = sse(*[(e["type"], e) for e in events])
    else:
        data = jsonl(*events) if dialect == "bedrock-converse" else sse(*events)
    name = "r.jsonl" if dialect == "bedrock-converse" else "r.sse"
    assert SECRET.encode() in data
    redacted = redact_capture(data, name)
    assert SECRET[:8].encode() not in redacted, redacted
    assert verdicts(redacted) == verdicts(data)
    assert redact_capture(redacted, name) == redacted


# ------------------------------------------------------------------ argument text no call committed: every scalar masked

KEY_CANARY, NUMBER_CANARY = "kCANARYlate", "73556081234"


def test_a_call_after_the_streams_end_keeps_none_of_its_keys_or_numbers() -> None:
    # every call of the stream committed; a call after [DONE] is no call at all
    late = f'{{"{KEY_CANARY}": {NUMBER_CANARY}}}'
    data = sse(chat({"tool_calls": [entry(0, '{"q": 1}', "c1")]}), chat({}, "tool_calls"), done=True)
    for after in (entry(1, late, "c2"), entry(0, late)):  # a new call, or more text for the committed one
        body = redact_capture(data + sse(chat({"tool_calls": [after]})))
        assert KEY_CANARY.encode() not in body and NUMBER_CANARY.encode() not in body, body
        assert verdicts(body) == verdicts(data + sse(chat({"tool_calls": [after]})))


def test_deltas_a_final_text_replaced_keep_none_of_their_keys_or_numbers() -> None:
    # a second item reuses the first one's id: one call, whose .done text replaces both
    # items' deltas; it commits that text, never the deltas
    failing = f'{{"{KEY_CANARY}": {NUMBER_CANARY}, "q": "x"}}'

    def delta(index: int, text: str) -> tuple[str, Any]:
        return ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta", "output_index": index, "item_id": "fc1", "delta": text})

    second = {"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "f"}}
    done = ("response.function_call_arguments.done", {"type": "response.function_call_arguments.done", "output_index": 1, "item_id": "fc1", "arguments": '{"q": 1}'})
    for data in (responses(added(), delta(0, failing), ("response.output_item.added", second), delta(1, '{"q": 1}'), done), responses(added(), delta(0, failing), done)):
        assert verdicts(data)[0][0][2] == "committed"
        body = redact_capture(data)
        assert KEY_CANARY.encode() not in body and NUMBER_CANARY.encode() not in body, body
        assert verdicts(body) == verdicts(data)


def test_a_whole_text_fragments_replaced_keeps_none_of_its_keys_or_numbers() -> None:
    # an Anthropic start's input is the call's text only when no fragment follows
    data = anthropic(block_start(0, input={KEY_CANARY: int(NUMBER_CANARY)}), partial(0, '{"q": 1}'), stop(0))
    assert verdicts(data)[0][0][2] == "committed"
    body = redact_capture(data)
    assert KEY_CANARY.encode() not in body and NUMBER_CANARY.encode() not in body, body
    assert verdicts(body) == verdicts(data)


def test_a_provider_errors_type_or_code_holding_free_text_is_masked() -> None:
    # a gateway's error names no code: its type, code and param are free text that can quote the call
    quoted = f'could not parse {{"{KEY_CANARY}": {NUMBER_CANARY}}}'
    call = chat({"tool_calls": [entry(0, '{"q": ', "c1")]})
    chat_error = sse(call, {"error": {"type": quoted, "code": quoted, "message": "m"}})
    responses_error = responses(added(), ("error", {"type": "error", "code": quoted, "message": "m", "param": quoted}))
    for data in (chat_error, responses_error):
        body = redact_capture(data)
        assert KEY_CANARY.encode() not in body and NUMBER_CANARY.encode() not in body, body
        assert verdicts(body) == verdicts(data)
    kept = redact_capture(sse(call, {"error": {"type": "server_error", "code": 503, "message": "m"}}))
    assert b'"type":"server_error","code":503' in kept  # words from the provider's list stay


def test_argument_text_in_a_shape_the_dialect_never_has_keeps_none_of_its_keys_or_numbers() -> None:
    args = {KEY_CANARY: int(NUMBER_CANARY)}
    call = chat({"tool_calls": [entry(0, '{"q": 1}', "c1")]})
    shapes = {
        "an entry that is a list": chat({"tool_calls": [[{"index": 1, "function": {"arguments": args}}]]}),
        "choices that are an object": {"object": "chat.completion.chunk", "choices": {"0": {"delta": {"tool_calls": [{"function": {"arguments": args}}]}}}},
        "a delta that is a list": {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": [{"tool_calls": [{"function": {"arguments": args}}]}]}]},
        "an event that is a list": [{"choices": [{"delta": {"tool_calls": [{"function": {"arguments": args}}]}}]}],
    }
    for what, shape in shapes.items():
        data = sse(call, shape, chat({}, "tool_calls"), done=True)
        body = redact_capture(data)
        assert KEY_CANARY.encode() not in body and NUMBER_CANARY.encode() not in body, what
        assert verdicts(body) == verdicts(data), what
        assert stray_argument_text(read_capture(data)) != [], what  # never downloaded as received
