"""Tests for toollatch.core.large: an event left unparsed by its decoder reads as it would
have read, and its ops keep the first calls it opens."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from .conftest import CAPTURES, CASES, require_shared
from toollatch.core.large import LARGE_PAYLOAD_CHARS, CappedPipeline, cap_new_calls, read_now, read_unparsed
from toollatch.core.model import ArgsFragment, CallIdentity, CallsLeftOut, CallStart, Quirk, StreamEnd
from toollatch.core.pipeline import Pipeline
from toollatch.wire.capture import UNPARSED, CaptureError, ProviderEvent
from toollatch.wire.intake import PushDecoder


def threads_reading(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the name of the thread each large-event read runs in
    (:func:`~toollatch.core.large.read_large_event`, which every reader calls)."""
    from toollatch.core import large

    threads: list[str] = []
    real = large.read_large_event

    def read(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(large, "read_large_event", read)
    return threads


def shared_files() -> list[Path]:
    files = [p for folder in (CAPTURES, CASES) if folder.is_dir() for p in sorted(folder.rglob("*"))]
    return [p for p in files if p.is_file() and not p.name.endswith(".json")]


def decode(raw: bytes, defer_over: int | None) -> list[ProviderEvent]:
    decoder = PushDecoder("in", defer_over=defer_over)
    return [*decoder.feed(raw), *decoder.close()]


def verdicts(pipeline: Pipeline) -> list[object]:
    return [(r.end, [(c.key, c.call_id, c.name, c.state, c.reason, c.arguments) for c in r.calls]) for r in pipeline.results()]


def test_a_payload_over_the_limit_is_left_unparsed_with_its_text() -> None:
    small, big = '{"a":1}', json.dumps({"b": "x" * 100})
    events = decode(f"data: {small}\n\ndata: {big}\n\n".encode(), defer_over=50)
    assert events[0].data == {"a": 1}
    assert events[1].data is UNPARSED and events[1].raw == big and events[1].error is None
    assert read_unparsed(events[1], "in") == decode(f"data: {small}\n\ndata: {big}\n\n".encode(), None)[1]


@pytest.mark.parametrize(
    "payload",
    ['{"a": [1, 2.5e3, null, true, "\\u00e9"]}', '{"a": 1, "a": 2}', '{"n": NaN}', "[1, 2", '{"a": 1} x', "  {}  ", '"\\ud800"', "[" * 500 + "]" * 500],
)
def test_reading_an_unparsed_payload_gives_the_decoders_event(payload: str) -> None:
    raw = f"data: {payload}\n\n".encode()
    deferred = decode(raw, defer_over=0)
    assert deferred[0].data is UNPARSED
    assert read_unparsed(deferred[0], "in") == decode(raw, None)[0]


def test_every_shared_capture_and_case_reads_the_same_deferred() -> None:
    require_shared(CAPTURES)
    for path in shared_files():
        raw = path.read_bytes()
        plain = decode(raw, None)
        assert [read_unparsed(e, "in") for e in decode(raw, 0)] == plain, path.name


def same_read_as_large_events(prefix: bytes, suffixes: tuple[str, ...] | None = None) -> int:
    """Assemble ``prefix`` + each shared capture and case plainly and with every event left
    unparsed and read as a large one (every call kept); assert the same verdicts; return
    how many were readable."""
    require_shared(CAPTURES)
    checked = 0
    for path in shared_files():
        if suffixes is not None and path.suffix not in suffixes:
            continue
        raw = prefix + path.read_bytes()
        plain = Pipeline(name="in")
        try:
            for event in decode(raw, None):
                plain.feed(event)
            plain.close()
        except CaptureError:
            continue
        large = CappedPipeline(name="in", keep=10**9)
        for event in decode(raw, 0):
            large.feed(event)
        large.close()
        assert verdicts(large) == verdicts(plain) and large.untold == 0, path.name
        checked += 1
    return checked


def test_every_shared_capture_and_case_assembles_the_same_read_as_large_events() -> None:
    """Every event left unparsed and read as a large one (keeping every call): the first
    event's adapter adopted, framing notes, unreadable payloads, every dialect; the same
    verdicts."""
    assert same_read_as_large_events(b"") >= 40


def openai_event(count: int) -> bytes:
    entries = [{"index": i, "id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}} for i in range(count)]
    docs = [{"choices": [{"index": 0, "delta": {"tool_calls": entries}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    return ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n").encode()


def test_an_event_of_many_calls_keeps_the_first_and_their_verdicts() -> None:
    raw = openai_event(500)
    plain = Pipeline(name="in")
    for event in decode(raw, None):
        plain.feed(event)
    plain.close()
    events = decode(raw, 1000)
    assert events[0].data is UNPARSED
    read = read_now(CappedPipeline(name="in", keep=33), events[0], keep=33)
    assert read.ops is not None and len(read.left_out) == 467 and read.adopt is not None
    for deferred in (1000, None):  # left unparsed by the decoder, or parsed and over the limit
        large = CappedPipeline(name="in", keep=33)
        for event in decode(raw, deferred):
            if deferred is None and event.raw is not None and len(event.raw) > 1000:
                event = event._replace(raw=event.raw + " " * LARGE_PAYLOAD_CHARS)  # taken as large
            large.feed(event)
        large.close()
        kept = verdicts(large)[0][1]  # type: ignore[index]
        assert len(kept) == 33 and kept == verdicts(plain)[0][1][:33]  # type: ignore[index]
        assert {c[3].value for c in kept} == {"committed", "failed"} and large.untold == 467


def spread_calls(count: int, streams: int = 1) -> bytes:
    """``streams`` streams of ``count`` calls, each call in an event of its own."""
    out = []
    for s in range(streams):
        for i in range(count):
            entry = {"index": i, "id": f"s{s}c{i}", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
            out.append({"id": f"chunk{s}", "choices": [{"index": 0, "delta": {"tool_calls": [entry]}}]})
        out.append({"id": f"chunk{s}", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return ("".join(f"data: {json.dumps(d)}\n\n" for d in out) + "data: [DONE]\n\n").encode()


def assembled_both(raw: bytes, keep: int) -> tuple[Pipeline, CappedPipeline]:
    """``raw`` assembled by a plain pipeline and by one that follows ``keep`` calls."""
    plain, capped = Pipeline(name="in"), CappedPipeline(name="in", keep=keep)
    for event in decode(raw, None):
        plain.feed(event)
        capped.feed(event)
    plain.close()
    capped.close()
    return plain, capped


def test_a_stream_of_many_small_events_is_followed_for_its_first_calls_only() -> None:
    plain, capped = assembled_both(spread_calls(150), keep=40)
    kept = verdicts(capped)[0][1]  # type: ignore[index]
    assert len(kept) == 40 and kept == verdicts(plain)[0][1][:40] and capped.untold == 110  # type: ignore[index]


def anthropic_messages(count: int, messages: int) -> bytes:
    """``messages`` Anthropic messages in one input, each of ``count`` tool_use blocks."""
    out: list[tuple[str, dict[str, object]]] = []
    for m in range(messages):
        out.append(("message_start", {"type": "message_start", "message": {"id": f"m{m}", "type": "message", "role": "assistant", "content": [], "model": "x", "stop_reason": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}))
        for i in range(count):
            block = {"type": "tool_use", "id": f"m{m}t{i}", "name": "f", "input": {}}
            out.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": block}))
            out.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": '{"a":1}'}}))
            out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        out.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 1}}))
        out.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {kind}\ndata: {json.dumps(doc)}\n\n" for kind, doc in out).encode()


def test_the_calls_followed_count_over_the_streams_and_keys_are_a_streams_own() -> None:
    # 3 messages of 15 calls, 40 followed: the first two whole, 10 of the third; its keys
    # are the ones the first stream used, and they are new calls there, not calls left out
    plain, capped = assembled_both(anthropic_messages(15, messages=3), keep=40)
    assert [len(r.calls) for r in plain.results()] == [15, 15, 15]
    assert [len(r.calls) for r in capped.results()] == [15, 15, 10] and capped.untold == 5
    kept = [(c.call_id, c.state.value) for r in capped.results() for c in r.calls]
    assert kept == [(c.call_id, c.state.value) for r in plain.results() for c in r.calls][:40]


@pytest.mark.parametrize("framing", ["jsonl", "array", "array-pairs"])
def test_json_lines_and_array_elements_are_left_unparsed_and_read_alike(framing: str) -> None:
    docs = [{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": i, "pad": "x" * 40}}}]}, "index": 0}]} for i in range(3)]
    docs.append({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0}]})
    if framing == "jsonl":
        raw = "".join(json.dumps(d) + "\n" for d in docs).encode()
    elif framing == "array":
        raw = ("[" + ",\n".join(json.dumps(d) for d in docs) + "]").encode()
    else:
        raw = ("[" + ",".join(json.dumps({"event": "message", "data": d}) for d in docs) + "]").encode()
    deferred = decode(raw, 50)
    assert all(e.data is UNPARSED for e in deferred[:3])
    assert [read_unparsed(e, "in") for e in deferred] == decode(raw, None)


def test_events_held_before_the_dialect_is_told_are_read_with_the_large_one_that_tells_it() -> None:
    """An event no dialect claims, then an unreadable one, then each capture: read as large
    events, the same verdicts (the held events' ops first, an unreadable one failing the stream)."""
    assert same_read_as_large_events(b'data: {"object": "x"}\n\ndata: {not json\n\n', (".sse",)) >= 20


def parsed_outside_a_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The lengths of the large payloads parsed while no read holds the collector paused
    (a decoder's parse: its objects still alive, for the next collection to walk, once
    the parse is over)."""
    from toollatch.wire import collector, envelope

    outside: list[int] = []
    real = envelope._parse_large

    def watched(text: str) -> Any:
        if collector._pauses == 0:
            outside.append(len(text))
        return real(text)

    monkeypatch.setattr(envelope, "_parse_large", watched)
    return outside


def _upload_dry_run(raw: bytes) -> bool:
    from toollatch.core.config import AssembleConfig
    from toollatch.web.triage.ingest import dry_run

    return len([c for r in dry_run(raw, "big.sse", AssembleConfig(), None).results for c in r.calls]) == 1000


def _source_check(raw: bytes) -> bool:
    from toollatch.core.config import AssembleConfig
    from toollatch.web.triage.sources import check

    return check(raw, "big.sse", AssembleConfig(), None) == (3, "openai-chat")


def _timed_pass(raw: bytes) -> bool:
    from array import array

    from toollatch.observe.timing import ChunkTimes, timed_pass

    found = timed_pass(ChunkTimes(array("Q", [len(raw)]), array("d", [0.0])).split(raw), "big.sse", calls_followed=1000)
    return len(found.event_times) == 3 and found.first_call_s == 0.0


def _assemble_source(raw: bytes) -> bool:
    from toollatch.core.config import AssembleConfig
    from toollatch.web.triage.diagnosis import assemble_source
    from toollatch.web.triage.sources import LoadedSource

    source = LoadedSource("upload", "big.sse", "big.sse", "", raw, 3, "openai-chat", None, None)
    return len([c for r in assemble_source(source, AssembleConfig(), calls_followed=1000) for c in r.calls]) == 1000


@pytest.mark.parametrize("read", [_upload_dry_run, _source_check, _timed_pass, _assemble_source])
def test_every_capped_pass_parses_a_large_payload_inside_its_read(read: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = openai_event(8000)
    assert len(raw) > LARGE_PAYLOAD_CHARS
    outside = parsed_outside_a_read(monkeypatch)
    assert read(raw)  # the pass read the event (and its 1,000 first calls)
    assert outside == []  # parsed where the pipeline read it, its objects let go before the collector ran again
