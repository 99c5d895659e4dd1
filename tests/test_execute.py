"""The executor boundary accepts only committed calls; the budget is re-checked at enqueue."""

from __future__ import annotations

import pytest

from toollatch import AssembleConfig, CallState
from toollatch.core.calls import RunBudget
from toollatch.core.execute import NotCommittedError, ToolRunner, execute
from toollatch.observe.metrics import Metrics
from toollatch.core.model import CommittedCall

from .test_fixture_classes import assemble_bytes, wire


class Echo:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def run(self, call: CommittedCall) -> str:
        self.ran.append(call.call_id)
        return f"ran {call.name}"


def test_runner_protocol() -> None:
    assert isinstance(Echo(), ToolRunner)


def test_committed_call_runs_and_pairs_its_result() -> None:
    runner = Echo()
    result = execute(runner, CommittedCall((0,), "c1", "f", {}))
    assert (result.tool_call_id, result.is_error, result.content) == ("c1", False, "ran f")
    assert runner.ran == ["c1"]


def test_anything_not_committed_is_refused_and_counted() -> None:
    metrics = Metrics()
    (stream,) = assemble_bytes(wire("openai-chat", [("c1", "f", ["{"])]))
    failed = stream.calls[0]
    assert failed.state is CallState.FAILED
    runner = Echo()
    for thing in (failed, {"call_id": "c1", "name": "f", "arguments": {}}, CommittedCall((0,), "s1", "web", {}, "server")):
        with pytest.raises(NotCommittedError):
            execute(runner, thing, metrics=metrics)
    assert runner.ran == []
    assert "tool_execute_rejected_not_committed_total 3.0" in metrics.exposition().decode()


def test_budget_is_rechecked_at_enqueue() -> None:
    budget = RunBudget(AssembleConfig(max_tool_calls_per_run=1).max_tool_calls_per_run)
    runner = Echo()
    first = execute(runner, CommittedCall((0,), "c1", "f", {}), budget=budget)
    second = execute(runner, CommittedCall((1,), "c2", "f", {}), budget=budget)
    assert not first.is_error
    assert second.is_error and second.content.startswith("budget_exceeded") and second.tool_call_id == "c2"
    assert runner.ran == ["c1"]
