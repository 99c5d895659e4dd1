"""A session's owed error results and card results, kept incrementally (``web/replay/owed.py``),
equal the pipeline's own (``Pipeline.results()``) after every event, on every capture, case
and demo and on streams built to stress the rules (shared ids, late ids, repairs); and a
replay does a constant amount of result work per verdict, never a rebuild of all calls."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from toollatch import read_capture
from toollatch.core.assembler import Assembler
from toollatch.core.config import DEFAULT_CONFIG, AssembleConfig
from toollatch.demo.demos import DEMOS
from toollatch.core.model import ToolResult
from toollatch.web.replay.session import Session
from toollatch.web.triage.sources import LoadedSource

from .conftest import CAPTURES, CASES, tools_file

INPUTS = sorted(p for folder in (CAPTURES, CASES) if folder.is_dir() for p in folder.rglob("*") if p.suffix in (".sse", ".jsonl"))
ARRIVAL = replace(DEFAULT_CONFIG, finalize_order="arrival")
REPAIR = replace(DEFAULT_CONFIG, on_invalid_json="drop_with_protocol_repair", on_args_overflow="drop_with_protocol_repair", max_tool_argument_bytes=64)


def source(data: bytes, name: str = "s.sse", tools: list[Any] | None = None) -> LoadedSource:
    return LoadedSource("upload", name, name, name, data, len(read_capture(data)), None, tools, None)


def expected(session: Session) -> tuple[list[tuple[int, ToolResult]], dict[str, ToolResult | None]]:
    """What the pipeline says: results in provider order, and per card the result owed for
    its tool_call_id in its stream."""
    results = [(i, r) for i, stream in enumerate(session.pipeline.results()) for r in stream.results]
    by_id = {(i, r.tool_call_id): r for i, r in results if r.tool_call_id is not None}
    cards = {cid: by_id.get((c.stream, c.view.call_id)) if c.view.call_id is not None else None for cid, c in session.cards.items()}
    return results, cards


def assert_matches(session: Session, where: str) -> None:
    results, cards = expected(session)
    assert session.results == results, where
    assert {cid: c.result for cid, c in session.cards.items()} == cards, where
    assert session.ordered_cards == sorted(session.cards.values(), key=lambda c: (c.stream, c.view.key)), where


def replay_checking(src: LoadedSource, config: AssembleConfig) -> Session:
    session = Session("s", src, config, 10.0)
    while not session.status.done:
        session.step(1)
        assert_matches(session, f"{src.name} at event {session.position}")
    return session


def _tools(path: Path) -> list[Any] | None:
    found = tools_file(path)
    return json.loads(found.read_text()) if found is not None else None


@pytest.mark.parametrize("config", [DEFAULT_CONFIG, ARRIVAL, REPAIR], ids=["provider order", "arrival order", "protocol repair"])
@pytest.mark.parametrize("path", INPUTS, ids=[p.name for p in INPUTS])
def test_every_capture_and_case_owes_what_the_pipeline_owes_after_every_event(path: Path, config: AssembleConfig) -> None:
    replay_checking(source(path.read_bytes(), path.name, _tools(path)), config)


@pytest.mark.parametrize("name", list(DEMOS))
def test_every_demo_owes_what_the_pipeline_owes_after_every_event(name: str) -> None:
    demo = DEMOS[name]
    src = LoadedSource("demo", demo.name, demo.title, demo.description, demo.wire, demo.events, demo.dialect, demo.tools, demo.cancel_after)
    replay_checking(src, DEFAULT_CONFIG)


# ------------------------------------------------------------------ streams built to stress the rules


def chat(*entries: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
    delta = {"tool_calls": list(entries)} if entries else {}
    return {"object": "chat.completion.chunk", "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def call(index: int, call_id: str | None = None, name: str | None = "f", args: str | None = "{}") -> dict[str, Any]:
    entry: dict[str, Any] = {"index": index, "function": {}}
    if call_id is not None:
        entry["id"] = call_id
    if name is not None:
        entry["function"]["name"] = name
    if args is not None:
        entry["function"]["arguments"] = args
    return entry


def sse(*chunks: dict[str, Any], done: bool = True) -> bytes:
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + ("data: [DONE]\n\n" if done else "")).encode()


STREAMS = {
    "two calls share an id": sse(chat(call(0, "x")), chat(call(1, "x")), chat(finish="tool_calls")),
    "shared id, one bad": sse(chat(call(0, "x", args='{"a":')), chat(call(1, "x")), chat(call(2, "y", args="[")), chat(finish="tool_calls")),
    "calls without ids": sse(chat(call(0, None, args="{")), chat(call(1, None)), chat(call(2, None, args="nope")), chat(finish="tool_calls")),
    "an id that comes late": sse(chat(call(0, None, args='{"a"')), chat(call(1, "y", args="{")), chat(call(0, "late")), chat(finish="tool_calls")),
    "keys out of order": sse(chat(call(3, "d", args="{")), chat(call(1, "b", args="[")), chat(call(2, "b", args="x")), chat(call(0, "a")), chat(finish="tool_calls")),
    "cut off": sse(chat(call(0, "a")), chat(call(1, "b", args='{"k": ')), done=False),
    "an id reused at an index": sse(chat(call(0, "a", args="{")), chat(call(0, "b", args="{}")), chat(call(0, "a", args="}")), chat(finish="tool_calls")),
    "oversized": sse(chat(call(0, "a", args='{"k": "' + "v" * 100 + '"}')), chat(call(1, "a")), chat(finish="tool_calls")),
    "an unknown tool": sse(chat(call(0, "a", name="nope")), chat(call(1, "b", name="f")), chat(finish="tool_calls")),
}
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


@pytest.mark.parametrize("config", [DEFAULT_CONFIG, ARRIVAL, REPAIR], ids=["provider order", "arrival order", "protocol repair"])
@pytest.mark.parametrize("data", list(STREAMS.values()), ids=list(STREAMS))
def test_built_streams_owe_what_the_pipeline_owes_after_every_event(data: bytes, config: AssembleConfig) -> None:
    session = replay_checking(source(data, tools=TOOLS), config)
    assert session.status.done


def test_a_cancelled_stream_owes_what_the_pipeline_owes() -> None:
    session = Session("s", source(STREAMS["cut off"]), DEFAULT_CONFIG, 10.0)
    session.step(2)
    session.cancel("user stop")
    assert_matches(session, "after the stop")
    assert [r.tool_call_id for _, r in session.results] == ["a", "b"]


def test_a_card_shows_the_result_owed_for_its_id_as_soon_as_its_call_fails() -> None:
    data = sse(chat(call(0, "x", args='{"k": "long"}')), chat(call(1, "y")), chat(finish="tool_calls"))
    session = Session("s", source(data), replace(DEFAULT_CONFIG, max_tool_argument_bytes=8), 10.0)
    session.step(1)  # the first call overflows at once: it owes a result for "x"
    [card] = session.cards.values()
    assert card.result is not None and card.result.tool_call_id == "x" and card.result.is_error
    assert session.results == [(0, card.result)]
    assert_matches(session, "after the overflow")
    session.step(10)
    assert_matches(session, "at the end")
    assert [r.tool_call_id for _, r in session.results] == ["x"]


def anthropic(*events: tuple[str, dict[str, Any]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def test_a_pipelined_commit_answers_its_id_for_the_call_refused_after_it() -> None:
    config = replace(DEFAULT_CONFIG, execute_before_stream_end=True, allow_pipelined_execute=("f",))
    blocks = [
        event
        for i in (0, 1)
        for event in (
            ("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": "x", "name": "f", "input": {}}}),
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
            ("content_block_stop", {"type": "content_block_stop", "index": i}),
        )
    ]
    data = anthropic(("message_start", {"type": "message_start", "message": {"id": "m", "content": []}}), *blocks, ("message_stop", {"type": "message_stop"}))
    session = replay_checking(source(data, tools=TOOLS), config)
    assert [c.view.state.value for c in session.ordered_cards] == ["committed", "failed"]
    assert session.results == [] and all(c.result is None for c in session.cards.values())


# ------------------------------------------------------------------ cost


@pytest.mark.parametrize("shared", [False, True], ids=["distinct ids", "one id for all"])
def test_a_replay_builds_no_stream_result_and_a_call_record_per_verdict(monkeypatch: pytest.MonkeyPatch, shared: bool) -> None:
    counts = {"result": 0, "outcome": 0}
    result, outcome = Assembler.result, Assembler.outcome

    def counting_result(self: Assembler) -> Any:
        counts["result"] += 1
        return result(self)

    def counting_outcome(self: Assembler, key: Any) -> Any:
        counts["outcome"] += 1
        return outcome(self, key)

    monkeypatch.setattr(Assembler, "result", counting_result)
    monkeypatch.setattr(Assembler, "outcome", counting_outcome)
    n = 300
    # More calls than may assemble at once: those beyond fail one per event, the rest at the end.
    events = [chat(call(i, "same" if shared else f"c{i}", args='{"a": 1')) for i in range(n)] + [chat(finish="tool_calls")]
    session = Session("s", source(sse(*events)), DEFAULT_CONFIG, 10.0)
    session.step(10**6)
    assert session.status.done and len(session.cards) == n and len(session.verdicts) == n + 1
    # One record per verdict, and once more at the stream's end for calls sharing an id.
    assert counts == {"result": 0, "outcome": 2 * n if shared else n}
    monkeypatch.undo()
    assert_matches(session, "at the end")


def test_quirk_counts_are_the_pipelines() -> None:
    data = b": comment\r\n\r\n" + DEMOS["openai-parallel"].wire.replace(b"\n", b"\r\n")
    session = Session("s", source(data), DEFAULT_CONFIG, 10.0)
    session.step(10**6)
    summed: dict[str, int] = {}
    for stream in session.pipeline.results():
        for name, count in stream.quirks.items():
            summed[name] = summed.get(name, 0) + count
    assert session.quirk_counts() == summed and summed
