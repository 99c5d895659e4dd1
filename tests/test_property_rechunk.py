"""Property: the same logical stream, split differently, assembles to the same result.

(a) The capture's *bytes* split at random boundaries (TCP reads) give identical events and
results. (b) Each argument fragment split into several consecutive provider events, as a
gateway that re-chunks would send them, gives identical calls; only fragment counts grow,
by exactly the number of extra pieces.
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toollatch import Pipeline, iter_capture, iter_file
from toollatch.wire.capture import ProviderEvent
from toollatch.core.model import StreamResult

from .conftest import CAPTURES, require_shared


def capture_files(dialect: str) -> list[Path]:
    folder = CAPTURES / dialect
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in (".sse", ".jsonl"))


FILES = [*capture_files("openai-chat"), *capture_files("anthropic")]
PARAMS = [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in FILES] or [pytest.param(None, id="no-captures")]
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def need(path: Path | None) -> Path:
    if path is None:
        require_shared(CAPTURES / "openai-chat")
        require_shared(CAPTURES / "anthropic")
        pytest.skip("no openai-chat or anthropic captures found")
    return path


def assemble(events: list[ProviderEvent]) -> tuple[list[StreamResult], list[dict[str, Any]]]:
    pipeline = Pipeline(clock=lambda: 0.0, name="capture")
    out = []
    for event in events:
        out += pipeline.feed(event)
    out += pipeline.close()
    return pipeline.results(), [e.to_json() for e in out]


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
    pieces = [raw[a:b] for a, b in zip(bounds, bounds[1:])]
    split = list(iter_capture(pieces, "capture"))
    assert split == whole
    results_whole, events_whole = assemble(whole)
    results_split, events_split = assemble(split)
    assert [r.to_json() for r in results_split] == [r.to_json() for r in results_whole]
    assert events_split == events_whole


def test_file_reader_matches_in_memory_reader() -> None:
    for path in FILES:
        assert [(e.event, e.data, e.line, e.offset, e.error) for e in iter_file(path)] == [
            (e.event, e.data, e.line, e.offset, e.error) for e in iter_capture([path.read_bytes()], str(path))
        ]


# ------------------------------------------------------------------ (b) gateway re-chunking


def split_text(text: str, rng: random.Random) -> list[str]:
    if len(text) < 2:
        return [text]
    cuts = sorted(rng.sample(range(1, len(text)), rng.randint(0, min(4, len(text) - 1))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def rechunk_openai(events: list[ProviderEvent], rng: random.Random) -> tuple[list[ProviderEvent], dict[str | None, int]]:
    """Split every string ``function.arguments`` into consecutive chunks.

    The first piece keeps the entry as it was (index, id, type, name); later pieces carry
    only what identifies the call (``index``, or the ``id`` where the entry had no index)
    and an ``arguments`` piece. A ``finish_reason`` moves to a chunk after all pieces.
    """
    out: list[ProviderEvent] = []
    extra: dict[str | None, int] = defaultdict(int)
    current: dict[tuple[int, Any], str] = {}  # (choice, index) -> id, per the documented keying
    ids_by_choice: dict[int, list[str]] = defaultdict(list)

    def emit(ev: ProviderEvent, chunk: dict[str, Any], choices: list[dict[str, Any]]) -> None:
        out.append(ProviderEvent(ev.event, {**chunk, "choices": choices}, ev.line, ev.offset))

    for ev in events:
        chunk = ev.data
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        has_args = isinstance(choices, list) and any(
            isinstance(e, dict) and isinstance((e.get("function") or {}).get("arguments"), str) and len(e["function"]["arguments"]) > 1
            for c in choices
            if isinstance(c, dict) and isinstance(c.get("delta"), dict)
            for e in (c["delta"].get("tool_calls") or [])
        )
        if not has_args:
            for c in choices or []:  # keep the id bookkeeping up to date
                for e in ((c or {}).get("delta") or {}).get("tool_calls") or []:
                    _track(c.get("index", 0), e, current, ids_by_choice)
            out.append(ev)
            continue
        finishing = []
        for choice in choices:
            ci = choice.get("index", 0)
            delta = dict(choice.get("delta") or {})
            entries = delta.pop("tool_calls", None) or []
            base = {k: v for k, v in choice.items() if k not in ("delta", "finish_reason")}
            if choice.get("finish_reason"):
                finishing.append({"index": ci, "delta": {}, "finish_reason": choice["finish_reason"]})
            first = True
            if not entries:
                emit(ev, chunk, [{**base, "delta": delta, "finish_reason": None}])
            for entry in entries:
                call_id = _track(ci, entry, current, ids_by_choice)
                args = (entry.get("function") or {}).get("arguments")
                pieces = split_text(args, rng) if isinstance(args, str) else [args]
                head = copy.deepcopy(entry)
                if isinstance(args, str):
                    head["function"]["arguments"] = pieces[0]
                emit(ev, chunk, [{**base, "delta": {**(delta if first else {}), "tool_calls": [head]}, "finish_reason": None}])
                first = False
                for piece in pieces[1:]:
                    cont: dict[str, Any] = {"index": entry["index"]} if "index" in entry else ({"id": entry["id"]} if entry.get("id") else {})
                    cont["function"] = {"arguments": piece}
                    emit(ev, chunk, [{**base, "delta": {"tool_calls": [cont]}, "finish_reason": None}])
                extra[call_id] += len(pieces) - 1
        if finishing:
            emit(ev, chunk, finishing)
    return out, extra


def _track(ci: int, entry: Any, current: dict[tuple[int, Any], str], ids_by_choice: dict[int, list[str]]) -> str | None:
    if not isinstance(entry, dict):
        return None
    call_id = entry.get("id") or None
    if "index" in entry:
        if call_id:
            current[(ci, entry["index"])] = call_id
        call_id = current.get((ci, entry["index"]))
    elif call_id is None and len(set(ids_by_choice[ci])) == 1:
        call_id = ids_by_choice[ci][0]
    if call_id and call_id not in ids_by_choice[ci]:
        ids_by_choice[ci].append(call_id)
    return call_id


def rechunk_anthropic(events: list[ProviderEvent], rng: random.Random) -> tuple[list[ProviderEvent], dict[str | None, int]]:
    """Split every ``input_json_delta.partial_json`` into consecutive deltas of the same block."""
    out: list[ProviderEvent] = []
    extra: dict[str | None, int] = defaultdict(int)
    block_ids: dict[Any, str | None] = {}
    for ev in events:
        data = ev.data
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "message_start":
            block_ids = {}
        if kind == "content_block_start":
            block_ids[data.get("index")] = (data.get("content_block") or {}).get("id")
        delta = data.get("delta") if kind == "content_block_delta" else None
        if isinstance(delta, dict) and delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str) and len(delta["partial_json"]) > 1:
            pieces = split_text(delta["partial_json"], rng)
            for piece in pieces:
                out.append(ProviderEvent(ev.event, {**data, "delta": {**delta, "partial_json": piece}}, ev.line, ev.offset))
            extra[block_ids.get(data.get("index"))] += len(pieces) - 1
        else:
            out.append(ev)
    return out, extra


def identity(result: StreamResult) -> list[tuple[Any, ...]]:
    return [(c.key, c.call_id, c.name, c.state, c.reason, c.arguments, c.bytes, c.executor) for c in result.calls]


@pytest.mark.parametrize("path", PARAMS)
@SETTINGS
@given(rng=st.randoms(use_true_random=False))
def test_gateway_rechunking_gives_identical_calls(path: Path | None, rng: random.Random) -> None:
    path = need(path)
    events = list(iter_file(path))
    rechunk = rechunk_openai if path.parent.name == "openai-chat" else rechunk_anthropic
    new_events, extra = rechunk(events, rng)
    before, _ = assemble(events)
    after, _ = assemble(new_events)
    assert [(r.dialect, r.end, r.end_detail) for r in after] == [(r.dialect, r.end, r.end_detail) for r in before]
    assert [identity(r) for r in after] == [identity(r) for r in before]
    assert [[x.to_json() for x in r.results] for r in after] == [[x.to_json() for x in r.results] for r in before]
    old_calls = [c for r in before for c in r.calls]
    new_calls = [c for r in after for c in r.calls]
    assert sum(c.fragments for c in new_calls) == sum(c.fragments for c in old_calls) + sum(extra.values())
    if None not in extra:
        for old, new in zip(old_calls, new_calls):
            assert new.fragments == old.fragments + extra.get(old.call_id, 0), old.call_id


def test_rechunking_really_splits() -> None:
    # guard against a vacuous property: with a fixed seed, fragments do multiply
    path = next((p for p in FILES if p.name == "openai-gpt4o-long-nested-args.sse"), None)
    path = need(path)
    events = list(iter_file(path))
    new_events, extra = rechunk_openai(events, random.Random(7))
    assert len(new_events) > len(events) and sum(extra.values()) > 0
    (before,), _ = assemble(events)
    (after,), _ = assemble(new_events)
    assert after.calls[0].fragments > before.calls[0].fragments
    assert after.calls[0].arguments == before.calls[0].arguments
