"""The provider-independent assembler, driven with ops directly and a fake clock."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch.core.assembler import Assembler
from toollatch.core.config import AssembleConfig
from toollatch.core.model import (
    ArgsFinal,
    ArgsFragment,
    BlockStop,
    CallIdentity,
    CallStart,
    CallState,
    Cancel,
    CommittedCall,
    Op,
    Quirk,
    StreamEnd,
    StreamError,
    StreamStart,
    StreamTruncated,
)
from toollatch.redaction.redact import AssemblyEvent, CallView
from toollatch.core.registry import ToolRegistry

SECRET = "sk-Tq7uniqueSECRETvalue93"


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make(config: AssembleConfig | None = None, **kwargs: object) -> tuple[Assembler, FakeClock]:
    clock = FakeClock()
    return Assembler("test", config=config, clock=clock, **kwargs), clock  # type: ignore[arg-type]


def run(asm: Assembler, ops: Iterable[Op]) -> list[AssemblyEvent]:
    events: list[AssemblyEvent] = []
    for op in ops:
        events.extend(asm.apply(op))
    return events


def states(asm: Assembler) -> list[CallState]:
    return [v.state for v in asm.views()]


def call_ops(key: tuple[int, ...], call_id: str | None, name: str | None, *fragments: str) -> list[Op]:
    return [CallStart(key, call_id, name), *(ArgsFragment(key, f) for f in fragments)]


# ------------------------------------------------------------------ the latch


def test_nothing_commits_before_stream_end() -> None:
    asm, _ = make()
    run(asm, call_ops((0,), "c1", "f", '{"a"', ":1}"))
    # the buffer parses already, but the provider has not said anything yet
    assert states(asm) == [CallState.OPEN]
    assert asm.committed((0,)) is None
    run(asm, [BlockStop((0,))])
    assert states(asm) == [CallState.ARGS_COMPLETE]
    assert asm.committed((0,)) is None
    assert asm.result().results == []  # no verdict yet, so nothing owed yet
    run(asm, [StreamEnd("[DONE]")])
    assert states(asm) == [CallState.COMMITTED]
    assert asm.committed((0,)) == CommittedCall((0,), "c1", "f", {"a": 1}, "client")
    result = asm.result()
    assert result.end == "complete" and result.end_detail == "[DONE]"
    assert result.results == []
    assert result.calls[0].arguments == {"a": 1}


def test_stream_end_commits_open_calls_without_block_stop() -> None:
    asm, _ = make()
    run(asm, [*call_ops((0,), "c1", "f", "{}"), StreamEnd()])
    assert states(asm) == [CallState.COMMITTED]
    transitions = [t.state for t in asm.result().calls[0].transitions]
    assert transitions == [CallState.OPEN, CallState.ARGS_COMPLETE, CallState.COMMITTED]


def test_committed_of_unknown_key_is_none() -> None:
    asm, _ = make()
    assert asm.committed((9,)) is None


@pytest.mark.parametrize(
    ("end_op", "end", "reason"),
    [
        (StreamTruncated("input ended"), "truncated", "stream_truncated: input ended"),
        (StreamError("overloaded_error: Overloaded"), "error", "stream_error: overloaded_error: Overloaded"),
    ],
)
def test_abnormal_end_fails_every_call_with_one_error_result(end_op: Op, end: str, reason: str) -> None:
    asm, _ = make()
    run(asm, [*call_ops((0,), "c0", "f", '{"a":1}'), BlockStop((0,)), *call_ops((1,), "c1", "g", '{"b":')])
    run(asm, [end_op])
    result = asm.result()
    assert result.end == end
    assert [c.state for c in result.calls] == [CallState.FAILED, CallState.FAILED]
    assert [c.reason for c in result.calls] == [reason, reason]
    assert all(c.arguments is None for c in result.calls)
    assert [(r.tool_call_id, r.is_error, r.content) for r in result.results] == [("c0", True, reason), ("c1", True, reason)]
    assert asm.committed((0,)) is None


def test_cancel_gives_one_error_result_each_and_second_cancel_does_nothing() -> None:
    asm, _ = make()
    run(asm, [*call_ops((0,), "c0", "f", '{"a":1}'), BlockStop((0,)), *call_ops((1,), "c1", "g", '{"b')])
    events = run(asm, [Cancel("user stop")])
    assert [e.kind for e in events] == ["state", "state", "stream_end"]
    assert events[-1].end == "cancelled"
    result = asm.result()
    assert result.end == "cancelled"
    assert [c.state for c in result.calls] == [CallState.CANCELLED, CallState.CANCELLED]
    assert [(r.tool_call_id, r.is_error) for r in result.results] == [("c0", True), ("c1", True)]
    assert all(r.content.startswith("cancelled") for r in result.results)
    before = result.to_json()
    assert run(asm, [Cancel("again")]) == []
    assert asm.result().to_json() == before


def test_cancel_after_normal_end_changes_nothing() -> None:
    asm, _ = make()
    run(asm, [*call_ops((0,), "c0", "f", "{}"), StreamEnd()])
    assert run(asm, [Cancel()]) == []
    assert states(asm) == [CallState.COMMITTED]
    assert asm.result().end == "complete"


# ------------------------------------------------------------------ byte limit


def test_byte_limit_counts_utf8_bytes_while_appending() -> None:
    asm, _ = make(AssembleConfig(max_tool_argument_bytes=12))
    run(asm, call_ops((0,), "c0", "f", '{"a":"', "ééé"))  # 6 + 6 = 12 bytes: at the limit, fine
    assert states(asm) == [CallState.OPEN]
    events = run(asm, [ArgsFragment((0,), "é")])  # 10 characters so far, but 14 bytes
    assert states(asm) == [CallState.FAILED]
    (view,) = asm.views()
    assert view.reason is not None and view.reason.startswith("arguments_exceed_max_bytes")
    assert "12" in view.reason
    assert view.bytes == 14 and view.fragments == 3
    assert [e.kind for e in events] == ["state"]
    assert asm._calls[(0,)].buffer is None  # buffer released at once, not at stream end


def test_fragments_after_overflow_are_counted_but_ignored() -> None:
    asm, _ = make(AssembleConfig(max_tool_argument_bytes=4))
    run(asm, [*call_ops((0,), "c0", "f", "{", '"aaaa":1'), ArgsFragment((0,), "}")])
    run(asm, [*call_ops((1,), "c1", "g", "{}"), StreamEnd()])
    big, small = asm.result().calls
    assert big.state is CallState.FAILED and big.reason is not None and big.reason.startswith("arguments_exceed_max_bytes")
    assert big.bytes == 1 + 8 + 1 and big.fragments == 3
    assert big.arguments is None
    assert small.state is CallState.COMMITTED and small.arguments == {}
    assert [r.tool_call_id for r in asm.result().results] == ["c0"]


def test_whole_arguments_over_the_limit_fail_at_start() -> None:
    asm, _ = make(AssembleConfig(max_tool_argument_bytes=8))
    run(asm, [CallStart((0,), "c0", "f", whole_arguments='{"k":"日本"}')])
    (view,) = asm.views()
    assert view.state is CallState.FAILED and view.bytes == len('{"k":"日本"}'.encode())
    assert view.reason is not None and view.reason.startswith("arguments_exceed_max_bytes")


# ------------------------------------------------------------------ in-flight limit


def test_too_many_calls_in_flight_get_a_failed_placeholder() -> None:
    asm, _ = make(AssembleConfig(max_tool_calls_in_flight_assemble=2))
    run(asm, [*call_ops((0,), "c0", "f", "{}"), *call_ops((1,), "c1", "f", "{}"), *call_ops((2,), "c2", "f", "{}")])
    assert states(asm) == [CallState.OPEN, CallState.OPEN, CallState.FAILED]
    run(asm, [StreamEnd()])
    result = asm.result()
    assert [c.call_id for c in result.calls] == ["c0", "c1", "c2"]  # never dropped
    assert [c.state for c in result.calls] == [CallState.COMMITTED, CallState.COMMITTED, CallState.FAILED]
    assert result.calls[2].reason is not None and result.calls[2].reason.startswith("too_many_tool_calls")
    assert result.calls[2].name == "f"
    assert [(r.tool_call_id, r.is_error) for r in result.results] == [("c2", True)]


def test_in_flight_counts_only_calls_not_yet_decided() -> None:
    config = AssembleConfig(max_tool_calls_in_flight_assemble=1, max_tool_argument_bytes=2)
    asm, _ = make(config)
    run(asm, call_ops((0,), "c0", "f", '{"x":1}'))  # overflows: terminal, no longer in flight
    run(asm, [*call_ops((1,), "c1", "f", "{}"), StreamEnd()])
    assert states(asm) == [CallState.FAILED, CallState.COMMITTED]


# ------------------------------------------------------------------ identity


def test_id_and_name_are_set_not_appended() -> None:
    asm, _ = make()
    events = run(asm, [CallStart((0,)), CallIdentity((0,), "call_1", "get_weather")])
    assert [e.kind for e in events] == ["stream_start", "call_opened", "identity"]
    assert events[-1].call is not None and events[-1].call.name == "get_weather"
    run(asm, [CallIdentity((0,), None, "get_weather"), CallIdentity((0,), "call_1", "get_weather"), ArgsFragment((0,), "{}")])
    (view,) = asm.views()
    assert (view.call_id, view.name) == ("call_1", "get_weather")
    run(asm, [CallIdentity((0,), "call_2"), StreamEnd()])
    result = asm.result()
    assert (result.calls[0].call_id, result.calls[0].name) == ("call_1", "get_weather")
    assert result.calls[0].state is CallState.COMMITTED
    assert result.quirks == {"name_repeated": 2, "id_repeated": 1, "id_conflict": 1}


def test_a_later_different_name_fails_the_call_saying_so() -> None:
    asm, _ = make()
    run(asm, [CallStart((0,), "call_1", "get_weather"), ArgsFragment((0,), "{}"), CallIdentity((0,), None, "null"), StreamEnd()])
    (call,) = asm.result().calls
    assert call.state is CallState.FAILED and call.name == "get_weather"
    assert call.reason == "name_conflict: a later chunk named a different tool for this call ('get_weather', then a name of 4 characters that is no declared tool)"
    assert [r.tool_call_id for r in asm.result().results] == ["call_1"]


LATE_ID_WAYS = {
    # the finalized item renames the call and gives it the committed id in one op
    "renamed-with-final-id": [CallStart((0,), "call_y", "f"), ArgsFragment((0,), "{}"), CallIdentity((0,), "call_x", "g", final=True)],
    # the id comes after the start, with another name
    "late-id-and-name": [CallStart((0,), None, "f"), ArgsFragment((0,), "{}"), CallIdentity((0,), "call_x", "g")],
    # the call failed (too large) before its id came
    "failed-then-id": [CallStart((0,), None, "f"), ArgsFragment((0,), '{"a": "' + "x" * 40 + '"}'), CallIdentity((0,), "call_x")],
    # the call is over the in-flight limit when it starts with the id
    "over-in-flight": [CallStart((1,), "call_1", "f"), CallStart((2,), "call_2", "f"), CallStart((0,), "call_x", "f")],
}


@pytest.mark.parametrize("way", list(LATE_ID_WAYS))
def test_a_call_carrying_an_id_committed_earlier_in_the_run_owes_no_second_result(way: str) -> None:
    """Whatever else fails the call (a name conflict, its size, the in-flight limit), an id a
    call committed in an earlier stream of the input is answered by that call: the later
    one is dropped from history and owes no result, so the id is never answered twice."""
    run_ids: set[str] = set()
    first, _ = make(committed_ids=run_ids)
    run(first, [*call_ops((0,), "call_x", "f", "{}"), StreamEnd()])
    assert run_ids == {"call_x"}
    config = AssembleConfig(max_tool_argument_bytes=20, max_tool_calls_in_flight_assemble=2)
    second, _ = make(config, committed_ids=run_ids)
    run(second, [*LATE_ID_WAYS[way], StreamEnd()])
    (call,) = [c for c in second.result().calls if c.call_id == "call_x"]
    assert call.state is CallState.FAILED and call.repaired
    assert "call_x" not in [r.tool_call_id for r in second.result().results]


def test_identity_for_unknown_key_opens_the_call() -> None:
    asm, _ = make()
    run(asm, [CallIdentity((3,), "c3", "f"), StreamEnd()])
    assert asm.committed((3,)) == CommittedCall((3,), "c3", "f", {}, "client")


def test_repeated_call_start_is_a_quirk_and_fills_identity() -> None:
    asm, _ = make()
    run(asm, [CallStart((0,), None, "f"), ArgsFragment((0,), "{}"), CallStart((0,), "c0", "f"), StreamEnd()])
    result = asm.result()
    assert len(result.calls) == 1 and result.calls[0].call_id == "c0" and result.calls[0].fragments == 1
    assert result.calls[0].state is CallState.COMMITTED
    assert result.quirks["call_start_repeated"] == 1


@pytest.mark.parametrize(
    ("call_id", "name", "missing"),
    [(None, "f", "no call_id"), ("c0", None, "no name"), (None, None, "no call_id and name"), ("", "f", "no call_id")],
)
def test_missing_identity_fails(call_id: str | None, name: str | None, missing: str) -> None:
    asm, _ = make()
    run(asm, [*call_ops((0,), call_id, name, "{}"), StreamEnd()])
    result = asm.result()
    assert result.calls[0].state is CallState.FAILED
    assert result.calls[0].reason == f"missing_id_or_name: {missing}"
    assert len(result.results) == 1 and result.results[0].is_error


# ------------------------------------------------------------------ arguments


def test_whole_arguments_used_when_no_fragments() -> None:
    asm, _ = make()
    run(asm, [CallStart((0,), "c0", "f", whole_arguments='{"a":"é"}'), StreamEnd()])
    (call,) = asm.result().calls
    assert call.arguments == {"a": "é"}
    assert call.bytes == len('{"a":"é"}'.encode()) and call.fragments == 0


def test_fragments_replace_whole_arguments() -> None:
    asm, _ = make()
    run(asm, [CallStart((0,), "c0", "f", whole_arguments='{"a":1}'), ArgsFragment((0,), '{"b":'), ArgsFragment((0,), "2}"), StreamEnd()])
    (call,) = asm.result().calls
    assert call.arguments == {"b": 2}
    assert call.bytes == len('{"b":2}') and call.fragments == 2


def test_no_arguments_is_an_empty_object() -> None:
    asm, _ = make()
    run(asm, [CallStart((0,), "c0", "f"), StreamEnd()])
    assert asm.committed((0,)) == CommittedCall((0,), "c0", "f", {}, "client")


@pytest.mark.parametrize(
    ("fragments", "reason"),
    [
        (['{"a":', "1"], "invalid_json"),
        (['{"a":1}', '{"a":1}'], "invalid_json"),
        (['{"a":1,', '"a":2}'], "invalid_json"),
        (["[1,", "2]"], "arguments_not_object"),
    ],
)
def test_content_failures(fragments: list[str], reason: str) -> None:
    asm, _ = make()
    run(asm, [*call_ops((0,), "c0", "f", *fragments), StreamEnd()])
    (call,) = asm.result().calls
    assert call.state is CallState.FAILED
    assert call.reason is not None and call.reason.startswith(reason)
    assert asm.committed((0,)) is None


def test_fragment_after_block_stop_fails_the_call() -> None:
    asm, _ = make()
    run(asm, [*call_ops((0,), "c0", "f", "{}"), BlockStop((0,)), ArgsFragment((0,), " "), StreamEnd()])
    (call,) = asm.result().calls
    assert call.state is CallState.FAILED
    assert call.reason is not None and call.reason.startswith("stream_error")


def test_fragment_before_call_start_opens_the_call_and_is_a_quirk() -> None:
    asm, _ = make()
    run(asm, [ArgsFragment((0,), "{}"), CallIdentity((0,), "c0", "f"), StreamEnd()])
    result = asm.result()
    assert result.calls[0].state is CallState.COMMITTED and result.calls[0].fragments == 1
    assert result.quirks == {"fragment_before_call_start": 1}


def test_registry_checks_client_calls_only() -> None:
    registry = ToolRegistry.from_tools([{"name": "known", "input_schema": {"type": "object", "required": ["q"]}}])
    asm, _ = make(registry=registry)
    run(
        asm,
        [
            *call_ops((0,), "c0", "invented", "{}"),
            *call_ops((1,), "c1", "known", "{}"),
            *call_ops((2,), "c2", "known", '{"q":1}'),
            CallStart((3,), "s3", "web_search", executor="server"),
            StreamEnd(),
        ],
    )
    calls = asm.result().calls
    assert [c.state for c in calls] == [CallState.FAILED, CallState.FAILED, CallState.COMMITTED, CallState.COMMITTED]
    assert calls[0].reason is not None and calls[0].reason.startswith("unknown_tool")
    assert calls[1].reason is not None and calls[1].reason.startswith("schema_invalid")
    assert [r.tool_call_id for r in asm.result().results] == ["c0", "c1"]


def test_server_calls_owe_no_result() -> None:
    asm, _ = make()
    run(asm, [CallStart((0,), "srv_0", "web_search", executor="server"), ArgsFragment((0,), '{"q":'), CallStart((1,), "c1", "f")])
    run(asm, [StreamTruncated()])
    result = asm.result()
    assert [(c.executor, c.state) for c in result.calls] == [("server", CallState.FAILED), ("client", CallState.FAILED)]
    assert [r.tool_call_id for r in result.results] == ["c1"]
    asm2, _ = make()
    run(asm2, [CallStart((0,), "srv_0", "web_search", executor="server"), StreamEnd()])
    assert asm2.result().results == []
    assert asm2.committed((0,)) == CommittedCall((0,), "srv_0", "web_search", {}, "server")


# ------------------------------------------------------------------ order, ops after end


def test_results_follow_provider_key_order() -> None:
    asm, _ = make()
    run(asm, [*call_ops((2,), "c2", "f", "{"), *call_ops((0, 5), "c05", "f", "{"), *call_ops((0, 1), "c01", "f", "{")])
    run(asm, [*call_ops((1,), "c1", "f", "{"), StreamTruncated()])
    result = asm.result()
    assert [c.call_id for c in result.calls] == ["c01", "c05", "c1", "c2"]
    assert [r.tool_call_id for r in result.results] == ["c01", "c05", "c1", "c2"]
    assert [v.call_id for v in asm.views()] == ["c01", "c05", "c1", "c2"]


def test_ops_after_stream_end_are_ignored_and_counted() -> None:
    asm, _ = make()
    run(asm, [*call_ops((0,), "c0", "f", "{}"), StreamEnd()])
    before = [c.to_json() for c in asm.result().calls]
    events = run(asm, [ArgsFragment((0,), "x"), *call_ops((1,), "c1", "g", "{}"), StreamTruncated(), StreamError("late")])
    assert [e.kind for e in events] == ["quirk"]  # reported once, counted every time
    result = asm.result()
    assert [c.to_json() for c in result.calls] == before
    assert result.end == "complete"
    assert result.quirks == {"op_after_stream_end": 5}


def test_quirk_op_is_counted_and_reported_once() -> None:
    asm, _ = make()
    events = run(asm, [Quirk("sparse_index"), Quirk("sparse_index")])
    assert [(e.kind, e.detail) for e in events] == [("quirk", "sparse_index")]
    assert asm.result().quirks == {"sparse_index": 2}


# ------------------------------------------------------------------ events


def test_stream_start_op_opens_the_stream_once() -> None:
    asm, _ = make()
    assert [e.kind for e in asm.apply(StreamStart({"message_id": "m"}))] == ["stream_start"]
    assert [e.kind for e in asm.apply(CallStart((0,), "c", "f"))] == ["call_opened"]


def test_events_have_increasing_seq_and_fake_clock_times() -> None:
    asm, clock = make()
    events = run(asm, [CallStart((0,), "c0", "f")])
    clock.advance(1.5)
    events += run(asm, [ArgsFragment((0,), "{}")])
    clock.advance(2.0)
    events += run(asm, [StreamEnd()])
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [(e.kind, e.t) for e in events] == [
        ("stream_start", 0.0),
        ("call_opened", 0.0),
        ("fragment", 1.5),
        ("state", 3.5),
        ("state", 3.5),
        ("stream_end", 3.5),
    ]
    transitions = asm.result().calls[0].transitions
    assert [(t.state, t.t) for t in transitions] == [(CallState.OPEN, 0.0), (CallState.ARGS_COMPLETE, 3.5), (CallState.COMMITTED, 3.5)]
    assert all(e.stream == 0 for e in events)


def test_fragment_events_carry_running_byte_counts() -> None:
    asm, _ = make()
    events = run(asm, call_ops((0,), "c0", "f", '{"a":"', "日本", '"}'))
    frags = [e for e in events if e.kind == "fragment"]
    assert [(e.call.bytes, e.call.fragments) for e in frags if e.call] == [(6, 1), (12, 2), (14, 3)]


def test_every_state_change_emits_a_state_event() -> None:
    asm, _ = make(AssembleConfig(max_tool_argument_bytes=16, max_tool_calls_in_flight_assemble=3))
    events = run(
        asm,
        [
            *call_ops((0,), "c0", "f", "{}"),
            BlockStop((0,)),
            *call_ops((1,), "c1", "f", "[]"),
            *call_ops((2,), "c2", "f", "x" * 20),
            *call_ops((3,), "c3", "f", "{}"),
            *call_ops((4,), None, "f", "{}"),
            StreamEnd(),
        ],
    )
    for call in asm.result().calls:
        mine = [e for e in events if e.kind == "state" and e.call is not None and e.call.key == call.key]
        # every transition after OPEN has exactly one state event, in order, with the new state
        assert [e.call.state for e in mine if e.call] == [t.state for t in call.transitions[1:]]
        assert [e.call.transitions for e in mine if e.call] == [tuple(call.transitions[: i + 2]) for i in range(len(mine))]
    assert len([e for e in events if e.kind == "call_opened"]) == 5


def test_no_event_ever_contains_argument_text() -> None:
    registry = ToolRegistry.from_tools([{"name": "f", "input_schema": {"type": "object", "properties": {"n": {"type": "integer", "enum": [1]}}}}])
    asm, _ = make(AssembleConfig(max_tool_argument_bytes=200), registry=registry)
    half = len(SECRET) // 2
    ops: list[Op] = [
        *call_ops((0,), "c0", "f", '{"n":"' + SECRET[:half], SECRET[half:] + '"}'),  # schema_invalid
        *call_ops((1,), "c1", "f", '{"n":"' + SECRET + '",}'),  # invalid_json
        *call_ops((2,), "c2", "f", '{"n":"' + SECRET * 10 + '"}'),  # overflow
        *call_ops((3,), "c3", "f", '["' + SECRET + '"]'),  # not an object
        *call_ops((4,), "c4", "f", '{"n":1}'),  # committed
        *call_ops((5,), "c5", "f", '{"n":"' + SECRET),  # fragment after block stop
        BlockStop((5,)),
        ArgsFragment((5,), SECRET + '"}'),
        StreamEnd(),
        ArgsFragment((0,), SECRET),
    ]
    events = run(asm, ops)
    assert {e.kind for e in events} >= {"fragment", "state", "stream_end", "quirk"}
    dumped = json.dumps([e.to_json() for e in events]) + json.dumps([v.to_json() for v in asm.views()])
    assert SECRET not in dumped
    assert SECRET[:half] not in dumped and SECRET[half:] not in dumped
    assert "".join(repr(e) for e in events).count(SECRET) == 0
    # the result document's reasons do not quote it either (only committed arguments may)
    assert SECRET not in json.dumps(asm.result().to_json())


def test_redacted_types_have_no_field_for_argument_text() -> None:
    assert [f.name for f in dataclasses.fields(CallView)] == [
        "key",
        "call_id",
        "name",
        "state",
        "reason",
        "bytes",
        "fragments",
        "executor",
        "transitions",
    ]
    assert [f.name for f in dataclasses.fields(AssemblyEvent)] == ["seq", "t", "kind", "stream", "call", "end", "detail"]


def test_stream_index_is_carried_on_events() -> None:
    asm = Assembler("test", clock=FakeClock(), stream_index=3)
    assert {e.stream for e in run(asm, [CallStart((0,), "c", "f"), StreamEnd()])} == {3}


# ------------------------------------------------------------------ random op sequences

KEYS = [(0,), (1,), (2,)]
op_strategy = st.one_of(
    st.builds(CallStart, st.sampled_from(KEYS), st.sampled_from([None, "id-a", "id-b"]), st.sampled_from([None, "f", "g"]), st.sampled_from(["client", "server"])),
    st.builds(CallIdentity, st.sampled_from(KEYS), st.sampled_from([None, "id-a", "id-b"]), st.sampled_from([None, "f", "g"])),
    st.builds(ArgsFragment, st.sampled_from(KEYS), st.sampled_from(["{", "}", '"k":', "1", SECRET, "é" * 5, ""])),
    st.builds(BlockStop, st.sampled_from(KEYS)),
    st.sampled_from([StreamEnd(), StreamTruncated(), StreamError("e"), Cancel("stop"), Quirk("q")]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(op_strategy, max_size=25), st.sampled_from([StreamEnd(), StreamTruncated(), StreamError("e"), Cancel("stop")]))
def test_random_op_sequences_keep_the_invariants(ops: list[Op], final: Op) -> None:
    asm, _ = make(AssembleConfig(max_tool_argument_bytes=40, max_tool_calls_in_flight_assemble=2))
    events = run(asm, [*ops, final])
    assert asm.ended
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1))
    result = asm.result()
    assert all(c.state.terminal for c in result.calls)
    if result.end != "complete":
        assert all(c.state is not CallState.COMMITTED for c in result.calls)
    owed: list[str | None] = []
    for c in result.calls:  # exactly one result per tool_call_id, even if two records share one
        if c.executor == "client" and c.state is not CallState.COMMITTED and (c.call_id is None or c.call_id not in owed):
            owed.append(c.call_id)
    assert [r.tool_call_id for r in result.results] == owed
    assert all(r.is_error for r in result.results)
    for call in result.calls:
        assert (call.arguments is not None) == (call.state is CallState.COMMITTED)
        assert call.transitions[0].state is CallState.OPEN
    dumped = json.dumps([e.to_json() for e in events])
    assert SECRET not in dumped


# ------------------------------------------------------------------ idle timeout (check_idle)


def test_idle_open_call_fails_after_the_timeout() -> None:
    asm, clock = make(AssembleConfig(assemble_idle_timeout_s=60))
    run(asm, [*call_ops((0,), "c0", "f", "{"), *call_ops((1,), "c1", "g", "{")])
    clock.advance(30)
    run(asm, [ArgsFragment((1,), '"a":1')])  # c1 stays alive
    clock.advance(29.5)
    assert asm.check_idle() == []
    clock.advance(0.5)  # c0: 60 s without a fragment
    events = asm.check_idle()
    assert [(e.kind, e.call.call_id if e.call else None) for e in events] == [("state", "c0")]
    views = asm.views()
    assert [v.state for v in views] == [CallState.FAILED, CallState.OPEN]
    assert views[0].reason == "idle_timeout: no fragment for 60 s"
    clock.advance(30)
    asm.check_idle()
    assert [v.state for v in asm.views()] == [CallState.FAILED, CallState.FAILED]
    run(asm, [ArgsFragment((1,), "}"), StreamEnd()])  # too late
    result = asm.result()
    assert [r.tool_call_id for r in result.results] == ["c0", "c1"]
    assert all((c.reason or "").startswith("idle_timeout") for c in result.calls)


def test_idle_timeout_spares_calls_whose_block_stopped_and_ended_streams() -> None:
    asm, clock = make(AssembleConfig(assemble_idle_timeout_s=5))
    run(asm, [*call_ops((0,), "c0", "f", "{}"), BlockStop((0,))])
    clock.advance(100)
    assert asm.check_idle() == []
    run(asm, [*call_ops((1,), "c1", "f", "{}"), StreamEnd()])
    clock.advance(100)
    assert asm.check_idle() == []
    assert states(asm) == [CallState.COMMITTED, CallState.COMMITTED]


def test_fragments_after_our_own_overflow_are_not_a_provider_quirk() -> None:
    from toollatch import AssembleConfig
    from toollatch.core.model import ArgsFragment, CallStart, StreamEnd, StreamStart

    asm = Assembler("openai-chat", config=AssembleConfig(max_tool_argument_bytes=4))
    for op in (StreamStart(), CallStart((0,), "c", "f"), ArgsFragment((0,), '{"a":'), ArgsFragment((0,), "1}"), StreamEnd()):
        asm.apply(op)
    result = asm.result()
    assert result.calls[0].reason.startswith("arguments_exceed_max_bytes")
    assert result.calls[0].fragments == 2 and result.quirks == {}


@pytest.mark.parametrize("thing", [None, {"kind": "fragment"}, "ArgsFragment", ("args", 0)])
def test_apply_refuses_what_is_not_an_op_before_changing_anything(thing: object) -> None:
    asm, _ = make()
    with pytest.raises(TypeError, match="takes an op"):
        asm.apply(thing)  # type: ignore[arg-type]
    assert not asm.began
    events = run(asm, [*call_ops((0,), "c1", "f", "{}"), StreamEnd()])
    assert [e.kind for e in events][0] == "stream_start" and states(asm) == [CallState.COMMITTED]


# ------------------------------------------------------------------ ArgsFinal


def test_final_text_replaces_the_fragments_received() -> None:
    asm, _ = make()
    run(asm, [CallStart((0,), "c1", "f"), ArgsFragment((0,), '{"a":'), ArgsFragment((0,), '"pre'), ArgsFinal((0,), '{"a":"final"}'), StreamEnd()])
    (call,) = asm.result().calls
    assert call.state is CallState.COMMITTED and call.arguments == {"a": "final"}
    assert call.bytes == len('{"a":"final"}') and call.fragments == 3


def test_final_text_replaces_arguments_that_came_whole() -> None:
    asm, _ = make()
    run(asm, [CallStart((0,), "c1", "f", whole_arguments='{"a":1}'), ArgsFinal((0,), '{"a":2}'), StreamEnd()])
    assert asm.result().calls[0].arguments == {"a": 2}


def test_final_text_over_the_byte_limit_fails_the_call() -> None:
    asm, _ = make(AssembleConfig(max_tool_argument_bytes=8))
    run(asm, [CallStart((0,), "c1", "f"), ArgsFragment((0,), "{}"), ArgsFinal((0,), '{"a":"long"}'), StreamEnd()])
    (call,) = asm.result().calls
    assert call.state is CallState.FAILED and (call.reason or "").startswith("arguments_exceed_max_bytes")


def test_final_text_after_the_block_stopped_fails_the_call() -> None:
    asm, _ = make()
    run(asm, [CallStart((0,), "c1", "f"), ArgsFragment((0,), "{}"), BlockStop((0,)), ArgsFinal((0,), '{"a":1}'), StreamEnd()])
    (call,) = asm.result().calls
    assert call.state is CallState.FAILED and "after the block stopped" in (call.reason or "")


def test_invalid_final_text_is_diagnosed_as_one_fragment() -> None:
    asm, _ = make()
    run(asm, [CallStart((0,), "c1", "f"), ArgsFragment((0,), '{"a":1}'), ArgsFinal((0,), '{"a":1,}'), StreamEnd()])
    (call,) = asm.result().calls
    assert call.state is CallState.FAILED and call.diagnosis is not None and call.diagnosis.get("fragment_index") == 0
