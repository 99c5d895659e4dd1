"""The executor boundary: only a committed call can be run.

:func:`execute` accepts a :class:`~toollatch.core.model.CommittedCall` and nothing else. Handing
it anything else — a view, an outcome, a dict of half-received arguments — raises
:class:`NotCommittedError` and counts ``tool_execute_rejected_not_committed_total``. The
run budget (``max_tool_calls_per_run``) is re-checked here, at enqueue time.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from toollatch.core.calls import RunBudget
from toollatch.observe.metrics import Metrics
from toollatch.core.model import CommittedCall, Reason, ToolResult


class NotCommittedError(TypeError):
    """An executor was handed something that did not pass the completion latch."""


@runtime_checkable
class ToolRunner(Protocol):
    """Runs one committed call and returns the result's content (text)."""

    def run(self, call: CommittedCall) -> str: ...


def execute(
    runner: ToolRunner,
    call: object,
    *,
    budget: RunBudget | None = None,
    metrics: Metrics | None = None,
) -> ToolResult:
    """Run ``call`` with ``runner``; return exactly one result paired with its ``tool_call_id``.

    Raises :class:`NotCommittedError` unless ``call`` is a client :class:`CommittedCall`.
    Over budget, returns an error result ``budget_exceeded`` instead of running.
    """
    if not isinstance(call, CommittedCall) or call.executor != "client":
        if metrics is not None:
            metrics.rejected_not_committed.inc()
        raise NotCommittedError(f"refusing to execute a {type(call).__name__}: only a committed client call may run")
    if budget is not None and not budget.take_execution():
        return ToolResult(call.call_id, True, Reason.BUDGET_EXCEEDED.with_detail(f"more than {budget.limit} calls executed"))
    return ToolResult(call.call_id, False, runner.run(call))
