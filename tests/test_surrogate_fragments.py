"""Fragments are pieces of one string: a UTF-16 surrogate pair split across two fragments is
one character once joined, in every dialect; a surrogate still unpaired after the join fails.

Each dialect's stream is written as real wire bytes (JSON events written with ``\\uXXXX``
escapes, so a fragment that ends between the halves of a pair carries a lone ``\\ud83d``,
as a provider that cuts UTF-16 text sends it) and read back through the whole pipeline.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch.wire.capture import read_capture
from toollatch.core.finalize import StrictJSONError, join_surrogate_pairs, strict_loads
from toollatch.core.model import CallState, StreamResult
from toollatch.core.pipeline import assemble_events

Fragments = list[str]


def _sse(events: list[dict[str, Any]], *, named: bool = False) -> bytes:
    out = []
    for e in events:
        head = f"event: {e['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(e)}\n\n")
    return "".join(out).encode("ascii")


def _jsonl(events: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in events).encode("ascii")


def chat(fragments: Fragments) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    first = {"role": "assistant", "tool_calls": [{"index": 0, "id": "call_A", "type": "function", "function": {"name": "post", "arguments": ""}}]}
    events = [chunk(first)] + [chunk({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}) for f in fragments]
    return _sse([*events, chunk({}, "tool_calls")]) + b"data: [DONE]\n\n"


def responses(fragments: Fragments) -> bytes:
    item = {"type": "function_call", "id": "fc_A", "call_id": "call_A", "name": "post", "arguments": ""}
    text = "".join(fragments)
    events = [
        {"type": "response.created", "response": {"id": "resp_A", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        *({"type": "response.function_call_arguments.delta", "item_id": "fc_A", "output_index": 0, "delta": f} for f in fragments),
        {"type": "response.function_call_arguments.done", "item_id": "fc_A", "output_index": 0, "arguments": text},
        {"type": "response.output_item.done", "output_index": 0, "item": {**item, "arguments": text}},
        {"type": "response.completed", "response": {"id": "resp_A", "status": "completed"}},
    ]
    return _sse(events, named=True)


def _anthropic_events(fragments: Fragments) -> list[dict[str, Any]]:
    return [
        {"type": "message_start", "message": {"id": "msg_A", "role": "assistant", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_A", "name": "post", "input": {}}},
        *({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": f}} for f in fragments),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]


def anthropic(fragments: Fragments) -> bytes:
    return _sse(_anthropic_events(fragments), named=True)


def bedrock_invoke(fragments: Fragments) -> bytes:
    return _jsonl([{"chunk": {"bytes": base64.b64encode(json.dumps(e).encode("ascii")).decode()}} for e in _anthropic_events(fragments)])


def bedrock_converse(fragments: Fragments) -> bytes:
    return _jsonl([
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tooluse_A", "name": "post"}}}},
        *({"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": f}}}} for f in fragments),
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "tool_use"}},
    ])


def cohere(fragments: Fragments) -> bytes:
    start = {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": {
        "id": "call_A", "type": "function", "function": {"name": "post", "arguments": ""}}}}}
    return _jsonl([
        {"id": "m", "type": "message-start", "delta": {"message": {"role": "assistant"}}},
        start,
        *({"type": "tool-call-delta", "index": 0, "delta": {"message": {"tool_calls": {"function": {"arguments": f}}}}} for f in fragments),
        {"type": "tool-call-end", "index": 0},
        {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL"}},
    ])


def gemini(pieces: Fragments) -> bytes:
    """A Vertex ``streamFunctionCallArguments`` call whose one string argument, ``$.text``,
    arrives as ``stringValue`` pieces (Gemini has no argument text to cut elsewhere)."""

    def chunk(fc: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"functionCall": fc}]}}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate]}

    parts = [chunk({"partialArgs": [{"jsonPath": "$.text", "stringValue": p, "willContinue": True}], "willContinue": True}) for p in pieces]
    return _jsonl([chunk({"name": "post", "willContinue": True}), *parts, chunk({}, "STOP")])


#: Dialects whose fragments are pieces of the argument *text*.
TEXT_DIALECTS: dict[str, Callable[[Fragments], bytes]] = {
    "openai-chat": chat,
    "openai-responses": responses,
    "anthropic": anthropic,
    "bedrock-invoke": bedrock_invoke,
    "bedrock-converse": bedrock_converse,
    "cohere": cohere,
}


def run(wire: bytes) -> StreamResult:
    (result,) = assemble_events(read_capture(wire))
    return result


def code_units(text: str) -> list[str]:
    """``text`` as UTF-16 code units: each astral character becomes its two surrogates."""
    units: list[str] = []
    for ch in text:
        if ord(ch) > 0xFFFF:
            v = ord(ch) - 0x10000
            units += [chr(0xD800 + (v >> 10)), chr(0xDC00 + (v & 0x3FF))]
        else:
            units.append(ch)
    return units


def cut(units: list[str], points: list[int]) -> Fragments:
    """``units`` joined into fragments cut at ``points`` (positions between code units)."""
    bounds = sorted({p for p in points if 0 < p < len(units)})
    edges = [0, *bounds, len(units)]
    return ["".join(units[a:b]) for a, b in zip(edges, edges[1:])]


def verdict(result: StreamResult) -> tuple[Any, ...]:
    (call,) = result.calls
    reason = (call.reason or "").split(":")[0]
    return (result.end, call.state, reason, call.arguments)


# ------------------------------------------------------------------ the join itself


def test_join_pairs_split_halves_and_keeps_lone_ones() -> None:
    assert join_surrogate_pairs("ok \ud83d" + "\ude00 done") == "ok \U0001F600 done"
    assert join_surrogate_pairs("a \ude00\ud83d b") == "a \ude00\ud83d b"  # low then high: no pair
    text = "plain ascii"
    assert join_surrogate_pairs(text) is text


def test_strict_loads_refuses_lone_surrogates_unless_string_pieces() -> None:
    with pytest.raises(StrictJSONError, match="lone surrogate"):
        strict_loads('{"t":"\\ud83d"}')
    assert strict_loads('{"t":"\\ud83d"}', string_pieces=True) == {"t": "\ud83d"}


# ------------------------------------------------------------------ the case, in every dialect


@pytest.mark.parametrize("dialect", sorted(TEXT_DIALECTS))
def test_pair_split_between_fragments_commits_in_every_dialect(dialect: str) -> None:
    result = run(TEXT_DIALECTS[dialect](['{"text":"ok \ud83d', '\ude00 done"}']))
    (call,) = result.calls
    assert result.end == "complete" and call.state is CallState.COMMITTED, call.reason
    assert call.arguments == {"text": "ok \U0001F600 done"}
    assert "done_arguments_differ" not in result.quirks  # a .done holding the pair whole is the same text


@pytest.mark.parametrize("dialect", sorted(TEXT_DIALECTS))
def test_surrogate_unpaired_after_the_join_fails_in_every_dialect(dialect: str) -> None:
    for fragments in (['{"text":"ok \ud83d', ' done"}'], ['{"text":"ok ', '\ude00 done"}'], ['{"text":"\ude00', '\ud83d"}']):
        (call,) = run(TEXT_DIALECTS[dialect](fragments)).calls
        assert call.state is CallState.FAILED and call.reason == "invalid_json: string holds a lone surrogate"


def test_gemini_string_value_pieces_split_between_a_pair_commit() -> None:
    (call,) = run(gemini(["ok \ud83d", "\ude00 done"])).calls
    assert call.state is CallState.COMMITTED and call.arguments == {"text": "ok \U0001F600 done"}


def test_gemini_string_value_unpaired_after_the_join_fails() -> None:
    for pieces in (["ok \ud83d", " done"], ["\ude00", "\ud83d"]):
        (call,) = run(gemini(pieces)).calls
        assert call.state is CallState.FAILED and call.reason == "invalid_json: string holds a lone surrogate"


# ------------------------------------------------------------------ property: cuts never matter

_TEXT = st.text(alphabet=st.sampled_from(["a", " ", "é", "\U0001F600", "\U00010348", "\u4e2d", '"', "\\"]), min_size=1, max_size=12)
_CUTS = st.lists(st.integers(min_value=0, max_value=200), max_size=8)


@settings(max_examples=40, deadline=None)
@given(dialect=st.sampled_from(sorted(TEXT_DIALECTS)), value=_TEXT, points=_CUTS, escaped=st.booleans())
def test_verdict_never_depends_on_where_fragments_are_cut(dialect: str, value: str, points: list[int], escaped: bool) -> None:
    """Astral characters written in the argument text as ``\\uXXXX\\uXXXX`` escapes (ASCII),
    or as raw characters (a cut between a pair's halves leaves a lone surrogate in each
    fragment): the call commits to the same value wherever the text is cut."""
    text = json.dumps({"text": value}, ensure_ascii=escaped)
    build = TEXT_DIALECTS[dialect]
    whole = verdict(run(build([text])))
    assert whole == ("complete", CallState.COMMITTED, "", {"text": value})
    assert verdict(run(build(cut(code_units(text), points)))) == whole


@settings(max_examples=40, deadline=None)
@given(dialect=st.sampled_from(sorted(TEXT_DIALECTS)), value=_TEXT, points=_CUTS, escaped=st.booleans(), lone=st.sampled_from(["\ud83d", "\ude00"]))
def test_unpaired_surrogate_fails_wherever_fragments_are_cut(dialect: str, value: str, points: list[int], escaped: bool, lone: str) -> None:
    """A surrogate with no partner in the joined text fails the call, cut anywhere."""
    text = json.dumps({"text": value + lone + "x"}, ensure_ascii=escaped)
    build = TEXT_DIALECTS[dialect]
    whole = verdict(run(build([text])))
    assert whole == ("complete", CallState.FAILED, "invalid_json", None)
    assert verdict(run(build(cut(code_units(text), points)))) == whole


@settings(max_examples=40, deadline=None)
@given(value=_TEXT, points=_CUTS, lone=st.sampled_from(["", "\ud83d", "\ude00"]))
def test_gemini_verdict_never_depends_on_where_string_pieces_are_cut(value: str, points: list[int], lone: str) -> None:
    whole = verdict(run(gemini([value + lone])))
    assert whole[1] is (CallState.FAILED if lone else CallState.COMMITTED)
    assert verdict(run(gemini(cut(code_units(value + lone), points) or [""]))) == whole
