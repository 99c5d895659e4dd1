"""Pipeline: dialect detection, one assembler per stream, errors that name the input."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from toollatch import CallState, CaptureError, Pipeline, assemble_events, read_capture
from toollatch.wire.capture import ProviderEvent
from toollatch.core.model import StreamResult

from .test_fixture_classes import (
    anthropic_end,
    anthropic_message_start,
    anthropic_sse,
    anthropic_tool_block,
    anthropic_tool_events,
    openai_sse,
    openai_tool_chunks,
)

CALLS = [("call_1", "f", ['{"a":', "1}"]), ("call_2", "g", ["{}"])]
OPENAI = openai_sse(openai_tool_chunks(CALLS))
ANTHROPIC = anthropic_sse(anthropic_tool_events(CALLS))
ANTHROPIC_JSONL = ("\n".join(json.dumps(e) for e in anthropic_tool_events(CALLS)) + "\n").encode()
OPENAI_JSONL = ("\n".join(json.dumps(c) for c in openai_tool_chunks(CALLS)) + "\n").encode()


def run(data: bytes, name: str = "cap", **kwargs: Any) -> tuple[Pipeline, list[StreamResult]]:
    pipeline = Pipeline(name=name, **kwargs)
    for event in read_capture(data, name):
        pipeline.feed(event)
    pipeline.close()
    return pipeline, pipeline.results()


def summary(results: list[StreamResult]) -> list[tuple[Any, ...]]:
    return [(r.end, [(c.call_id, c.name, c.state, c.arguments) for c in r.calls]) for r in results]


EXPECTED = [("complete", [("call_1", "f", CallState.COMMITTED, {"a": 1}), ("call_2", "g", CallState.COMMITTED, {})])]


@pytest.mark.parametrize(
    ("data", "dialect"),
    [(OPENAI, "openai-chat"), (OPENAI_JSONL, "openai-chat"), (ANTHROPIC, "anthropic"), (ANTHROPIC_JSONL, "anthropic")],
    ids=["openai-sse", "openai-jsonl", "anthropic-sse", "anthropic-jsonl"],
)
def test_dialect_is_detected_and_framing_does_not_matter(data: bytes, dialect: str) -> None:
    pipeline, results = run(data)
    assert pipeline.dialect == dialect
    assert [r.dialect for r in results] == [dialect]
    assert summary(results) == EXPECTED


def test_events_before_detection_are_replayed() -> None:
    # ping tells nothing about the dialect; it is held and replayed once message_start arrives
    events = [{"type": "ping"}, *anthropic_tool_events(CALLS)]
    pipeline = Pipeline()
    assert pipeline.feed(ProviderEvent("ping", events[0], 1, 0)) == []
    assert pipeline.dialect is None
    out = pipeline.feed(ProviderEvent("message_start", events[1], 3, 10))
    assert pipeline.dialect == "anthropic"
    assert [e.kind for e in out] == ["stream_start"]
    for i, data in enumerate(events[2:]):
        pipeline.feed(ProviderEvent(data["type"], data, 5 + i, 0))
    pipeline.close()
    assert summary(pipeline.results()) == EXPECTED


def test_explicit_dialect_skips_detection() -> None:
    pipeline = Pipeline("openai-chat")
    assert pipeline.dialect == "openai-chat"
    # a chunk with no "choices" key would not be detected, but the adapter still reads it
    pipeline.feed(ProviderEvent(None, {"error": {"message": "boom"}}, 1, 0))
    pipeline.close()
    assert pipeline.results()[0].end == "error"


@pytest.mark.parametrize(
    ("data", "dialect"),
    [
        (b'data: {"type":"response.created","response":{}}\n\n', "openai-responses"),
        (b'{"candidates":[{"content":{"parts":[]}}]}\n', "gemini"),
    ],
)
def test_recognised_but_unsupported_dialect_names_the_input(data: bytes, dialect: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import toollatch.core.pipeline

    # every dialect detection knows has an adapter today; take one away to reach this path
    monkeypatch.delitem(toollatch.core.pipeline.ADAPTERS, dialect)
    with pytest.raises(CaptureError) as info:
        run(data, name="stream.cap")
    assert "stream.cap" in str(info.value) and dialect in str(info.value) and "not supported" in str(info.value)


@pytest.mark.parametrize(
    "data",
    [b"hello world\nthis is not a stream\n", b'{"a":1}\n{"b":2}\n', b"", b'data: {"hello":"world"}\n\n'],
    ids=["text", "json-objects", "empty", "sse-unknown"],
)
def test_unknown_input_raises_capture_error_naming_the_file(data: bytes) -> None:
    with pytest.raises(CaptureError, match="mystery.bin"):
        run(data, name="mystery.bin")


def test_detection_gives_up_after_a_window_of_events() -> None:
    pipeline = Pipeline(name="many.jsonl")
    with pytest.raises(CaptureError, match="many.jsonl"):
        for i in range(1000):
            pipeline.feed(ProviderEvent(None, {"n": i}, i + 1, 0))


def test_bad_line_before_detection_ends_the_stream_in_error_naming_file_and_line() -> None:
    # the input still gets its verdict document: the dialect is told by the events after it
    data = b'data: {"choices":\n\n' + OPENAI
    pipeline, (result,) = run(data, name="bad.sse")
    assert pipeline.dialect == "openai-chat" and result.end == "error"
    assert re.match(r"bad\.sse:1 \(byte 0\): event data is not JSON", result.end_detail or "")
    assert not any(c.state is CallState.COMMITTED for c in result.calls)


def test_keepalive_comment_wrapped_as_data_before_detection_is_a_verdict_not_an_exit() -> None:
    pipeline, (result,) = run(b"data: : OPENROUTER PROCESSING\n\n" + OPENAI, name="n.sse")
    assert (result.end, result.calls) == ("error", [])
    assert (result.end_detail or "").startswith("n.sse:1 (byte 0): event data is not JSON")
    assert (result.end_detail or "").endswith("; it begins with ':', an SSE comment sent as data)")


def test_only_unreadable_events_still_raise_naming_the_first() -> None:
    with pytest.raises(CaptureError, match=r"bad\.sse:4 \(byte \d+\): event data is not JSON"):
        run(b": hello\n\n\ndata: nope\n\ndata: neither\n\n", name="bad.sse")


@pytest.mark.parametrize("dialect", ["openai-chat", "anthropic"])
def test_bad_line_mid_stream_ends_with_error_and_keeps_calls(dialect: str) -> None:
    if dialect == "openai-chat":
        chunks = openai_tool_chunks(CALLS)
        head = openai_sse(chunks[:3], done=False)  # call_1 opened with both fragments
        tail = openai_sse(chunks[3:])
    else:
        events = anthropic_tool_events(CALLS)
        head = anthropic_sse(events[:6])  # through call_1's content_block_stop
        tail = anthropic_sse(events[6:])
    bad = b"data: {not json}\n\n"
    data = head + bad + tail
    pipeline, results = run(data, name="mid.sse")
    result = results[0]
    assert result.end == "error"
    line = data[: len(head)].count(b"\n") + 1
    assert result.end_detail is not None
    assert result.end_detail.startswith(f"mid.sse:{line} (byte {len(head)})")
    (call,) = result.calls  # the call read before the bad line is kept ...
    assert (call.call_id, call.name, call.bytes, call.fragments) == ("call_1", "f", 7, 2)
    assert call.state is CallState.FAILED and (call.reason or "").startswith("stream_error")
    assert [r.tool_call_id for r in result.results] == ["call_1"]  # ... and owed its error result
    assert call.arguments is None


def test_several_message_starts_are_several_streams() -> None:
    first = [anthropic_message_start("msg_1"), *anthropic_tool_block(0, "toolu_a", "f", ['{"n":1}']), *anthropic_end()]
    second = [anthropic_message_start("msg_2"), *anthropic_tool_block(0, "toolu_b", "g", ["{}"])]  # truncated
    third = [anthropic_message_start("msg_3"), *anthropic_end("end_turn")]
    pipeline = Pipeline()
    out = []
    for data in first + second + third:
        out += pipeline.feed(ProviderEvent(data["type"], data, 1, 0))
    out += pipeline.close()
    results = pipeline.results()
    assert [(r.end, [c.call_id for c in r.calls]) for r in results] == [
        ("complete", ["toolu_a"]),
        ("truncated", ["toolu_b"]),
        ("complete", []),
    ]
    assert [e.stream for e in out if e.kind == "stream_start"] == [0, 1, 2]
    assert pipeline.committed(0, (0,)) is not None and pipeline.committed(0, (0,)).arguments == {"n": 1}  # type: ignore[union-attr]
    assert pipeline.committed(1, (0,)) is None
    assert pipeline.committed(7, (0,)) is None


def test_events_are_returned_as_they_happen() -> None:
    pipeline = Pipeline()
    kinds: list[str] = []
    for event in read_capture(OPENAI):
        kinds += [e.kind for e in pipeline.feed(event)]
    assert kinds.count("call_opened") == 2 and kinds.count("fragment") == 3
    assert [k for k in kinds if k != "quirk"][-1] == "stream_end"
    assert pipeline.close() == []
    assert pipeline.ended


def test_close_without_end_truncates() -> None:
    data = openai_sse(openai_tool_chunks(CALLS, finish=False), done=False)
    _, results = run(data)
    assert results[0].end == "truncated"
    assert all(c.state is CallState.FAILED for c in results[0].calls)
    assert len(results[0].results) == 2


def test_cancel_before_anything_and_after_close() -> None:
    pipeline = Pipeline()
    assert pipeline.cancel() == []
    assert pipeline.results() == []
    assert pipeline.feed(read_capture(OPENAI)[0]) == []
    done, _ = run(OPENAI)
    assert done.cancel() == []
    assert done.results()[0].end == "complete"


def test_assemble_events_convenience() -> None:
    results = assemble_events(read_capture(ANTHROPIC), name="x")
    assert summary(results) == EXPECTED


def test_check_idle_fails_silent_calls_of_the_current_stream() -> None:
    now = [0.0]
    pipeline = Pipeline(clock=lambda: now[0])
    chunks = openai_tool_chunks(CALLS, finish=False)
    for event in read_capture(openai_sse(chunks[:2], done=False)):  # call_1 opened, one fragment
        pipeline.feed(event)
    now[0] = 59.0
    assert pipeline.check_idle() == []
    now[0] = 60.0
    (event,) = pipeline.check_idle()
    assert event.kind == "state" and event.call is not None and event.call.reason == "idle_timeout: no fragment for 60 s"
    pipeline.close()
    (result,) = pipeline.results()
    assert result.end == "truncated"
    assert (result.calls[0].reason or "").startswith("idle_timeout")  # the first verdict stands
    assert pipeline.check_idle() == []


def test_an_adapter_fault_fails_the_stream_at_a_named_place_without_quoting_the_event(monkeypatch: pytest.MonkeyPatch) -> None:
    from toollatch.dialects.openai_chat import OpenAIChatAdapter

    raw = (
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{}"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"content":"sk-secret-in-event"}}]}\n\n'
    )
    real_feed = OpenAIChatAdapter.feed

    def feed(self: OpenAIChatAdapter, event: Any) -> Any:
        if event.line == 3:
            raise TypeError("unhashable: sk-secret-in-event")
        return real_feed(self, event)

    monkeypatch.setattr(OpenAIChatAdapter, "feed", feed)
    pipeline = Pipeline(name="cap.sse")
    for ev in read_capture(raw, name="cap.sse"):
        pipeline.feed(ev)
    pipeline.close()
    (result,) = pipeline.results()
    assert result.end == "error"
    assert result.end_detail is not None and result.end_detail.startswith("cap.sse:3 (byte ")
    assert "TypeError" in result.end_detail and "sk-secret" not in result.end_detail
    assert result.calls[0].state.value == "failed" and "op_after_stream_end" not in result.quirks


def test_bedrock_block_index_of_the_wrong_type_is_ignored_not_fatal() -> None:
    lines = [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t1", "name": "f"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"a":1}'}}}},
        {"contentBlockDelta": {"contentBlockIndex": [0], "delta": {"toolUse": {"input": "junk"}}}},
        {"contentBlockStop": {"contentBlockIndex": {"i": 0}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "tool_use"}},
    ]
    raw = "\n".join(json.dumps(x) for x in lines).encode()
    pipeline = Pipeline()
    for ev in read_capture(raw):
        pipeline.feed(ev)
    pipeline.close()
    (result,) = pipeline.results()
    assert result.end == "complete"
    assert result.calls[0].arguments == {"a": 1}


def test_a_json_lines_stream_cut_mid_line_is_truncated_as_in_the_dashboard() -> None:
    from toollatch import read_capture

    from .test_fixture_classes import openai_tool_chunks

    chunks = [c for c in openai_tool_chunks([("call_1", "f", ['{"a":', " 1}"])]) if isinstance(c, dict) and c.get("choices")]
    lines = b"".join(json.dumps(c).encode() + b"\n" for c in chunks)
    cut = lines[: len(lines) - 10]  # inside the line of the chunk carrying finish_reason
    pipeline = Pipeline(name="cut.jsonl")
    for event in read_capture(cut, "cut.jsonl"):
        pipeline.feed(event)
    pipeline.close()
    (result,) = pipeline.results()
    assert result.end == "truncated" and result.quirks == {"truncated_frame": 1}
    assert [c.state.value for c in result.calls] == ["failed"]


def test_input_cut_before_any_event_names_where() -> None:
    from toollatch import read_capture
    from toollatch.wire.capture import CaptureError

    pipeline = Pipeline(name="cut.jsonl")
    with pytest.raises(CaptureError, match=r"cut.jsonl:1 \(byte 0\): the input ends inside this event"):
        for event in read_capture(b'{"choices": [{"delta"', "cut.jsonl"):
            pipeline.feed(event)


# ------------------------------------------------------------------ every stream ends, one id commits once


def _feed_anthropic(events: list[dict[str, Any]], pipeline: Pipeline) -> list[Any]:
    out: list[Any] = []
    for data in events:
        out += pipeline.feed(ProviderEvent(data["type"], data, 1, 0))
    return out


def test_a_stream_begun_before_its_start_event_ends_before_the_next_one_starts() -> None:
    early = anthropic_tool_block(0, "toolu_a", "f", ['{"n":1}'])[:2]  # no content_block_stop
    events = [*early, anthropic_message_start("msg_1"), *anthropic_tool_block(0, "toolu_b", "g", ["{}"]), *anthropic_end()]
    pipeline = Pipeline()
    out = _feed_anthropic(events, pipeline) + pipeline.close()
    first, second = pipeline.results()
    assert (first.end, first.end_detail) == ("truncated", "a new stream started before this one ended")
    assert [(c.call_id, c.state) for c in first.calls] == [("toolu_a", CallState.FAILED)]
    assert [r.tool_call_id for r in first.results] == ["toolu_a"]
    assert second.end == "complete" and [c.state for c in second.calls] == [CallState.COMMITTED]
    # the first stream's end is reported before the second stream starts
    ends = [(e.kind, e.stream) for e in out if e.kind in ("stream_start", "stream_end")]
    assert ends == [("stream_start", 0), ("stream_end", 0), ("stream_start", 1), ("stream_end", 1)]


def test_a_user_stop_after_a_restarted_message_answers_every_stream() -> None:
    events = [anthropic_message_start("msg_1"), *anthropic_tool_block(0, "toolu_a", "f", ['{"n":'])[:3]]
    events += [anthropic_message_start("msg_2"), *anthropic_tool_block(0, "toolu_b", "g", ['{"m":'])[:3]]
    pipeline = Pipeline()
    _feed_anthropic(events, pipeline)
    pipeline.cancel()
    results = pipeline.results()
    assert [r.end for r in results] == ["truncated", "cancelled"]
    assert [[c.state for c in r.calls] for r in results] == [[CallState.FAILED], [CallState.CANCELLED]]
    assert [[x.tool_call_id for x in r.results] for r in results] == [["toolu_a"], ["toolu_b"]]


def test_one_tool_call_id_commits_once_across_complete_messages_of_one_input() -> None:
    message = [*anthropic_tool_block(0, "toolu_a", "f", ['{"n":1}']), *anthropic_end()]
    events = [anthropic_message_start("msg_1"), *message, anthropic_message_start("msg_2"), *message]
    pipeline = Pipeline()
    _feed_anthropic(events, pipeline)
    pipeline.close()
    first, second = pipeline.results()
    assert [c.state for c in first.calls] == [CallState.COMMITTED]
    (again,) = second.calls
    assert again.state is CallState.FAILED and again.reason == "stream_error: call id already used by a committed call"
    assert again.repaired and second.results == []  # answered by the committed call; dropped from history
    assert pipeline.committed_ids == {"toolu_a"}


def _answers(pipeline: Pipeline) -> list[str]:
    """Every answer the input's tool_call_ids get: a commit's execution, or an error result."""
    results = pipeline.results()
    return [c.call_id for r in results for c in r.calls if c.state is CallState.COMMITTED and c.executor == "client"] + [
        x.tool_call_id for r in results for x in r.results
    ]


@pytest.mark.parametrize("ends", ["truncated", "invalid"])
def test_an_id_answered_with_an_error_in_one_stream_is_never_answered_again_in_a_later_one(ends: str) -> None:
    """Stream 1's call fails (cut off, or invalid JSON) and owes an error result for its
    id; stream 2 carries the same id and would commit: the id would get two answers.
    It is refused as an id answered before, dropped from history, and owes nothing."""
    first = anthropic_tool_block(0, "toolu_a", "f", ['{"n":1'])  # no closing brace
    events = [anthropic_message_start("msg_1"), *(first[:2] if ends == "truncated" else [*first, *anthropic_end()])]
    events += [anthropic_message_start("msg_2"), *anthropic_tool_block(0, "toolu_a", "f", ['{"n":1}']), *anthropic_end()]
    pipeline = Pipeline()
    _feed_anthropic(events, pipeline)
    pipeline.close()
    _, second = pipeline.results()
    (again,) = second.calls
    assert again.state is CallState.FAILED and again.repaired
    assert again.reason == "stream_error: call id already answered with an error result in an earlier stream"
    assert _answers(pipeline) == ["toolu_a"]


def test_a_final_id_on_a_call_refused_for_its_first_id_owes_an_error_result() -> None:
    """Responses: response 2's item is added with the id response 1 committed (refused,
    owing nothing), then finalized with another id. That id is the provider's and nothing
    answered it: the call owes its error result (before, it stayed dropped from history)."""
    def item(kind: str, item_id: str, call_id: str, arguments: str = "") -> dict[str, Any]:
        fields = {"type": "function_call", "id": item_id, "call_id": call_id, "name": "f", "arguments": arguments}
        return {"type": f"response.output_item.{kind}", "output_index": 0, "item": fields}

    def response(rid: str, *middle: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"type": "response.created", "response": {"id": rid}}, *middle, {"type": "response.completed", "response": {"id": rid, "output": []}}]

    events = [*response("r1", item("added", "fc_1", "b"), item("done", "fc_1", "b", "{}")), *response("r2", item("added", "fc_2", "b"), item("done", "fc_2", "d", "{}"))]
    wire = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    pipeline = Pipeline()
    for event in read_capture(wire):
        pipeline.feed(event)
    pipeline.close()
    _, second = pipeline.results()
    (call,) = second.calls
    assert (call.call_id, call.state, call.repaired) == ("d", CallState.FAILED, False)
    assert call.reason == "stream_error: its first call id was answered in an earlier stream"
    assert sorted(_answers(pipeline)) == ["b", "d"]


def test_the_last_final_id_of_a_refused_call_is_answered() -> None:
    """A refused call given two final ids (response.completed lists its item twice): the
    first was answered in an earlier stream too, the last was not; the call is judged again
    at each, and owes its error result under the last."""
    def fc(item_id: str, call_id: str, arguments: str) -> dict[str, Any]:
        return {"type": "function_call", "id": item_id, "call_id": call_id, "name": "f", "arguments": arguments}

    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": "r1"}}]
    for index, call_id in enumerate("ab"):
        events.append({"type": "response.output_item.added", "output_index": index, "item": fc(f"i{call_id}", call_id, "")})
        events.append({"type": "response.output_item.done", "output_index": index, "item": fc(f"i{call_id}", call_id, '{"q":1}')})
    events += [
        {"type": "response.completed", "response": {"id": "r1", "output": []}},
        {"type": "response.created", "response": {"id": "r2"}},
        {"type": "response.output_item.added", "output_index": 0, "item": fc("i2", "a", "")},
        {"type": "response.completed", "response": {"id": "r2", "output": [fc("i2", "b", '{"q":2}'), fc("i2", "d", '{"q":2}')]}},
    ]
    wire = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    pipeline = Pipeline()
    for event in read_capture(wire):
        pipeline.feed(event)
    pipeline.close()
    (call,) = pipeline.results()[1].calls
    assert call.call_id == "d" and not call.repaired
    assert sorted(_answers(pipeline)) == ["a", "b", "d"]


def test_committed_ids_belong_to_one_input_even_when_pipelines_share_a_budget() -> None:
    first = Pipeline()
    second = Pipeline(budget=first.budget)  # two turns of one run: commits are counted together
    for pipeline in (first, second):
        for event in read_capture(OPENAI):
            pipeline.feed(event)
        pipeline.close()
    assert [c.state for c in first.results()[0].calls] == [CallState.COMMITTED, CallState.COMMITTED]
    assert [c.state for c in second.results()[0].calls] == [CallState.COMMITTED, CallState.COMMITTED]
    assert first.budget.committed == 4 and second.committed_ids == {"call_1", "call_2"}


def _feed_all(pipeline: Pipeline, data: bytes) -> list[Any]:
    events = []
    for event in read_capture(data, "cap"):
        events += pipeline.feed(event)
    return events


def test_coalesced_progress_holds_fragment_events_until_taken_one_per_call() -> None:
    calls = [("call_1", "f", ['{"a":', ' "xy', 'z"}']), ("call_2", "g", ['{"b"', ": 1}"])]
    chunks = openai_tool_chunks(calls)
    body = openai_sse(chunks[:-2]).removesuffix(b"data: [DONE]\n\n")  # the calls' fragments: no finish, usage or end
    plain = _feed_all(Pipeline(), body)
    coalesced = Pipeline(coalesce_progress=True)
    held = _feed_all(coalesced, body)
    assert [e.kind for e in plain].count("fragment") == 5
    assert "fragment" not in [e.kind for e in held]
    assert [e.kind for e in held] == [e.kind for e in plain if e.kind != "fragment"]
    taken = coalesced.take_progress()
    assert [(e.kind, e.call.call_id, e.call.bytes, e.call.fragments) for e in taken] == [
        ("fragment", "call_1", len('{"a": "xyz"}'), 3),
        ("fragment", "call_2", len('{"b": 1}'), 2),
    ]
    assert coalesced.take_progress() == []  # taken once
    assert Pipeline().take_progress() == []  # nothing is held without coalesce_progress


def test_coalesced_progress_is_dropped_for_a_call_whose_next_event_shows_its_counts() -> None:
    calls = [("call_1", "f", ['{"a":', "1}"])]
    pipeline = Pipeline(coalesce_progress=True)
    events = _feed_all(pipeline, openai_sse(openai_tool_chunks(calls)))  # through the finish: the call commits
    committed = [e for e in events if e.call is not None and e.call.state is CallState.COMMITTED]
    assert committed and committed[-1].call.bytes == len('{"a":1}')
    assert pipeline.take_progress() == []  # the commit showed the counts: no stale fragment event after it


def test_a_run_of_comment_lines_is_one_quirk_op_counting_every_line() -> None:
    from toollatch.core.model import Quirk
    from toollatch.core.pipeline import framing_ops

    wire = b":k\n" * 5000 + b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
    events = list(read_capture(wire, "comments.sse"))
    assert events[0].framing.count("comment_line") == 5000, "still one entry per comment line"
    ops = framing_ops(events[0].framing)
    assert [(op.name, op.count) for op in ops if isinstance(op, Quirk)] == [("comment_line", 5000)]
    (result,) = assemble_events(events)
    assert result.quirks["comment_line"] == 5000


def test_framing_ops_keeps_every_other_note_and_a_mixed_order_entry_by_entry() -> None:
    from toollatch.core.pipeline import framing_ops

    assert [(op.name, op.count) for op in framing_ops(("comment_line",) * 3 + ("crlf_line_ends",))] == [("comment_line", 3), ("crlf_line_ends", 1)]
    mixed = ("crlf_line_ends", "comment_line", "comment_line")
    assert [(op.name, op.count) for op in framing_ops(mixed)] == [(n, 1) for n in mixed]
