"""Adversarial checks of large-event reading (core/large.py, web/live/backlog.py,
web/replay/held.py, wire/envelope.py): each test names one way the dashboard's view of a
large event can differ from the library's, or hold the event loop."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from toollatch.core import large
from toollatch.core.config import AssembleConfig
from toollatch.core.large import CALLS_FOLLOWED as KEEP, LARGE_PAYLOAD_CHARS, CappedPipeline
from toollatch.core.pipeline import Pipeline
from toollatch.wire import envelope
from toollatch.wire.intake import PushDecoder

from .test_large import threads_reading
from .test_live_backlog import through_tee
from .test_web_replay_held import replayed

def sse(docs: list[dict[str, Any]]) -> str:
    return "".join(f"event: {d['type']}\ndata: {json.dumps(d)}\n\n" for d in docs)


def anthropic_start(count: int, pad: int, message: str = "m1") -> dict[str, Any]:
    blocks = [{"type": "tool_use", "id": f"t{i}", "name": "f", "input": {"a": i, "pad": "x" * pad}} for i in range(count)]
    return {"type": "message_start", "message": {"id": message, "model": "c", "content": blocks, "stop_reason": None}}


def anthropic_call(index: int, call_id: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": call_id, "name": "f", "input": {}}},
        {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": '{"b": 2}'}},
        {"type": "content_block_stop", "index": index},
    ]


END = [{"type": "message_delta", "delta": {"stop_reason": "tool_use"}}, {"type": "message_stop"}]


def both(raw: bytes, config: AssembleConfig | None = None) -> tuple[list[Any], list[Any]]:
    """(library verdicts, dashboard verdicts) per stream: (call_id, state, reason)."""
    config = config or AssembleConfig()
    out = []
    for pipeline, defer in ((Pipeline(name="in", config=config), None), (CappedPipeline(name="in", config=config), LARGE_PAYLOAD_CHARS)):
        decoder = PushDecoder("in", defer_over=defer)
        for event in [*decoder.feed(raw), *decoder.close()]:
            pipeline.feed(event)
        pipeline.close()
        out.append([[(c.call_id, c.state.value, c.reason) for c in r.calls] for r in pipeline.results()])
    return out[0], out[1]


SHOWN_ID = f"t{KEEP + 20}"  # the id of the 1,020th call, left out by the dashboard


@pytest.mark.parametrize("pipelined", [True, False])
@pytest.mark.parametrize(("budget", "first_id"), [(None, SHOWN_ID), (None, "zz"), (5, "zz"), (KEEP, "zz"), (KEEP + 10, "zz"), (KEEP + 10, SHOWN_ID), (3, SHOWN_ID)])
def test_a_shown_call_gets_the_library_verdict_whatever_the_calls_left_out_do(pipelined: bool, budget: int | None, first_id: str) -> None:
    """A shown call that commits at the stream end, then 1,039 calls the dashboard leaves 20
    of: the shown call's verdict does not depend on calls that opened after it, pipelined
    (committed at their block stop) or not, under a run budget or not, one of them with its
    tool_call_id or not. Before, a call left out that committed first took the id (the
    library FAILED the shown call, the dashboard showed it COMMITTED), or the budget."""
    config = AssembleConfig(execute_before_stream_end=pipelined, allow_pipelined_execute=("f",) if pipelined else (), max_tool_calls_per_run=budget, max_tool_calls_in_flight_assemble=10**6)
    shown_first = [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": first_id, "name": "g", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"b": 2}'}},
        {"type": "content_block_stop", "index": 0},
    ]
    pipelined_calls = [op for i in range(1, KEEP + 40) for op in anthropic_call(i, f"t{i}")]
    raw = sse([anthropic_start(0, 0), *shown_first, *pipelined_calls, *END]).encode()
    full, shown = both(raw, config)
    assert shown[0] == full[0][:KEEP]
    if first_id == SHOWN_ID:  # two calls carry the id: neither may run
        assert full[0][0] == (first_id, "failed", "stream_error: call id used by more than one call")
        assert full[0][KEEP + 20] == (first_id, "failed", "stream_error: call id used by more than one call")
    elif budget is not None:  # the budget goes to the calls that opened first
        assert [c[1] for c in full[0]].count("committed") == min(budget, KEEP + 39)
        assert full[0][0][1] == "committed"


def test_a_call_left_out_in_the_same_event_as_a_pipelined_shown_call_counts_from_where_it_is() -> None:
    """One message_start holding whole tool_use blocks: a shown block that commits at its own
    stop, before a block left out with its id starts, keeps its commit in both (the later
    one is refused); ids are counted where their ops are, not for the whole event at once."""
    config = AssembleConfig(execute_before_stream_end=True, allow_pipelined_execute=("f",))
    blocks = [{"type": "tool_use", "id": "dup" if i in (5, KEEP + 5) else f"t{i}", "name": "f", "input": {"a": i}} for i in range(KEEP + 10)]
    start = {"type": "message_start", "message": {"id": "m1", "model": "c", "content": blocks, "stop_reason": None}}
    full, shown = both(sse([start, *END]).encode(), config)
    assert shown[0] == full[0][:KEEP]
    assert full[0][5] == ("dup", "committed", None)
    assert full[0][KEEP + 5][:2] == ("dup", "failed")


def test_one_event_is_rechecked_strictly_once_not_once_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """check_strict re-parses the whole event per block: a 272 KB message_start of 1500 blocks holds the loop ~7 s (ops_of on the event loop), 730 KB ~40 s in the thread."""
    from toollatch.dialects import base

    calls = [0]
    real = base.strict_loads

    def counted(text: str, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(text, **kwargs)

    monkeypatch.setattr(base, "strict_loads", counted)
    raw = sse([anthropic_start(200, 10), *END]).encode()
    decoder = PushDecoder("in")
    pipeline = Pipeline(name="in")
    events = [*decoder.feed(raw), *decoder.close()]
    pipeline.ops_of(events[0])  # what the live backlog runs on the event loop for an event under 512 KiB
    assert calls[0] <= 1, f"{calls[0]} strict parses of one event"


@pytest.mark.parametrize("tail", ['"z": ' + "[" * 600 + "]" * 600, '"z": 1} x', '"z": ' + "9" * 5000])
def test_a_large_payload_is_never_parsed_whole_by_the_c_scanner(tail: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large payload the pure-Python scanner refuses (a 600-deep value, an error, a 5000-digit int at its end) is parsed again by json.loads in C: 10 MB holds the GIL ~0.4-0.7 s."""
    whole: list[int] = []
    real = envelope._stdlib_parse

    def seen(text: str) -> Any:
        whole.append(len(text))
        return real(text)

    monkeypatch.setattr(envelope, "_stdlib_parse", seen)
    text = '{"pad": "' + "x" * (LARGE_PAYLOAD_CHARS + 10) + '", ' + tail + "}"
    try:
        envelope.parse_envelope(text)
    except (ValueError, RecursionError):
        pass
    assert not [n for n in whole if n > LARGE_PAYLOAD_CHARS]


def _on_loop_reads(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """Patch the large-event readers to record the thread each runs in."""
    return threads_reading(monkeypatch), []


def test_a_gemini_json_array_stream_defers_its_large_element_and_follows_its_first_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only SSE payloads are deferred: a streamGenerateContent JSON array (or JSON Lines) element of megabytes is parsed on the event loop (5.5 MB: ~3 s lag) and all its calls followed."""
    from toollatch.web.live.session import LiveSession, LiveSource

    parsed_on: list[str] = []
    real = envelope._parse_large

    def parse(text: str) -> Any:
        parsed_on.append(threading.current_thread().name)
        return real(text)

    monkeypatch.setattr(envelope, "_parse_large", parse)
    parts = [{"functionCall": {"name": "f", "args": {"a": i}}} for i in range(20000)]
    docs = [{"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]}, {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0}]}]
    wire = ("[" + ",\n".join(json.dumps(d) for d in docs) + "]").encode()
    assert len(wire) > LARGE_PAYLOAD_CHARS
    source = LiveSource("up/g", upstream="up", endpoint="/v1beta/models/m:streamGenerateContent", dialect="gemini", request={"contents": []})
    session = LiveSession("array", source, AssembleConfig())
    source.http_status, source.content_type = 200, "application/json"
    loop_thread = through_tee(session, wire, 65536)
    assert session.end_kind == "complete"
    assert loop_thread not in parsed_on
    assert len(session.cards) == KEEP


def test_a_recording_replayed_at_its_recorded_pace_reads_its_large_event_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded-pace player steps unsliced (runner.py: session.step(count)): the held large event is read by CappedPipeline.feed on the event loop."""
    from toollatch.observe.timing import ChunkTimes
    from toollatch.web.triage.sources import LoadedSource, check

    threads, _ = _on_loop_reads(monkeypatch)
    entries = [{"index": i, "id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}} for i in range(6000)]
    docs = [{"choices": [{"index": 0, "delta": {"tool_calls": entries}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    wire = ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n").encode()
    events, dialect = check(wire, "rec.sse", AssembleConfig(), None)
    threads.clear()  # the dry run's own read (a worker thread of the upload route)
    times = ChunkTimes.from_chunks([(0.0, wire[:10]), (0.01, wire[10:])])
    source = LoadedSource("recording", "rec.sse", "rec.sse", "", wire, events, dialect, None, None, None, times)
    session, loop_thread = replayed(source)
    assert session.recorded_pace and session.status.value == "finished" and len(session.cards) == KEEP
    assert threads and loop_thread not in threads


def test_pausing_a_replay_while_its_large_event_is_read_does_not_feed_the_adapter_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pause cancels the runner awaiting read_held, but the worker thread has fed the pipeline's adapter; Play reads the event again through that adapter: calls change verdict."""
    import time

    from toollatch.web.app import resource_dir
    from toollatch.web.pages.render import Renderer
    from toollatch.web.replay.runner import SessionStore
    from toollatch.web.settings import FULL_SPEED, Settings
    from toollatch.web.triage.sources import LoadedSource, check

    started, release = threading.Event(), threading.Event()
    real = large.read_large_event

    def slow(*args: Any) -> Any:
        out = real(*args)
        started.set()
        release.wait(30)
        return out

    monkeypatch.setattr(large, "read_large_event", slow)
    parts = [{"functionCall": {"name": "f", "args": {"a": i}}} for i in range(20000)]
    docs = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "index": 0}]},  # a small first event: the pipeline's own adapter reads the large one
        {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0}]},
    ]
    wire = "".join(f"data: {json.dumps(d)}\n\n" for d in docs).encode()
    events, dialect = check(wire, "p.sse", AssembleConfig(), None)
    source = LoadedSource("upload", "p.sse", "p.sse", "", wire, events, dialect, None)

    async def run() -> Any:
        settings = Settings()
        store = SessionStore(settings, Renderer(resource_dir("templates"), settings))
        session = store.create(source, speed=FULL_SPEED)
        while not started.is_set():
            await asyncio.sleep(0.01)
        store.pause(session)  # the runner awaiting the read is cancelled; the thread goes on
        release.set()
        await asyncio.sleep(0.2)
        store.play(session)
        deadline = time.monotonic() + 60
        while not session.status.done and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await store.shutdown()
        return session

    session = asyncio.run(run())
    from .test_live_backlog import whole_verdicts

    shown = [(c.call_id, c.name, c.state, c.reason) for r in session.pipeline.results() for c in r.calls]
    assert session.status.value == "finished"
    assert shown == whole_verdicts(wire, "gemini")[:KEEP]  # ids gemini_call_20000... after a second read through the same adapter


def test_a_large_event_after_an_event_that_does_not_tell_the_dialect_is_capped_too() -> None:
    """A first event no dialect claims leaves fresh False: read_large_event returns ops None and take() feeds the whole parsed event on the caller's thread (100k calls: ~6 s on the loop, every call followed)."""
    entries = [{"index": i, "id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}} for i in range(6000)]
    docs = [{"object": "something"}, {"choices": [{"index": 0, "delta": {"tool_calls": entries}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    raw = ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n").encode()
    decoder = PushDecoder("in", defer_over=LARGE_PAYLOAD_CHARS)
    events = decoder.feed(raw)
    pipeline = CappedPipeline(name="in")
    pipeline.feed(events[0])
    read = large.read_now(pipeline, events[1], pipeline.room())
    assert read.ops is not None  # else the caller (the event loop) feeds the whole event itself
    pipeline.take(read)
    for event in events[2:]:
        pipeline.feed(event)
    pipeline.close()
    assert sum(len(r.calls) for r in pipeline.results()) == KEEP and pipeline.untold == 6000 - KEEP


def test_the_json_twin_and_report_of_a_replay_count_the_calls_left_out() -> None:
    """Held on main since 58630b7: /api/sessions/{id} names the notice and untold count (at 2c77a67 it had neither)."""
    from toollatch.web.settings import FULL_SPEED
    from toollatch.web.triage.sources import LoadedSource, check

    entries = [{"index": i, "id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}} for i in range(6000)]
    docs = [{"choices": [{"index": 0, "delta": {"tool_calls": entries}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    wire = ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n").encode()
    events, dialect = check(wire, "u.sse", AssembleConfig(), None)
    source = LoadedSource("upload", "u.sse", "u.sse", "", wire, events, dialect, None)
    session, _ = replayed(source, speed=FULL_SPEED)
    assert session.notice and "5000" in session.notice  # the page says so
    assert "5000" in json.dumps(session.to_json())  # the JSON twin did not


def responses_item(kind: str, index: int, call_id: str, arguments: str = "") -> dict[str, Any]:
    item = {"type": "function_call", "id": f"fc_{index}", "call_id": call_id, "name": "f", "arguments": arguments}
    return {"type": f"response.output_item.{kind}", "output_index": index, "item": item}


def responses_stream(*middle: dict[str, Any]) -> bytes:
    head = [{"type": "response.created", "response": {"id": "resp_1", "model": "m"}}]
    tail = [{"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": []}}]
    return sse([*head, *middle, *tail]).encode()


def test_a_final_id_on_a_call_left_out_that_already_failed_counts_as_the_library_counts_it() -> None:
    """A call left out fails (past the in-flight limit) and its output_item.done then gives
    it the id of a shown call still open. The library replaces the id of a failed call too
    (its error result pairs with the final id), so the shown call shares its id in both;
    before, the library kept the first id (the shown call COMMITTED) while the dashboard
    moved the count (FAILED)."""
    added = [responses_item("added", i, "s" if i == 0 else f"c{i}") for i in range(KEEP + 10)]
    left_done = responses_item("done", KEEP + 5, "s", '{"b": 2}')  # past the cap, failed: too many in flight
    shown_done = responses_item("done", 0, "s", '{"b": 2}')
    full, shown = both(responses_stream(*added, left_done, shown_done))
    assert shown[0] == full[0][:KEEP]
    assert full[0][0] == ("s", "failed", "stream_error: call id used by more than one call")
    assert full[0][KEEP + 5] == ("s", "failed", "too_many_tool_calls: more than 32 calls in flight")


def test_a_shown_call_given_the_id_of_a_pipelined_call_left_out_fails_alike() -> None:
    """A pipelined call left out commits at its output_item.done; a shown call still open
    then learns the same id at its own output_item.done. The library knows the id committed,
    the dashboard only that a call left out carries it: both fail the shown call with the
    one reason of a shared id (before: 'already used by a committed call' against 'more
    than one call')."""
    config = AssembleConfig(execute_before_stream_end=True, allow_pipelined_execute=("f",), max_tool_calls_in_flight_assemble=10**6)
    added = [responses_item("added", i, f"c{i}") for i in range(KEEP + 10)]
    left_done = responses_item("done", KEEP + 5, f"c{KEEP + 5}", '{"b": 2}')  # commits (pipelined) in the library
    shown_done = responses_item("done", 0, f"c{KEEP + 5}", '{"b": 2}')  # a final id: the left-out call's
    full, shown = both(responses_stream(*added, left_done, shown_done), config)
    assert shown[0] == full[0][:KEEP]
    assert full[0][KEEP + 5] == (f"c{KEEP + 5}", "committed", None)
    assert full[0][0] == (f"c{KEEP + 5}", "failed", "stream_error: call id used by more than one call")


def anthropic_message(message_id: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message_start", "message": {"id": message_id, "model": "c", "content": content, "stop_reason": None}}


def capped_verdicts(raw: bytes, config: AssembleConfig | None, keep: int) -> tuple[list[Any], list[Any], int]:
    """(pipeline verdicts, capped pipeline verdicts, calls it left out): (key, id, state, reason) per stream."""
    out: list[Any] = []
    untold = 0
    for pipeline in (Pipeline(name="in", config=config), CappedPipeline(name="in", config=config, keep=keep)):
        decoder = PushDecoder("in")
        for event in [*decoder.feed(raw), *decoder.close()]:
            pipeline.feed(event)
        pipeline.close()
        out.append([[(c.key, c.call_id, c.state.value, c.reason) for c in r.calls] for r in pipeline.results()])
        untold = getattr(pipeline, "untold", 0)
    return out[0], out[1], untold


def test_a_second_message_start_holding_whole_blocks_is_capped_against_its_own_stream() -> None:
    """A message_start that holds tool_use blocks is one event: its stream start, then its
    calls. They were capped against the keys and ids of the stream before it: a block at
    an index that stream used, with another id, was taken for a restart (and left out),
    and one with the same id for a call followed (and not counted)."""
    config = AssembleConfig(max_tool_calls_per_run=1)
    first = [anthropic_message("m1", []), *anthropic_call(0, "P"), *anthropic_call(1, "Q"), *END]
    blocks = [{"type": "tool_use", "id": "R", "name": "f", "input": {"a": 1}}, {"type": "tool_use", "id": "Q", "name": "f", "input": {"b": 2}}]
    full, shown, untold = capped_verdicts(sse([*first, anthropic_message("m2", blocks), *END]).encode(), config, keep=3)
    assert full[0][1] == ((1,), "Q", "failed", "budget_exceeded: more than 1 committed calls in this run")
    assert full[1][1] == ((1,), "Q", "failed", "stream_error: call id already answered with an error result in an earlier stream")
    assert shown[0] == full[0] and shown[1] == full[1][:1] and untold == 1  # the first 3 calls of the input


def test_events_held_until_the_dialect_is_known_are_capped_too() -> None:
    """A ping before the message_start: both are held until the message_start tells the
    dialect, then their ops applied; those were not capped (all 50 calls followed)."""
    blocks = [{"type": "tool_use", "id": f"t{i}", "name": "f", "input": {"a": i}} for i in range(50)]
    raw = sse([{"type": "ping"}, anthropic_message("m1", blocks), *END]).encode()
    full, shown, untold = capped_verdicts(raw, None, keep=5)
    assert len(full[0]) == 50 and shown[0] == full[0][:5] and untold == 45


def anthropic_open_block(index: int, call_id: str, partial: str) -> list[dict[str, Any]]:
    """A tool_use block started and given a fragment, never stopped."""
    return anthropic_call(index, call_id)[:1] + [{"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": partial}}]


def test_a_provider_word_a_call_left_out_may_hold_is_hidden_on_the_dashboard_too() -> None:
    """The library hides an error type that a call which did not commit holds in its text;
    a call left out has no text here, so a word outside the providers' vocabulary is hidden
    whenever calls were left out (a documented word is still shown)."""
    cases = [("acme_db_pass", '{"pw":"acme_db_pass"}', "(hidden value, 12 characters)"), ("overloaded_error", '{"pw":"x"}', "overloaded_error")]
    for word, text, shown_as in cases:
        docs = [anthropic_message("m1", []), *anthropic_open_block(0, "a", '{"q":1}'), *anthropic_open_block(1, "b", text)]
        docs.append({"type": "error", "error": {"type": word, "message": "x"}})
        full, shown, _ = capped_verdicts(sse(docs).encode(), None, keep=1)
        assert full[0][0][3] == shown[0][0][3] == f"stream_error: {shown_as}"


def test_calls_after_a_stream_end_are_no_calls_for_the_cap() -> None:
    """Blocks after message_stop are ignored by the assembler (op_after_stream_end): they
    neither take the room nor count as left out."""
    docs = [anthropic_message("m1", []), *anthropic_call(0, "a"), *anthropic_call(1, "b"), *END, *anthropic_call(2, "c"), *anthropic_call(3, "d")]
    full, shown, untold = capped_verdicts(sse(docs).encode(), None, keep=1)
    assert [len(s) for s in full] == [2] and shown[0] == full[0][:1] and untold == 1
