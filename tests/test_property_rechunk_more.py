"""Property: the same logical stream, split differently, assembles to the same result - for
the dialects ``test_property_rechunk.py`` does not cover (OpenAI Responses, Bedrock
ConverseStream and Invoke, Gemini/Vertex, Cohere v2).

(a) The capture's *bytes* split at random boundaries give identical events and results.
(b) Argument *text* re-split into several consecutive provider events, as a re-chunking
gateway would send it, gives identical calls; fragment counts grow by exactly the number of
extra pieces. The text fragments per dialect:

* Responses ``response.function_call_arguments.delta`` (and the custom-tool / MCP deltas);
* Bedrock Converse ``contentBlockDelta.delta.toolUse.input``;
* Bedrock Invoke ``input_json_delta.partial_json`` inside the base64 ``chunk.bytes``;
* Cohere ``tool-call-delta`` ``function.arguments``;
* Vertex ``partialArgs`` ``stringValue`` pieces (a string value streamed in more pieces).
  Gemini sends the arguments to the assembler as one text at the call's end, so there the
  fragment count stays the same. Complete ``functionCall.args`` objects (Gemini API) carry
  no text fragments to re-split; those captures get property (a) only.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toollatch import iter_capture, iter_file
from toollatch.wire.capture import ProviderEvent

from . import test_property_rechunk as base
from .conftest import CAPTURES, require_shared
from .test_property_rechunk import assemble, capture_files, identity, split_text

FOLDERS = ["openai-responses", "bedrock", "gemini", "other"]
FILES = [p for folder in FOLDERS for p in capture_files(folder)]
PARAMS = [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in FILES] or [pytest.param(None, id="no-captures")]
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

Rechunk = Callable[[list[ProviderEvent], random.Random], tuple[list[ProviderEvent], dict[Any, int]]]


def need(path: Path | None) -> Path:
    if path is None:
        for folder in FOLDERS:
            require_shared(CAPTURES / folder)
        pytest.skip("no openai-responses, bedrock, gemini or other captures found")
    return path


def test_every_capture_is_covered_by_a_rechunk_property() -> None:
    require_shared(CAPTURES)
    everywhere = sorted(p for p in CAPTURES.glob("*/*") if p.suffix in (".sse", ".jsonl"))
    assert everywhere, "no captures found"
    assert sorted([*base.FILES, *FILES]) == everywhere


# ------------------------------------------------------------------ (a) byte splits


@pytest.mark.parametrize("path", PARAMS)
@SETTINGS
@given(data=st.data())
def test_byte_splits_give_identical_results(path: Path | None, data: st.DataObject) -> None:
    path = need(path)
    raw = path.read_bytes()
    whole = list(iter_capture([raw], "capture"))
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(raw)), max_size=40), label="cuts")))
    bounds = [0, *cuts, len(raw)]
    split = list(iter_capture([raw[a:b] for a, b in zip(bounds, bounds[1:])], "capture"))
    assert split == whole
    results_whole, events_whole = assemble(whole)
    results_split, events_split = assemble(split)
    assert [r.to_json() for r in results_split] == [r.to_json() for r in results_whole]
    assert events_split == events_whole


def test_file_reader_matches_in_memory_reader() -> None:
    for path in FILES:
        assert list(iter_file(path)) == list(iter_capture([path.read_bytes()], str(path)))


# ------------------------------------------------------------------ (b) re-split argument text


def _copy(ev: ProviderEvent, data: Any, first: bool = True) -> ProviderEvent:
    """``ev`` with new ``data``; framing notes stay with one copy only (they were met once)."""
    return ProviderEvent(ev.event, data, ev.line, ev.offset, ev.error, ev.framing if first else ())


_RESPONSES_DELTAS = {"response.function_call_arguments.delta", "response.custom_tool_call_input.delta", "response.mcp_call_arguments.delta"}


def rechunk_responses(events: list[ProviderEvent], rng: random.Random) -> tuple[list[ProviderEvent], dict[Any, int]]:
    """Split every argument ``delta`` into consecutive delta events of the same item."""
    out: list[ProviderEvent] = []
    extra: dict[Any, int] = defaultdict(int)
    call_of_item: dict[Any, Any] = {}
    for ev in events:
        data = ev.data
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "response.output_item.added" and isinstance(data.get("item"), dict):
            item = data["item"]
            call_of_item[item.get("id")] = item.get("id") if item.get("type") == "mcp_call" else item.get("call_id")
        if kind in _RESPONSES_DELTAS and isinstance(data.get("delta"), str) and len(data["delta"]) > 1:
            pieces = split_text(data["delta"], rng)
            out += [_copy(ev, {**data, "delta": piece}, i == 0) for i, piece in enumerate(pieces)]
            extra[call_of_item.get(data.get("item_id"))] += len(pieces) - 1
        else:
            out.append(ev)
    return out, extra


def rechunk_converse(events: list[ProviderEvent], rng: random.Random) -> tuple[list[ProviderEvent], dict[Any, int]]:
    """Split every ``contentBlockDelta.delta.toolUse.input`` into consecutive deltas."""
    out: list[ProviderEvent] = []
    extra: dict[Any, int] = defaultdict(int)
    ids: dict[Any, Any] = {}
    for ev in events:
        data = ev.data
        body = data.get("contentBlockStart") if isinstance(data, dict) else None
        if isinstance(body, dict):
            ids[body.get("contentBlockIndex")] = ((body.get("start") or {}).get("toolUse") or {}).get("toolUseId")
        body = data.get("contentBlockDelta") if isinstance(data, dict) else None
        tool = (body.get("delta") or {}).get("toolUse") if isinstance(body, dict) else None
        if isinstance(tool, dict) and isinstance(tool.get("input"), str) and len(tool["input"]) > 1:
            pieces = split_text(tool["input"], rng)
            for i, piece in enumerate(pieces):
                out.append(_copy(ev, {"contentBlockDelta": {**body, "delta": {**body["delta"], "toolUse": {**tool, "input": piece}}}}, i == 0))
            extra[ids.get(body.get("contentBlockIndex"))] += len(pieces) - 1
        else:
            out.append(ev)
    return out, extra


def _b64(payload: Any) -> str:
    return base64.b64encode(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()).decode()


def rechunk_invoke(events: list[ProviderEvent], rng: random.Random) -> tuple[list[ProviderEvent], dict[Any, int]]:
    """Split every ``partial_json`` inside ``chunk.bytes`` into consecutive base64 chunks."""
    out: list[ProviderEvent] = []
    extra: dict[Any, int] = defaultdict(int)
    ids: dict[Any, Any] = {}
    for ev in events:
        chunk = ev.data.get("chunk") if isinstance(ev.data, dict) else None
        inner = json.loads(base64.b64decode(chunk["bytes"])) if isinstance(chunk, dict) and "bytes" in chunk else None
        kind = inner.get("type") if isinstance(inner, dict) else None
        if kind == "message_start":
            ids = {}
        if kind == "content_block_start":
            ids[inner.get("index")] = (inner.get("content_block") or {}).get("id")
        delta = inner.get("delta") if kind == "content_block_delta" else None
        if isinstance(delta, dict) and delta.get("type") == "input_json_delta" and len(delta.get("partial_json") or "") > 1:
            pieces = split_text(delta["partial_json"], rng)
            for i, piece in enumerate(pieces):
                new_chunk = {**chunk, "bytes": _b64({**inner, "delta": {**delta, "partial_json": piece}})}
                out.append(_copy(ev, {**ev.data, "chunk": new_chunk}, i == 0))
            extra[ids.get(inner.get("index"))] += len(pieces) - 1
        else:
            out.append(ev)
    return out, extra


def rechunk_bedrock(events: list[ProviderEvent], rng: random.Random) -> tuple[list[ProviderEvent], dict[Any, int]]:
    invoke = any(isinstance(e.data, dict) and "chunk" in e.data for e in events)
    return (rechunk_invoke if invoke else rechunk_converse)(events, rng)


def rechunk_cohere(events: list[ProviderEvent], rng: random.Random) -> tuple[list[ProviderEvent], dict[Any, int]]:
    """Split every ``tool-call-delta`` ``function.arguments`` into consecutive deltas."""
    out: list[ProviderEvent] = []
    extra: dict[Any, int] = defaultdict(int)
    ids: dict[Any, Any] = {}
    for ev in events:
        data = ev.data
        kind = data.get("type") if isinstance(data, dict) else None
        entry = ((data.get("delta") or {}).get("message") or {}).get("tool_calls") if kind in ("tool-call-start", "tool-call-delta") else None
        if kind == "tool-call-start" and isinstance(entry, dict):
            ids[data.get("index")] = entry.get("id")
        text = (entry.get("function") or {}).get("arguments") if kind == "tool-call-delta" and isinstance(entry, dict) else None
        if isinstance(text, str) and len(text) > 1:
            pieces = split_text(text, rng)
            for i, piece in enumerate(pieces):
                new = copy.deepcopy(data)
                new["delta"]["message"]["tool_calls"]["function"]["arguments"] = piece
                out.append(_copy(ev, new, i == 0))
            extra[ids.get(data.get("index"))] += len(pieces) - 1
        else:
            out.append(ev)
    return out, extra


def _split_entries(entries: list[Any], rng: random.Random) -> list[Any]:
    out = []
    for entry in entries:
        value = entry.get("stringValue") if isinstance(entry, dict) else None
        if isinstance(value, str) and len(value) > 1:
            pieces = split_text(value, rng)
            out += [{**entry, "stringValue": p, "willContinue": True} for p in pieces[:-1]]
            out.append({**entry, "stringValue": pieces[-1]})
        else:
            out.append(entry)
    return out


def rechunk_vertex(events: list[ProviderEvent], rng: random.Random) -> tuple[list[ProviderEvent], dict[Any, int]]:
    """Split every ``partialArgs`` ``stringValue`` into consecutive pieces of the same path.

    A chunk holding one continuation part (no ``name``) becomes several chunks, one entry
    each, all but the last marked ``willContinue``; elsewhere the pieces stay in the same
    part. Gemini sends the arguments as one text at the call's end: no extra fragments.
    """
    out: list[ProviderEvent] = []
    for ev in events:
        data = ev.data
        candidates = data.get("candidates") if isinstance(data, dict) else None
        parts = ((candidates[0].get("content") or {}).get("parts") or []) if isinstance(candidates, list) and len(candidates) == 1 else []
        calls = [p["functionCall"] for p in parts if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)]
        if not any(isinstance(fc.get("partialArgs"), list) for fc in calls):
            out.append(ev)
            continue
        if len(parts) == 1 and "name" not in calls[0]:
            entries = _split_entries(calls[0]["partialArgs"], rng)
            for entry in entries[:-1]:
                lone = {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"partialArgs": [entry], "willContinue": True}}]}}]}
                out.append(_copy(ev, lone, first=False))
            new = copy.deepcopy(data)
            new["candidates"][0]["content"]["parts"][0]["functionCall"]["partialArgs"] = entries[-1:]
            out.append(_copy(ev, new))
        else:
            new = copy.deepcopy(data)
            for part in new["candidates"][0]["content"]["parts"]:
                fc = part.get("functionCall") if isinstance(part, dict) else None
                if isinstance(fc, dict) and isinstance(fc.get("partialArgs"), list):
                    fc["partialArgs"] = _split_entries(fc["partialArgs"], rng)
            out.append(_copy(ev, new))
    return out, {}


def has_partial_args(path: Path) -> bool:
    return any(b'"partialArgs"' in line for line in path.read_bytes().splitlines())


RECHUNKERS: dict[str, Rechunk] = {"openai-responses": rechunk_responses, "bedrock": rechunk_bedrock, "gemini": rechunk_vertex, "other": rechunk_cohere}
TEXT_FILES = [p for p in FILES if p.parent.name != "gemini" or has_partial_args(p)]
TEXT_PARAMS = [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in TEXT_FILES] or [pytest.param(None, id="no-captures")]


@pytest.mark.parametrize("path", TEXT_PARAMS)
@SETTINGS
@given(rng=st.randoms(use_true_random=False))
def test_gateway_rechunking_gives_identical_calls(path: Path | None, rng: random.Random) -> None:
    path = need(path)
    events = list(iter_file(path))
    new_events, extra = RECHUNKERS[path.parent.name](events, rng)
    before, _ = assemble(events)
    after, _ = assemble(new_events)
    assert [(r.dialect, r.end, r.end_detail) for r in after] == [(r.dialect, r.end, r.end_detail) for r in before]
    assert [identity(r) for r in after] == [identity(r) for r in before]
    assert [[x.to_json() for x in r.results] for r in after] == [[x.to_json() for x in r.results] for r in before]
    assert [r.quirks for r in after] == [r.quirks for r in before]
    old_calls = [c for r in before for c in r.calls]
    new_calls = [c for r in after for c in r.calls]
    assert None not in extra, "every re-split fragment belongs to a known call"
    for old, new in zip(old_calls, new_calls, strict=True):
        assert new.fragments == old.fragments + extra.get(old.call_id, 0), old.call_id


@pytest.mark.parametrize("folder", ["openai-responses", "bedrock", "gemini", "other"])
def test_rechunking_really_splits(folder: str) -> None:
    # guard against a vacuous property: with a fixed seed, each dialect's events do multiply
    files = [p for p in TEXT_FILES if p.parent.name == folder]
    if not files:
        require_shared(CAPTURES / folder)
        pytest.skip(f"no {folder} captures with argument text")
    grew = 0
    for path in files:
        events = list(iter_file(path))
        new_events, extra = RECHUNKERS[folder](events, random.Random(7))
        if len(new_events) > len(events):
            grew += 1
            (before, *_), _ = assemble(events)
            (after, *_), _ = assemble(new_events)
            assert [c.arguments for c in after.calls] == [c.arguments for c in before.calls]
            if folder != "gemini":
                assert sum(c.fragments for c in after.calls) > sum(c.fragments for c in before.calls)
                assert sum(extra.values()) > 0
    assert grew > 0


def test_vertex_rechunk_really_adds_string_pieces() -> None:
    path = CAPTURES / "gemini" / "vertex-partialargs-nested.jsonl"
    if not path.exists():
        require_shared(CAPTURES / "gemini")
        pytest.skip("vertex-partialargs-nested.jsonl not found")
    events = list(iter_file(path))
    new_events, _ = rechunk_vertex(events, random.Random(3))

    def string_pieces(evs: list[ProviderEvent]) -> int:
        return sum(
            1
            for e in evs
            for c in e.data.get("candidates") or []
            for p in (c.get("content") or {}).get("parts") or []
            for a in (p.get("functionCall") or {}).get("partialArgs") or []
            if a.get("stringValue")
        )

    assert string_pieces(new_events) > string_pieces(events)
