"""Gemini / Vertex adapter: complete functionCall parts and streamed partialArgs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch import Pipeline
from toollatch.wire.capture import ProviderEvent, read_capture
from toollatch.core.config import AssembleConfig
from toollatch.dialects.gemini import GeminiAdapter, PartialArgsError, parse_json_path
from toollatch.core.model import ArgsFragment, BlockStop, CallState, StreamEnd, StreamResult


def chunk(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-test"}


def fc(**fields: Any) -> dict[str, Any]:
    return {"functionCall": fields}


def pa(path: str, **value: Any) -> dict[str, Any]:
    return {"jsonPath": path, **value}


STOP = chunk({"text": ""}, finish="STOP")


def run(chunks: list[dict[str, Any]]) -> StreamResult:
    pipeline = Pipeline("gemini")
    for i, data in enumerate(chunks, 1):
        pipeline.feed(ProviderEvent(None, data, i, 0))
    pipeline.close()
    (result,) = pipeline.results()
    return result


def test_single_complete_call_with_id_over_sse() -> None:
    body = chunk(fc(name="weather", args={"location": "Florence, Italy"}, id="abc"), finish="STOP")
    raw = ("data: " + json.dumps(body) + "\r\n\r\n").encode()  # Google sends CRLF
    pipeline = Pipeline()
    for ev in read_capture(raw):
        pipeline.feed(ev)
    pipeline.close()
    (result,) = pipeline.results()
    assert pipeline.dialect == "gemini" and result.end == "complete" and result.end_detail == "finishReason STOP"
    (call,) = result.calls
    assert (call.call_id, call.name, call.state, call.arguments) == ("abc", "weather", CallState.COMMITTED, {"location": "Florence, Italy"})
    assert result.quirks == {"crlf_line_ends": 1}  # framing quirk, recorded not fatal


def test_two_parallel_calls_in_one_chunk_without_ids_get_stable_synthesized_ids() -> None:
    body = chunk(fc(name="add", args={"b": 3, "a": 2}), fc(name="multiply", args={"a": 2, "b": 3}), finish="STOP")
    result = run([body])
    assert [(c.key, c.call_id, c.name, c.arguments) for c in result.calls] == [
        ((0, 0), "gemini_call_0", "add", {"b": 3, "a": 2}),
        ((0, 1), "gemini_call_1", "multiply", {"a": 2, "b": 3}),
    ]
    assert result.quirks == {"synthesized_id": 2}
    assert run([body]).calls[1].call_id == "gemini_call_1"  # deterministic per stream


def test_args_text_keeps_key_order() -> None:
    adapter = GeminiAdapter()
    ops = adapter.feed(ProviderEvent(None, chunk(fc(name="f", args={"z": 1, "a": [True, None]})), 1, 0))
    assert [op.text for op in ops if isinstance(op, ArgsFragment)] == ['{"z":1,"a":[true,null]}']


def test_call_without_args_finalizes_as_empty_object() -> None:
    result = run([chunk(fc(name="read_theme", id="t1")), STOP])
    (call,) = result.calls
    assert call.state is CallState.COMMITTED and call.arguments == {} and call.bytes == 0 and call.fragments == 0


def test_no_finish_reason_is_truncated() -> None:
    result = run([chunk(fc(name="add", args={"a": 1}, id="x"))])
    assert result.end == "truncated"
    (call,) = result.calls
    assert call.state is CallState.FAILED and (call.reason or "").startswith("stream_truncated")
    assert [(r.tool_call_id, r.is_error) for r in result.results] == [("x", True)]


def test_error_object_fails_open_calls() -> None:
    error = {"error": {"code": 503, "status": "UNAVAILABLE", "message": "overloaded"}}
    result = run([chunk(fc(name="s", willContinue=True)), error])
    assert result.end == "error" and result.end_detail == "503: UNAVAILABLE"  # the free text only when revealed
    assert result.calls[0].state is CallState.FAILED and (result.calls[0].reason or "").startswith("stream_error")


def test_streamed_partial_args_build_nested_object() -> None:
    chunks = [
        chunk(fc(name="cook", willContinue=True, thoughtSignature="sig")),
        chunk(fc(partialArgs=[pa("$.recipe.items[0].name", stringValue="Lasa", willContinue=True)], willContinue=True)),
        chunk(fc(partialArgs=[pa("$.recipe.items[0].name", stringValue="gna")], willContinue=True)),
        chunk(fc(willContinue=True)),
        chunk(fc(partialArgs=[pa("$.recipe.items[0].qty", numberValue=2)], willContinue=True)),
        chunk(fc(partialArgs=[pa("$.recipe.items[1]['odd key']", boolValue=False)], willContinue=True)),
        chunk(fc(partialArgs=[pa("$.recipe.note", nullValue="NULL_VALUE"), pa("$.recipe.steps[0]", stringValue="Boil")],
                 willContinue=True)),
        chunk(fc()),
        STOP,
    ]
    result = run(chunks)
    (call,) = result.calls
    want = {"recipe": {"items": [{"name": "Lasagna", "qty": 2}, {"odd key": False}], "note": None, "steps": ["Boil"]}}
    assert call.state is CallState.COMMITTED and call.arguments == want
    assert call.fragments == 1 and call.bytes == len(json.dumps(want, separators=(",", ":")).encode())
    assert result.quirks == {"synthesized_id": 1}


def test_nothing_is_emitted_before_the_streamed_call_ends() -> None:
    adapter = GeminiAdapter()
    ops = adapter.feed(ProviderEvent(None, chunk(fc(name="s", willContinue=True)), 1, 0))
    ops += adapter.feed(ProviderEvent(None, chunk(fc(partialArgs=[pa("$.id", stringValue="A")], willContinue=True)), 2, 0))
    assert not [op for op in ops if isinstance(op, (ArgsFragment, BlockStop))]
    ops = adapter.feed(ProviderEvent(None, chunk(fc()), 3, 0))
    assert [type(op) for op in ops] == [ArgsFragment, BlockStop]


def test_two_streamed_calls_and_a_complete_one() -> None:
    chunks = [
        chunk(fc(name="read_theme")),
        chunk(fc(name="read_screen", willContinue=True)),
        chunk(fc(partialArgs=[pa("$.id", stringValue="A", willContinue=True)], willContinue=True)),
        chunk(fc(partialArgs=[pa("$.id", stringValue="")], willContinue=True)),
        chunk(fc()),
        chunk(fc(name="read_screen", willContinue=True)),
        chunk(fc(partialArgs=[pa("$.id", stringValue="B")], willContinue=True)),
        chunk(fc()),
        STOP,
    ]
    result = run(chunks)
    assert [(c.call_id, c.name, c.arguments) for c in result.calls] == [
        ("gemini_call_0", "read_theme", {}),
        ("gemini_call_1", "read_screen", {"id": "A"}),
        ("gemini_call_2", "read_screen", {"id": "B"}),
    ]


def test_last_part_without_will_continue_ends_the_call() -> None:
    chunks = [
        chunk(fc(name="w", willContinue=True)),
        chunk(fc(partialArgs=[pa("$.ops[0].price", numberValue=0.5)], willContinue=True)),
        chunk(fc(partialArgs=[pa("$.ops[1].price", numberValue=0.3)])),  # no willContinue, no {} terminator
        STOP,
    ]
    result = run(chunks)
    assert result.calls[0].arguments == {"ops": [{"price": 0.5}, {"price": 0.3}]}
    assert result.quirks == {"synthesized_id": 1, "last_partial_args_without_terminator": 1}


def test_missing_terminator_ends_at_finish_reason() -> None:
    chunks = [chunk(fc(name="w", willContinue=True)),
              chunk(fc(partialArgs=[pa("$.q", stringValue="x")], willContinue=True), finish="STOP")]
    result = run(chunks)
    assert result.end == "complete" and result.calls[0].arguments == {"q": "x"}
    assert result.quirks["missing_function_call_terminator"] == 1


def test_max_tokens_while_streaming_is_truncated_not_committed() -> None:
    chunks = [chunk(fc(name="w", willContinue=True)),
              chunk(fc(partialArgs=[pa("$.q", stringValue="half")], willContinue=True), finish="MAX_TOKENS")]
    result = run(chunks)
    assert result.end == "truncated"
    assert result.calls[0].state is CallState.FAILED and result.calls[0].arguments is None


def test_contradicting_partial_args_fail_the_stream() -> None:
    chunks = [chunk(fc(name="w", willContinue=True)),
              chunk(fc(partialArgs=[pa("$.a", numberValue=1)], willContinue=True)),
              chunk(fc(partialArgs=[pa("$.a[0]", stringValue="x")], willContinue=True)), STOP]
    result = run(chunks)
    assert result.end == "error"
    assert result.end_detail == "candidate 0: partialArgs[0]: jsonPath segment 2 indexes a JSON number, not an array"
    assert result.calls[0].state is CallState.FAILED


def test_function_call_without_name_is_kept_and_fails_the_latch() -> None:
    result = run([chunk(fc(args={"a": 1}, id="n1")), STOP])
    (call,) = result.calls
    assert call.state is CallState.FAILED and (call.reason or "").startswith("missing_id_or_name")
    assert [r.tool_call_id for r in result.results] == ["n1"]


@pytest.mark.parametrize(
    ("path", "segments"),
    [("$.a", ["a"]), ("$.a.b[12].c", ["a", "b", 12, "c"]), ("$['x.y'][0]", ["x.y", 0]), ('$["q\\"t"]', ['q"t'])],
)
def test_parse_json_path(path: str, segments: list[Any]) -> None:
    assert parse_json_path(path) == segments


@pytest.mark.parametrize("path", ["", "a.b", "$", "$.a[-1]", "$..a", "$.a[*]", None])
def test_parse_json_path_rejects(path: Any) -> None:
    with pytest.raises(PartialArgsError):
        parse_json_path(path)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=30), max_size=6))
def test_any_split_of_a_string_value_assembles_the_same(cuts: list[int]) -> None:
    text = 'Preheat oven to 375°F "(190°C)".\n'
    bounds = [0, *sorted({c % (len(text) + 1) for c in cuts}), len(text)]
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    chunks = [chunk(fc(name="cook", willContinue=True))]
    chunks += [chunk(fc(partialArgs=[pa("$.steps[0]", stringValue=p)], willContinue=True)) for p in pieces]
    chunks += [chunk(fc()), STOP]
    call = run(chunks).calls[0]
    assert call.state is CallState.COMMITTED and call.arguments == {"steps": [text]}


def test_stream_ends_at_the_end_of_the_body_not_at_finish_reason() -> None:
    adapter = GeminiAdapter()
    ops = adapter.feed(ProviderEvent(None, chunk(fc(name="a", args={"x": 1}), finish="STOP"), 1, 0))
    assert [type(op).__name__ for op in ops][-2:] == ["ArgsFragment", "BlockStop"]
    assert not any(isinstance(op, StreamEnd) for op in ops)
    assert adapter.close() == [StreamEnd("finishReason STOP")] and adapter.close() == []


def test_oversized_streamed_arguments_fail_when_the_call_ends() -> None:
    # partialArgs exist as text only at the call's end: that is where the byte limit applies
    pipeline = Pipeline("gemini", config=AssembleConfig(max_tool_argument_bytes=16))
    chunks = [chunk(fc(name="write", willContinue=True)),
              *(chunk(fc(partialArgs=[pa("$.text", stringValue="x" * 10)], willContinue=True)) for _ in range(3))]
    for i, data in enumerate(chunks, 1):
        pipeline.feed(ProviderEvent(None, data, i, 0))
    assert pipeline.streams[0].views()[0].state is CallState.OPEN
    pipeline.feed(ProviderEvent(None, chunk(fc()), 9, 0))
    assert pipeline.streams[0].views()[0].state is CallState.FAILED
    pipeline.feed(ProviderEvent(None, STOP, 10, 0))
    pipeline.close()
    call = pipeline.results()[0].calls[0]
    assert call.state is CallState.FAILED and (call.reason or "").startswith("arguments_exceed_max_bytes")


def test_cancel_mid_stream_cancels_the_open_call() -> None:
    pipeline = Pipeline("gemini")
    pipeline.feed(ProviderEvent(None, chunk(fc(name="s", willContinue=True, id="c1")), 1, 0))
    pipeline.cancel()
    (result,) = pipeline.results()
    assert result.end == "cancelled" and result.calls[0].state is CallState.CANCELLED
    assert [r.tool_call_id for r in result.results] == ["c1"]


def test_stray_terminator_without_a_call_is_only_a_quirk() -> None:
    result = run([chunk(fc()), chunk(fc(willContinue=True)), chunk(fc(name="a", id="i1")), STOP])
    assert [(c.call_id, c.state) for c in result.calls] == [("i1", CallState.COMMITTED)]
    assert result.quirks == {"function_call_part_without_call": 2}


KEY, VALUE = "CANARYkey_5e1d", "CANARYvalue_9c2f"


@pytest.mark.parametrize(
    ("entries", "detail"),
    [
        ([pa(f"$.{KEY}", stringValue=7)], "partialArgs[0]: stringValue is a JSON number, not a string"),
        ([pa(f"$.{KEY}", numberValue=1), pa(f"$.{KEY}", stringValue=VALUE)], "partialArgs[1]: stringValue continues a JSON number, not a string"),
        ([pa(f"$.{KEY}", stringValue=VALUE), pa(f"$.{KEY}[0]", numberValue=1)], "partialArgs[1]: jsonPath segment 2 indexes a JSON string, not an array"),
        ([pa(f"$.{KEY}", boolValue=True), pa(f"$.{KEY}.{KEY}", numberValue=1)], "partialArgs[1]: jsonPath segment 2 names a member of a JSON boolean, not an object"),
        ([pa(f"$.{KEY}", nullValue=None), pa(f"$['{KEY}'][0]['{KEY}']", stringValue=VALUE)], "partialArgs[1]: jsonPath segment 2 indexes a JSON null, not an array"),
        ([pa(f"$.{KEY}", numberValue=1), VALUE], "partialArgs[1]: entry is a JSON string, not an object"),
        ([pa(f"$.{KEY}*", numberValue=1)], f"partialArgs[0]: unsupported jsonPath at character {2 + len(KEY)}"),
    ],
    ids=["string-not-string", "continues-non-string", "index-into-string", "member-of-boolean", "index-into-null", "entry-not-object", "bad-path"],
)
def test_partial_args_errors_name_positions_and_types_never_keys_or_values(entries: list[Any], detail: str) -> None:
    result = run([chunk(fc(name="w", willContinue=True)), chunk(fc(partialArgs=entries, willContinue=True)), STOP])
    assert result.end == "error" and result.end_detail == f"candidate 0: {detail}"
    doc = json.dumps(result.to_json())
    assert KEY not in doc and VALUE not in doc
    assert (result.calls[0].reason or "").startswith("stream_error")


# ------------------------------------------------------------------ provider-chosen sizes


def test_an_array_index_far_past_the_end_fails_the_stream_in_constant_memory() -> None:
    import tracemalloc

    chunks = [chunk(fc(name="w", willContinue=True)), chunk(fc(partialArgs=[pa(f"$.{KEY}[10000000]", numberValue=1)], willContinue=True)), STOP]
    tracemalloc.start()
    try:
        result = run(chunks)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # the index names ten million elements; none is allocated
    assert result.end == "error" and KEY not in json.dumps(result.to_json())
    assert result.end_detail == "candidate 0: partialArgs[0]: jsonPath segment 2 indexes past the end of its array (an array grows one element at a time)"
    assert result.calls[0].state is CallState.FAILED


@pytest.mark.parametrize(
    ("paths", "detail"),
    [
        (["$.a[0]", "$.a[2]"], "partialArgs[1]: jsonPath segment 2 indexes past the end of its array"),
        (["$.a[1]"], "partialArgs[0]: jsonPath segment 2 indexes past the end of its array"),
        (["$.a[" + "9" * 5000 + "]"], "partialArgs[0]: jsonPath segment 2 indexes past the end of its array"),
        (["$.a[0][3].b"], "partialArgs[0]: jsonPath segment 3 indexes past the end of its array"),
    ],
    ids=["gap", "first-not-zero", "index-over-digit-limit", "nested-array"],
)
def test_partial_args_paths_beyond_what_was_seen_fail_with_the_position(paths: list[str], detail: str) -> None:
    entries = [pa(p, numberValue=1) for p in paths]
    result = run([chunk(fc(name="w", willContinue=True)), chunk(fc(partialArgs=entries, willContinue=True)), STOP])
    assert result.end == "error" and (result.end_detail or "").startswith(f"candidate 0: {detail}")


def test_arrays_grow_one_element_at_a_time() -> None:
    entries = [pa("$.a[0]", numberValue=1), pa("$.a[1][0]", stringValue="x"), pa("$.a[1][1]", boolValue=True), pa("$.a[0]", numberValue=2)]
    result = run([chunk(fc(name="w", willContinue=True)), chunk(fc(partialArgs=entries, willContinue=True)), chunk(fc()), STOP])
    assert result.end == "complete" and result.calls[0].arguments == {"a": [2, ["x", True]]}


def test_whole_args_nested_as_deep_as_the_decoder_allows_get_a_verdict() -> None:
    depth = 900
    text = json.dumps(chunk(fc(name="w", args={"a": "__DEEP__"}), finish="STOP")).replace('"__DEEP__"', "[" * depth + "]" * depth)
    pipeline = Pipeline()
    for event in read_capture(("data: " + text + "\n\n").encode()):
        pipeline.feed(event)
    pipeline.close()
    (result,) = pipeline.results()
    (call,) = result.calls
    assert result.end == "complete" and call.state in (CallState.COMMITTED, CallState.FAILED)
    assert (call.reason or "") == "arguments_too_deep: nested 901 levels deep; the limit is 64"


# ------------------------------------------------------------------ a streamed call cut by another call


def _run_with(chunks: list[dict[str, Any]], config: AssembleConfig) -> StreamResult:
    pipeline = Pipeline("gemini", config=config)
    for i, data in enumerate(chunks, 1):
        pipeline.feed(ProviderEvent(None, data, i, 0))
    pipeline.close()
    (result,) = pipeline.results()
    return result


@pytest.mark.parametrize("pipelined", [False, True], ids=["at-stream-end", "pipelined"])
def test_a_call_cut_by_a_new_call_in_the_same_chunk_never_commits(pipelined: bool) -> None:
    config = AssembleConfig(execute_before_stream_end=pipelined, allow_pipelined_execute=("run", "other") if pipelined else ())
    chunks = [
        chunk(fc(name="run", id="g1", willContinue=True)),
        # a number value is whole, and {"n": 1} parses: only willContinue says more was coming
        chunk(fc(partialArgs=[pa("$.n", numberValue=1)], willContinue=True), fc(name="other", id="g2", args={"x": 1})),
        STOP,
    ]
    result = _run_with(chunks, config)
    assert [(c.call_id, c.state) for c in result.calls] == [("g1", CallState.FAILED), ("g2", CallState.COMMITTED)]
    cut = result.calls[0]
    assert cut.arguments is None and cut.reason is not None and cut.reason.startswith("stream_truncated")
    assert cut.diagnosis is not None and cut.diagnosis["kind"] == "cut_off"
    assert [r.tool_call_id for r in result.results] == ["g1"]
    assert result.end == "complete" and result.quirks["function_call_before_terminator"] == 1


def test_the_adapter_sends_no_text_for_a_cut_call() -> None:
    adapter = GeminiAdapter()
    adapter.feed(ProviderEvent(None, chunk(fc(name="run", id="g1", willContinue=True)), 1, 0))
    adapter.feed(ProviderEvent(None, chunk(fc(partialArgs=[pa("$.cmd", stringValue="rm -rf /tmp/b", willContinue=True)], willContinue=True)), 2, 0))
    ops = adapter.feed(ProviderEvent(None, chunk(fc(name="other", id="g2")), 3, 0))
    assert not any(isinstance(op, (ArgsFragment, BlockStop)) and op.key == (0, 0) for op in ops)
