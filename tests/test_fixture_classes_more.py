"""The fixture classes of DESIGN.md for the other dialects, on provider-exact wire bytes.

``test_fixture_classes.py`` covers OpenAI Chat and Anthropic Messages; this module covers
the rest, each built in its provider's documented stream format:

* OpenAI Responses (API reference, "Responses → Streaming events"): ``event:``/``data:`` SSE,
  ``response.created``, ``response.in_progress``, per call ``response.output_item.added``
  (``function_call`` item with ``call_id``), ``response.function_call_arguments.delta``
  (``item_id``, ``output_index``, ``delta``), ``.done`` (``arguments``),
  ``response.output_item.done``, then ``response.completed``; errors as the ``error`` event.
* Bedrock ``ConverseStream`` (Bedrock API reference): ``messageStart``,
  ``contentBlockStart.start.toolUse`` {``toolUseId``, ``name``}, ``contentBlockDelta.delta.
  toolUse.input`` fragments, ``contentBlockStop``, ``messageStop`` (``stopReason``),
  ``metadata``; errors as ``throttlingException`` and friends. Framed twice: JSON Lines as the
  SDKs print decoded events, and the raw ``application/vnd.amazon.eventstream`` body.
* Bedrock ``InvokeModelWithResponseStream`` for Claude: ``chunk.bytes`` = base64 of each
  Anthropic Messages event; errors as ``modelStreamErrorException``. Framed twice as well.
* Gemini ``streamGenerateContent?alt=sse`` (GenerateContentResponse): complete
  ``functionCall`` parts {``name``, ``args``, ``id``}; the last chunk carries
  ``finishReason``; errors as ``{"error": {code, message, status}}``.
* Vertex AI with ``streamFunctionCallArguments`` ("FunctionCall" / "PartialArg"):
  ``{name, willContinue: true}``, ``partialArgs`` (``jsonPath``, ``stringValue`` pieces
  ending with an empty piece, ``numberValue``/``boolValue``), a ``functionCall: {}`` part ends
  the call. JSON Lines, as the Vertex SDK captures store it.
* Cohere v2 chat (API reference, "Chat (v2) → streaming"): ``message-start``,
  ``tool-plan-delta``, ``tool-call-start`` / ``tool-call-delta`` / ``tool-call-end`` keyed by
  ``index``, ``message-end`` (``finish_reason``); a generation error as
  ``message-end`` with ``finish_reason: ERROR``.

Classes: single tool, two parallel tools, tool with no arguments, oversized arguments,
cancel mid-stream, truncated stream, provider error event.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from toollatch import AssembleConfig, CallState, Pipeline, iter_capture
from toollatch.core.model import StreamResult

from .test_eventstream import encode_events
from .test_fixture_classes import Call, anthropic_end, anthropic_message_start, anthropic_tool_block, assemble_bytes, registry_for

Event = dict[str, Any]

# ------------------------------------------------------------------ framings


def _dumps(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def typed_sse(events: Sequence[Event]) -> bytes:
    """``event: <type>`` + ``data: <json>`` pairs (OpenAI Responses, Cohere v2)."""
    return b"".join(f"event: {e['type']}\ndata: {_dumps(e)}\n\n".encode() for e in events)


def gemini_sse(events: Sequence[Event]) -> bytes:
    """``data:`` lines with CRLF blank lines, as ``alt=sse`` sends them."""
    return b"".join(f"data: {json.dumps(e, ensure_ascii=False)}\r\n\r\n".encode() for e in events)


def jsonl(events: Sequence[Event]) -> bytes:
    return b"".join(_dumps(e).encode() + b"\n" for e in events)


# ------------------------------------------------------------------ OpenAI Responses


def responses_events(calls: Sequence[Call]) -> list[Event]:
    seq = iter(range(10_000))
    response = {"id": "resp_fixture01", "object": "response", "created_at": 1767225600, "model": "gpt-4.1-2025-04-14", "output": []}
    events: list[Event] = [
        {"type": "response.created", "sequence_number": next(seq), "response": {**response, "status": "in_progress"}},
        {"type": "response.in_progress", "sequence_number": next(seq), "response": {**response, "status": "in_progress"}},
    ]
    for i, (call_id, name, fragments) in enumerate(calls):
        item = {"type": "function_call", "id": f"fc_fixture{i}", "call_id": call_id, "name": name, "arguments": "", "status": "in_progress"}
        events.append({"type": "response.output_item.added", "sequence_number": next(seq), "output_index": i, "item": item})
        for text in fragments:
            events.append(
                {"type": "response.function_call_arguments.delta", "sequence_number": next(seq), "item_id": item["id"], "output_index": i, "delta": text}
            )
        whole = "".join(fragments)
        events.append(
            {"type": "response.function_call_arguments.done", "sequence_number": next(seq), "item_id": item["id"], "output_index": i, "arguments": whole}
        )
        done_item = {**item, "arguments": whole, "status": "completed"}
        events.append({"type": "response.output_item.done", "sequence_number": next(seq), "output_index": i, "item": done_item})
    return events


def responses_end() -> list[Event]:
    response = {"id": "resp_fixture01", "object": "response", "status": "completed", "model": "gpt-4.1-2025-04-14"}
    return [{"type": "response.completed", "sequence_number": 9_999, "response": response}]


def responses_error() -> list[Event]:
    return [{"type": "error", "sequence_number": 9_998, "code": "server_error", "message": "The server had an error", "param": None}]


# ------------------------------------------------------------------ Bedrock ConverseStream


def converse_events(calls: Sequence[Call]) -> list[Event]:
    events: list[Event] = [{"messageStart": {"role": "assistant"}}]
    for i, (call_id, name, fragments) in enumerate(calls):
        events.append({"contentBlockStart": {"contentBlockIndex": i, "start": {"toolUse": {"toolUseId": call_id, "name": name}}}})
        events += [{"contentBlockDelta": {"contentBlockIndex": i, "delta": {"toolUse": {"input": f}}}} for f in fragments]
        events.append({"contentBlockStop": {"contentBlockIndex": i}})
    return events


def converse_end() -> list[Event]:
    return [
        {"messageStop": {"stopReason": "tool_use"}},
        {"metadata": {"usage": {"inputTokens": 412, "outputTokens": 57, "totalTokens": 469}, "metrics": {"latencyMs": 812}}},
    ]


def bedrock_error() -> list[Event]:
    return [{"throttlingException": {"message": "Too many requests, please wait before trying again."}}]


# ------------------------------------------------------------------ Bedrock InvokeModelWithResponseStream (Claude)


def _chunk(anthropic_event: Event) -> Event:
    return {"chunk": {"bytes": base64.b64encode(_dumps(anthropic_event).encode()).decode()}}


def invoke_events(calls: Sequence[Call]) -> list[Event]:
    events = [anthropic_message_start("msg_bdrk_01Fixture")]
    for i, (call_id, name, fragments) in enumerate(calls):
        events += anthropic_tool_block(i, call_id, name, fragments)
    return [_chunk(e) for e in events]


def invoke_end() -> list[Event]:
    delta, stop = anthropic_end()
    metrics = {"inputTokenCount": 412, "outputTokenCount": 57, "invocationLatency": 1967, "firstByteLatency": 603}
    return [_chunk(delta), _chunk({**stop, "amazon-bedrock-invocationMetrics": metrics})]


def invoke_error() -> list[Event]:
    return [{"modelStreamErrorException": {"message": "Model stream error", "originalStatusCode": 500}}]


# ------------------------------------------------------------------ Gemini (complete functionCall parts)


def _args(fragments: Sequence[str]) -> Any:
    return json.loads("".join(fragments)) if fragments else None


def _gemini_chunk(parts: list[Event], finish: str | None = None) -> Event:
    candidate: Event = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-3-pro-preview", "responseId": "fixtureResp01"}


def gemini_events(calls: Sequence[Call]) -> list[Event]:
    """One chunk per call; Gemini 3 sends an ``id`` with each functionCall."""
    chunks = []
    for call_id, name, fragments in calls:
        fc: Event = {"name": name, "id": call_id}
        if fragments:
            fc["args"] = _args(fragments)
        chunks.append(_gemini_chunk([{"functionCall": fc}]))
    return chunks


def gemini_end() -> list[Event]:
    end = _gemini_chunk([{"text": ""}], finish="STOP")
    end["usageMetadata"] = {"promptTokenCount": 121, "candidatesTokenCount": 36, "totalTokenCount": 157}
    return [end]


def gemini_error() -> list[Event]:
    return [{"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}]


# ------------------------------------------------------------------ Vertex partialArgs


def partial_args(value: Any, path: str = "$") -> list[Event]:
    """Vertex ``partialArgs`` entries for ``value``: strings in 5-character ``stringValue``
    pieces closed by an empty piece, numbers and booleans set whole."""
    if isinstance(value, dict):
        return [e for k, v in value.items() for e in partial_args(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [e for i, v in enumerate(value) for e in partial_args(v, f"{path}[{i}]")]
    if isinstance(value, str):
        pieces = [value[i : i + 5] for i in range(0, len(value), 5)]
        return [*({"jsonPath": path, "stringValue": p, "willContinue": True} for p in pieces), {"jsonPath": path, "stringValue": ""}]
    if isinstance(value, bool):
        return [{"jsonPath": path, "boolValue": value}]
    if value is None:
        return [{"jsonPath": path, "nullValue": None}]
    return [{"jsonPath": path, "numberValue": value}]


def vertex_events(calls: Sequence[Call]) -> list[Event]:
    """No ids (Vertex): the adapter synthesises them. The last call's ``functionCall: {}``
    terminator comes with the ``finishReason`` chunk (see :func:`vertex_end`)."""
    chunks = []
    for n, (_, name, fragments) in enumerate(calls):
        if not fragments:
            chunks.append(_gemini_chunk([{"functionCall": {"name": name}}]))
            continue
        chunks.append(_gemini_chunk([{"functionCall": {"name": name, "willContinue": True}}]))
        for entry in partial_args(_args(fragments)):
            chunks.append(_gemini_chunk([{"functionCall": {"partialArgs": [entry], "willContinue": True}}]))
        if n < len(calls) - 1:
            chunks.append(_gemini_chunk([{"functionCall": {}}]))
    return chunks


def vertex_end() -> list[Event]:
    return [_gemini_chunk([{"functionCall": {}}], finish="STOP")]


# ------------------------------------------------------------------ Cohere v2


def cohere_events(calls: Sequence[Call]) -> list[Event]:
    events: list[Event] = [
        {"id": "c0ffee00-fixture", "type": "message-start", "delta": {"message": {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}}},
        {"type": "tool-plan-delta", "delta": {"message": {"tool_plan": "I will call the tools."}}},
    ]
    for i, (call_id, name, fragments) in enumerate(calls):
        entry = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        events.append({"type": "tool-call-start", "index": i, "delta": {"message": {"tool_calls": entry}}})
        events += [{"type": "tool-call-delta", "index": i, "delta": {"message": {"tool_calls": {"function": {"arguments": f}}}}} for f in fragments]
        events.append({"type": "tool-call-end", "index": i})
    return events


def cohere_end() -> list[Event]:
    usage = {"billed_units": {"input_tokens": 37, "output_tokens": 28}, "tokens": {"input_tokens": 1200, "output_tokens": 90}}
    return [{"type": "message-end", "delta": {"finish_reason": "TOOL_CALL", "usage": usage}}]


def cohere_error() -> list[Event]:
    return [{"type": "message-end", "delta": {"finish_reason": "ERROR", "error": "internal generation error"}}]


# ------------------------------------------------------------------ the dialects


@dataclass(frozen=True)
class Wire:
    """One dialect in one framing: events for the calls, the normal end, an error, bytes."""

    dialect: str
    calls: Callable[[Sequence[Call]], list[Event]]
    end: Callable[[], list[Event]]
    error: Callable[[], list[Event]]
    frame: Callable[[Sequence[Event]], bytes]
    error_text: str
    whole_object: bool = False  # arguments reach the assembler as one JSON text at call end (Gemini)
    synthesized_ids: bool = False  # the provider sends no call ids (Vertex): gemini_call_<n>

    def call_id(self, given: str, n: int) -> str:
        return f"gemini_call_{n}" if self.synthesized_ids else given

    def bytes(self, calls: Sequence[Call], *, end: bool = True) -> bytes:
        return self.frame(self.calls(calls) + (self.end() if end else []))

    def expected_bytes(self, fragments: Sequence[str]) -> int:
        if self.whole_object:
            return len(json.dumps(_args(fragments), ensure_ascii=False, separators=(",", ":")).encode()) if fragments else 0
        return len("".join(fragments).encode())

    def expected_fragments(self, fragments: Sequence[str]) -> int:
        return min(1, len(fragments)) if self.whole_object else sum(1 for f in fragments if f)


WIRES = [
    Wire("openai-responses", responses_events, responses_end, responses_error, typed_sse, "error: server_error: The server had an error"),
    Wire("bedrock-converse", converse_events, converse_end, bedrock_error, jsonl, "throttlingException: Too many requests"),
    Wire("bedrock-converse", converse_events, converse_end, bedrock_error, encode_events, "throttlingException: Too many requests"),
    Wire("bedrock-invoke", invoke_events, invoke_end, invoke_error, jsonl, "modelStreamErrorException: Model stream error"),
    Wire("bedrock-invoke", invoke_events, invoke_end, invoke_error, encode_events, "modelStreamErrorException: Model stream error"),
    Wire("gemini", gemini_events, gemini_end, gemini_error, gemini_sse, "503: UNAVAILABLE: The model is overloaded", whole_object=True),
    Wire("gemini", vertex_events, vertex_end, gemini_error, jsonl, "503: UNAVAILABLE: The model is overloaded", True, True),
    Wire("cohere", cohere_events, cohere_end, cohere_error, typed_sse, "message-end ERROR: internal generation error"),
]
IDS = ["openai-responses", "bedrock-converse-jsonl", "bedrock-converse-eventstream", "bedrock-invoke-jsonl"]
IDS += ["bedrock-invoke-eventstream", "gemini-functioncall", "vertex-partialargs", "cohere-v2"]
REGISTRY = registry_for("anthropic")  # the schemas; which provider's tools format is irrelevant here


def assemble(wire: Wire, data: bytes, **kwargs: Any) -> StreamResult:
    (stream,) = assemble_bytes(data, registry=REGISTRY, **kwargs)
    assert stream.dialect == wire.dialect
    return stream


def events_of(data: bytes) -> list[Any]:
    return list(iter_capture([data]))


# ------------------------------------------------------------------ the classes


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
def test_single_tool(wire: Wire) -> None:
    fragments = ['{"ci', 'ty": "Zü', "rich", '", "unit": "c"}']
    stream = assemble(wire, wire.bytes([("call_1", "get_weather", fragments)]))
    assert stream.end == "complete"
    (call,) = stream.calls
    assert (call.call_id, call.name, call.state, call.reason) == (wire.call_id("call_1", 0), "get_weather", CallState.COMMITTED, None)
    assert call.arguments == {"city": "Zürich", "unit": "c"} and call.executor == "client"
    assert (call.bytes, call.fragments) == (wire.expected_bytes(fragments), wire.expected_fragments(fragments))
    assert stream.results == []


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
def test_two_parallel_tools(wire: Wire) -> None:
    calls = [
        ("call_A", "get_weather", ['{"city"', ': "Par', 'is"}']),
        ("call_B", "get_weather", ['{"ci', 'ty": "Lim', 'a", "unit"', ': "f"}']),
    ]
    stream = assemble(wire, wire.bytes(calls))
    ids = [wire.call_id("call_A", 0), wire.call_id("call_B", 1)]
    assert [(c.call_id, c.state) for c in stream.calls] == [(ids[0], CallState.COMMITTED), (ids[1], CallState.COMMITTED)]
    assert [c.arguments for c in stream.calls] == [{"city": "Paris"}, {"city": "Lima", "unit": "f"}]
    assert [c.fragments for c in stream.calls] == [wire.expected_fragments(c[2]) for c in calls]
    assert len({c.key for c in stream.calls}) == 2 and stream.results == []


def test_gemini_parallel_calls_in_one_chunk() -> None:
    wire = WIRES[IDS.index("gemini-functioncall")]
    (a, b) = gemini_events([("id_a", "get_weather", ['{"city": "Oslo"}']), ("id_b", "get_time", [])])
    one = _gemini_chunk(a["candidates"][0]["content"]["parts"] + b["candidates"][0]["content"]["parts"])
    stream = assemble(wire, gemini_sse([one, *gemini_end()]))
    assert [(c.key, c.call_id, c.state, c.arguments) for c in stream.calls] == [
        ((0, 0), "id_a", CallState.COMMITTED, {"city": "Oslo"}),
        ((0, 1), "id_b", CallState.COMMITTED, {}),
    ]


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
def test_tool_with_no_arguments(wire: Wire) -> None:
    stream = assemble(wire, wire.bytes([("call_T", "get_time", [])]))
    (call,) = stream.calls
    assert (call.state, call.arguments, call.bytes, call.fragments) == (CallState.COMMITTED, {}, 0, 0)


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
def test_no_arguments_still_meet_required(wire: Wire) -> None:
    stream = assemble(wire, wire.bytes([("call_W", "get_weather", [])]))
    (call,) = stream.calls
    assert call.state is CallState.FAILED and call.reason is not None and call.reason.startswith("schema_invalid: /: required")
    assert [(r.tool_call_id, r.is_error) for r in stream.results] == [(call.call_id, True)]


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
def test_oversized_arguments(wire: Wire) -> None:
    limit = 64
    big = '{"city": "' + "x" * 150 + '"}'
    pieces = [big[i : i + 16] for i in range(0, len(big), 16)]
    calls = [("call_S", "get_weather", ['{"city": "Oslo"}']), ("call_L", "get_weather", pieces), ("call_T", "get_time", ["{}"])]
    stream = assemble(wire, wire.bytes(calls), config=AssembleConfig(max_tool_argument_bytes=limit))
    small, large, other = stream.calls
    assert large.state is CallState.FAILED and large.arguments is None
    assert large.reason is not None and large.reason.startswith("arguments_exceed_max_bytes")
    assert large.bytes == wire.expected_bytes(pieces) > limit and large.fragments == wire.expected_fragments(pieces)
    assert (small.state, small.arguments) == (CallState.COMMITTED, {"city": "Oslo"})
    assert (other.state, other.arguments) == (CallState.COMMITTED, {})
    assert [(r.tool_call_id, r.is_error) for r in stream.results] == [(large.call_id, True)]
    assert stream.end == "complete"


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
def test_cancel_mid_stream(wire: Wire) -> None:
    calls = [("call_A", "get_weather", ['{"city"', ': "Par', 'is"}']), ("call_B", "get_time", ["{", "}"])]
    events = events_of(wire.bytes(calls))
    pipeline = Pipeline(registry=REGISTRY)
    half = len(events) // 2
    for event in events[:half]:
        pipeline.feed(event)
    opened = [v.call_id for s in pipeline.streams for v in s.views()]
    assert opened, "half of the stream should have opened at least one call"
    assert pipeline.committed(0, pipeline.streams[0].views()[0].key) is None
    out = pipeline.cancel()
    assert out[-1].kind == "stream_end" and out[-1].end == "cancelled"
    (stream,) = pipeline.results()
    assert stream.dialect == wire.dialect and stream.end == "cancelled"
    assert [c.call_id for c in stream.calls] == opened
    assert all(c.state is CallState.CANCELLED and c.arguments is None for c in stream.calls)
    assert [r.tool_call_id for r in stream.results] == opened
    assert all(r.is_error and r.content.startswith("cancelled") for r in stream.results)
    for event in events[half:]:  # the rest arrives after the stop: ignored
        assert pipeline.feed(event) == []
    assert pipeline.close() == []
    assert pipeline.results()[0].to_json() == stream.to_json()


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
def test_truncated_stream(wire: Wire) -> None:
    calls = [("call_A", "get_weather", ['{"city": "Paris"}']), ("call_B", "get_time", ["{}"])]
    stream = assemble(wire, wire.bytes(calls, end=False))
    assert stream.end == "truncated"
    assert [c.state for c in stream.calls] == [CallState.FAILED, CallState.FAILED]
    assert all(c.reason is not None and c.reason.startswith("stream_truncated") and c.arguments is None for c in stream.calls)
    assert [(r.tool_call_id, r.is_error) for r in stream.results] == [(c.call_id, True) for c in stream.calls]


@pytest.mark.parametrize("wire", WIRES, ids=IDS)
def test_provider_error_event(wire: Wire) -> None:
    calls = [("call_A", "get_weather", ['{"city": "Paris"}']), ("call_B", "get_weather", ['{"ci', 'ty": "Lima"}'])]
    events = wire.calls(calls)
    if wire.calls is not gemini_events:  # the error arrives while call_B is still open (its block stop dropped)
        events = events[:-1]
    stream = assemble(wire, wire.frame(events + wire.error()))
    named, _, message = wire.error_text.rpartition(": ")  # the provider's free text is shown only when revealed
    assert stream.end == "error" and stream.end_detail == named
    assert not any(message in (c.reason or "") for c in stream.calls)
    assert len(stream.calls) == 2
    assert all(c.state is CallState.FAILED and c.arguments is None for c in stream.calls)
    assert all(c.reason is not None and c.reason.startswith("stream_error") for c in stream.calls)
    assert [(r.tool_call_id, r.is_error) for r in stream.results] == [(c.call_id, True) for c in stream.calls]
    assert all(r.content.startswith("stream_error") for r in stream.results)
