"""Demo scenarios as provider-exact wire bytes for every dialect a mock provider serves.

The built-in demos (:data:`toollatch.demo.demos.DEMOS`) exist as OpenAI Chat Completions and
Anthropic Messages recordings. A mock provider must answer each scenario in the dialect of
the endpoint it is asked at, so this module turns a demo into a dialect-independent
:class:`Script` (text pieces, tool calls with their exact argument fragments, whether the
stream ended normally) and writes that script back out as:

* OpenAI Chat Completions chunks (``chat.completion.chunk`` … ``data: [DONE]``);
* OpenAI Responses events (``response.created`` → ``response.output_item.added`` →
  ``response.function_call_arguments.delta``/``.done`` → ``response.output_item.done`` →
  ``response.completed``; OpenAI API reference, "Responses → Streaming events");
* Anthropic Messages events (the demos' own writer).

Where a demo already exists in the requested dialect its bytes are served verbatim.
Fragment boundaries are kept, so each call fills its buffer the same way in every dialect,
and a truncated scenario stops after the same fragment. The non-streaming bodies
(:func:`toollatch.demo.bodies.final_response`) use the same model, and so does the reverse direction
(:mod:`toollatch.wire.retell`: a non-streaming response body → a script, so a dashboard can
assemble it like a stream).

Pure: no I/O, no web imports; the same bytes on every call (re-chunking is seeded).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Literal

from toollatch.wire.capture import DONE, read_capture
from toollatch.demo.demos import DEMOS, _anthropic_events, _Call, _sse, _token
from toollatch.wire.untrusted import parse_json

MockDialect = Literal["openai-chat", "openai-responses", "anthropic"]
#: Dialects a mock provider serves, in the order endpoints are listed.
MOCK_DIALECTS: tuple[MockDialect, ...] = ("openai-chat", "openai-responses", "anthropic")
#: Demo-name prefix of each dialect that has built-in recordings.
_PREFIX = {"openai-chat": "openai", "anthropic": "anthropic"}
_CREATED = 1767225600
_RESPONSES_MODEL = "gpt-4o-2024-08-06"
_ANTHROPIC_MODEL = "claude-sonnet-4-5-20250929"


class ScenarioError(LookupError):
    """No scenario of that name."""


@dataclass(frozen=True)
class WireCall:
    """One tool call: its id, tool name, and argument text as the fragments streamed.

    ``kind`` ``custom_tool_call`` (Responses only): the fragments are a custom tool's free
    text ``input``, written as that item type and its ``custom_tool_call_input`` events.
    ``local_shell_call``, ``shell_call``, ``apply_patch_call``, ``computer_call`` (Responses
    only): the fragments are the JSON text of the item's ``action`` / ``operation``, written
    whole in its ``output_item.done`` (those items stream no argument deltas).
    """

    call_id: str
    name: str
    fragments: tuple[str, ...]
    kind: str = "function_call"

    @property
    def arguments(self) -> str:
        return "".join(self.fragments)


@dataclass(frozen=True)
class Script:
    """What one response says, independent of dialect.

    ``text``: assistant text pieces (streamed before the calls). ``complete``: the stream
    reached the provider's end; when False the writers stop right after the last
    fragment of the last call, with no closing events (a dropped connection).
    ``stop_reason``: the reason the provider gave for that end (OpenAI Chat
    ``finish_reason``, Anthropic ``stop_reason``, Responses ``incomplete_details.reason``),
    written as it is; None: the writer's own (``tool_calls``/``stop``, ``tool_use``/
    ``end_turn``, ``response.completed``).
    """

    name: str
    text: tuple[str, ...]
    calls: tuple[WireCall, ...]
    complete: bool = True
    stop_reason: str | None = None


# ------------------------------------------------------------------ scenarios


def scenario_names() -> list[str]:
    """Dialect-independent scenario names in demo order: ``single``, ``parallel``, …, ``canary``."""
    names: dict[str, None] = {}
    for name in DEMOS:
        prefix, _, rest = name.partition("-")
        names[rest if prefix in _PREFIX.values() and rest else name] = None
    return list(names)


def _demo_name(scenario: str, dialect: str) -> str | None:
    """The built-in demo recording of ``scenario`` in ``dialect``, if there is one."""
    prefix = _PREFIX.get(dialect)
    for name in (f"{prefix}-{scenario}" if prefix else None, scenario):
        if name is not None and name in DEMOS and DEMOS[name].dialect == dialect:
            return name
    return None


def scenario_script(scenario: str) -> Script:
    """The :class:`Script` of a scenario, read from its OpenAI Chat recording."""
    name = _demo_name(scenario, "openai-chat")
    if name is None:
        raise ScenarioError(f"no scenario {scenario!r}; known: {', '.join(scenario_names())}")
    return script_from_chat_wire(scenario, DEMOS[name].wire)


def scenario_events(scenario: str, dialect: MockDialect) -> list[bytes]:
    """Wire bytes of ``scenario`` in ``dialect``, one SSE event per item (join for the body)."""
    name = _demo_name(scenario, dialect)
    if name is not None:
        return split_events(DEMOS[name].wire)
    return stream_events(scenario_script(scenario), dialect)


def split_events(wire: bytes) -> list[bytes]:
    """``wire`` cut after each blank line (``\\n\\n``); joined, the pieces are ``wire``."""
    out: list[bytes] = []
    start = 0
    while (end := wire.find(b"\n\n", start)) != -1:
        out.append(wire[start : end + 2])
        start = end + 2
    if start < len(wire):
        out.append(wire[start:])
    return out


def rechunk(data: bytes, seed: int, max_size: int = 64) -> list[bytes]:
    """``data`` cut at seeded random byte positions (pieces of 1 … ``max_size`` bytes),
    as a gateway may re-chunk a stream: mid-line, mid-UTF-8 character, anywhere."""
    rng = random.Random(seed)
    out: list[bytes] = []
    i = 0
    while i < len(data):
        size = rng.randint(1, max(1, max_size))
        out.append(data[i : i + size])
        i += size
    return out


# ------------------------------------------------------------------ reading


def script_from_chat_wire(name: str, wire: bytes) -> Script:
    """A :class:`Script` from OpenAI Chat Completions SSE (fragments kept as streamed)."""
    text: list[str] = []
    ids: dict[int, str] = {}
    names: dict[int, str] = {}
    fragments: dict[int, list[str]] = {}
    complete = False
    for event in read_capture(wire, name):
        if event.data == DONE:
            continue
        for choice in event.data.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                index = int(tc["index"])
                fragments.setdefault(index, [])
                if tc.get("id"):
                    ids[index] = tc["id"]
                function = tc.get("function") or {}
                if function.get("name"):
                    names[index] = function["name"]
                if function.get("arguments"):
                    fragments[index].append(function["arguments"])
            if choice.get("finish_reason"):
                complete = True
    calls = tuple(WireCall(ids.get(i, f"call_{i}"), names.get(i, ""), tuple(fragments[i])) for i in sorted(fragments))
    return Script(name, tuple(text), calls, complete)


# ------------------------------------------------------------------ writing


def stream_events(script: Script, dialect: MockDialect) -> list[bytes]:
    """``script`` as SSE events of ``dialect``."""
    if dialect == "openai-chat":
        return _chat_events(script)
    if dialect == "openai-responses":
        return _responses_events(script)
    if dialect == "anthropic":
        events, last = _anthropic_events(script.name, [_Call(c.name, c.fragments) for c in script.calls], "".join(script.text) or None)
        events = _anthropic_ids(events, script)
        if script.complete and script.stop_reason is not None:
            events = [_anthropic_stop(e, script.stop_reason) for e in events]
        return events if script.complete or not last else events[: last[-1] + 1]
    raise ValueError(f"dialect {dialect!r} is not served by the mock")


def _anthropic_ids(events: list[bytes], script: Script) -> list[bytes]:
    """Keep each call's own id when the Anthropic writer made up a ``toolu_`` one."""
    out: list[bytes] = []
    n = 0
    for event in events:
        if b'"tool_use"' in event and n < len(script.calls) and script.calls[n].call_id.startswith("toolu_"):
            head, _, body = event.partition(b"data: ")
            doc = json.loads(body)
            doc["content_block"]["id"] = script.calls[n].call_id
            event = _sse(doc, "content_block_start")
        if b'"tool_use"' in event:
            n += 1
        out.append(event)
    return out


def _anthropic_stop(event: bytes, reason: str) -> bytes:
    """``event`` with ``reason`` as its ``message_delta`` stop reason (other events as they are)."""
    if not event.startswith(b"event: message_delta"):
        return event
    doc = json.loads(event.partition(b"data: ")[2])
    doc["delta"]["stop_reason"] = reason
    return _sse(doc, "message_delta")


def _chat_events(script: Script) -> list[bytes]:
    base = {
        "id": f"chatcmpl-{_token(script.name, 29)}",
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": _RESPONSES_MODEL,
        "service_tier": "default",
        "system_fingerprint": "fp_" + _token(script.name + "fp", 10).lower(),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

    events = [chunk({"role": "assistant", "content": None, "refusal": None})]
    events += [chunk({"content": piece}) for piece in script.text]
    for index, call in enumerate(script.calls):
        start = {"index": index, "id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        events.append(chunk({"tool_calls": [start]}))
        events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": f}}]}) for f in call.fragments]
    if script.complete:
        finish = script.stop_reason if script.stop_reason is not None else "tool_calls" if script.calls else "stop"
        events += [chunk({}, finish), _sse(DONE)]
    return events


def _response_doc(script: Script, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": "resp_" + _token(script.name + "/resp", 40).lower(), "object": "response", "created_at": _CREATED, "status": status,
        "background": False, "error": None, "incomplete_details": None, "instructions": None, "max_output_tokens": None,
        "model": _RESPONSES_MODEL, "output": output, "parallel_tool_calls": True, "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None}, "service_tier": "default", "store": True, "temperature": 1.0,
        "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled",
        "usage": usage, "user": None, "metadata": {},
    }


def _message_item(script: Script, status: str) -> dict[str, Any]:
    text = "".join(script.text)
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
    return {"id": "msg_" + _token(script.name + "/msg", 40).lower(), "type": "message", "status": status, "content": [part], "role": "assistant"}


#: Responses client items whose arguments are an object field, and that field.
ACTION_ITEMS = {"local_shell_call": "action", "shell_call": "action", "apply_patch_call": "operation", "computer_call": "action", "tool_search_call": "arguments"}


def _function_item(script: Script, index: int, status: str, arguments: str) -> dict[str, Any]:
    call = script.calls[index]
    if call.kind in ACTION_ITEMS:
        item: dict[str, Any] = {"id": "it_" + _token(f"{script.name}/it/{index}", 40).lower(), "type": call.kind, "status": status, "call_id": call.call_id}
        if call.kind == "tool_search_call":
            item["execution"] = "client"  # only the client's searches are re-told
        if arguments:
            value, problem = parse_json(arguments.encode("utf-8", "surrogatepass"))
            value = arguments if problem is not None else value  # text that is not JSON: written as it is, judged as such
            if call.kind == "computer_call" and isinstance(value, dict) and set(value) == {"actions"}:
                item["actions"] = value["actions"]
            else:
                item[ACTION_ITEMS[call.kind]] = value
        return item
    if call.kind == "custom_tool_call":
        item_id = "ctc_" + _token(f"{script.name}/ctc/{index}", 40).lower()
        return {"id": item_id, "type": "custom_tool_call", "status": status, "input": arguments, "call_id": call.call_id, "name": call.name}
    item_id = "fc_" + _token(f"{script.name}/fc/{index}", 40).lower()
    return {"id": item_id, "type": "function_call", "status": status, "arguments": arguments, "call_id": call.call_id, "name": call.name}


def _usage(script: Script) -> dict[str, Any]:
    out_tokens = 24 + sum(len(c.arguments) // 4 for c in script.calls) + len("".join(script.text)) // 4
    return {
        "input_tokens": 612,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 612 + out_tokens,
    }


def _responses_events(script: Script) -> list[bytes]:
    seq = 0
    events: list[bytes] = []

    def emit(kind: str, body: dict[str, Any]) -> None:
        nonlocal seq
        events.append(_sse({"type": kind, "sequence_number": seq, **body}, kind))
        seq += 1

    emit("response.created", {"response": _response_doc(script, "in_progress", [], None)})
    emit("response.in_progress", {"response": _response_doc(script, "in_progress", [], None)})
    done: list[dict[str, Any]] = []
    if script.text:
        item = _message_item(script, "in_progress")
        mid, text = item["id"], "".join(script.text)
        emit("response.output_item.added", {"output_index": 0, "item": {**item, "content": []}})
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        emit("response.content_part.added", {"item_id": mid, "output_index": 0, "content_index": 0, "part": part})
        for piece in script.text:
            emit("response.output_text.delta", {"item_id": mid, "output_index": 0, "content_index": 0, "delta": piece, "logprobs": []})
        emit("response.output_text.done", {"item_id": mid, "output_index": 0, "content_index": 0, "text": text, "logprobs": []})
        emit("response.content_part.done", {"item_id": mid, "output_index": 0, "content_index": 0, "part": {**part, "text": text}})
        done.append(_message_item(script, "completed"))
        emit("response.output_item.done", {"output_index": 0, "item": done[-1]})
    for n, call in enumerate(script.calls):
        index = len(done)
        added = _function_item(script, n, "in_progress", "")
        emit("response.output_item.added", {"output_index": index, "item": added})
        if call.kind in ACTION_ITEMS:  # its action comes whole, with output_item.done
            if not script.complete and n == len(script.calls) - 1:
                return events
            done.append(_function_item(script, n, "completed", call.arguments))
            emit("response.output_item.done", {"output_index": index, "item": done[-1]})
            continue
        kind, field = ("custom_tool_call_input", "input") if call.kind == "custom_tool_call" else ("function_call_arguments", "arguments")
        for fragment in call.fragments:
            emit(f"response.{kind}.delta", {"item_id": added["id"], "output_index": index, "delta": fragment})
        if not script.complete and n == len(script.calls) - 1:
            return events  # the connection dropped inside this call's arguments
        emit(f"response.{kind}.done", {"item_id": added["id"], "output_index": index, field: call.arguments})
        done.append(_function_item(script, n, "completed", call.arguments))
        emit("response.output_item.done", {"output_index": index, "item": done[-1]})
    if script.complete and script.stop_reason is not None:
        doc = _response_doc(script, "incomplete", done, _usage(script))
        doc["incomplete_details"] = {"reason": script.stop_reason}
        emit("response.incomplete", {"response": doc})
    elif script.complete:
        emit("response.completed", {"response": _response_doc(script, "completed", done, _usage(script))})
    return events


__all__ = [
    "MOCK_DIALECTS", "MockDialect", "ScenarioError", "Script", "WireCall", "rechunk", "scenario_events",
    "scenario_names", "scenario_script", "script_from_chat_wire", "split_events", "stream_events",
]
