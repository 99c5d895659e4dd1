"""Tests for toollatch.wire.retell: a non-streaming body re-told as the stream that would have carried it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toollatch.core.config import AssembleConfig
from toollatch.core.pipeline import Pipeline
from toollatch.wire.capture import read_capture
from toollatch.wire.retell import retell_body, retell_capped


def chat_body(ids: list[str]) -> bytes:
    calls = [{"id": i, "type": "function", "function": {"name": "f", "arguments": '{"a": %d}' % n}} for n, i in enumerate(ids)]
    return json.dumps({"id": "r", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": calls}, "finish_reason": "tool_calls"}]}).encode()


def responses_body(ids: list[str]) -> bytes:
    items = [{"type": "function_call", "id": f"fc_{n}", "call_id": i, "name": "f", "arguments": "{}", "status": "completed"} for n, i in enumerate(ids)]
    return json.dumps({"id": "resp", "object": "response", "status": "completed", "output": items}).encode()


def verdicts(wire: bytes, config: AssembleConfig | None = None) -> list[tuple[Any, ...]]:
    pipeline = Pipeline(name="b", config=config)
    for event in read_capture(wire, "b"):
        pipeline.feed(event)
    pipeline.close()
    return [(c.call_id, c.state.value, c.reason) for r in pipeline.results() for c in r.calls]


@pytest.mark.parametrize("in_flight", [32, 3])
@pytest.mark.parametrize(("dialect", "body"), [("openai-chat", chat_body), ("openai-responses", responses_body)])
def test_a_call_told_that_shares_its_id_with_a_call_left_out_fails_as_among_them_all(dialect: str, body: Any, in_flight: int) -> None:
    """Under an in-flight limit smaller than the calls kept too: the call told past them
    fails for its shared id in both (the id is checked before the limit), as it does in
    the whole body (before, too_many_tool_calls there, the shared id here)."""
    ids = [f"c{n}" for n in range(12)]
    ids[10] = ids[11] = "c2"  # two calls past the first 5 carry the id of the third
    raw = body(ids)
    whole, _ = retell_body(dialect, raw)
    capped, problem, untold = retell_capped(dialect, raw, max_calls=5)
    assert whole is not None and capped is not None and problem is None
    config = AssembleConfig(max_tool_calls_in_flight_assemble=in_flight)
    full, shown = verdicts(whole, config), verdicts(capped, config)
    assert shown[:5] == full[:5] and shown[5] == full[10]
    assert shown[2] == ("c2", "failed", "stream_error: call id used by more than one call")
    assert shown[5] == ("c2", "failed", "stream_error: call id used by more than one call")  # the one call past them told
    assert len(shown) == 6 and untold == 6


def test_a_body_without_shared_ids_is_cut_at_the_limit() -> None:
    raw = chat_body([f"c{n}" for n in range(12)])
    capped, _, untold = retell_capped("openai-chat", raw, max_calls=5)
    assert capped is not None and len(verdicts(capped)) == 5 and untold == 7
