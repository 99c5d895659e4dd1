"""The generated load-test stream (assembler/demo/stress.py)."""

from __future__ import annotations

import pytest

from toollatch import read_capture
from toollatch.core.pipeline import assemble_events
from toollatch.demo.stress import stress_demo


@pytest.mark.parametrize(("events", "calls"), [(200, 2), (1_000, 4), (5_003, 8)])
def test_exactly_the_events_asked_for_and_every_call_commits(events: int, calls: int) -> None:
    demo = stress_demo(events, calls)
    parsed = read_capture(demo.wire)
    assert len(parsed) == demo.events == events
    (result,) = assemble_events(parsed)
    assert result.end == "complete"
    assert [c.state.value for c in result.calls] == list(demo.expected) == ["committed"] * calls
    assert {c.name for c in result.calls} == {"write_note"}
    assert len({c.call_id for c in result.calls}) == calls


def test_the_same_arguments_give_the_same_bytes() -> None:
    assert stress_demo(500, 3).wire == stress_demo(500, 3).wire
    assert stress_demo(500, 3).wire != stress_demo(501, 3).wire


def test_too_few_events_for_the_calls_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="20 events cannot hold 8 calls"):
        stress_demo(20, 8)
