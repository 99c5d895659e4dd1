"""The naive-client lane shows what unlatched strategies would have done, without leaking."""

from __future__ import annotations

import json
from pathlib import Path

from toollatch import Pipeline, read_capture
from toollatch.redaction.naive import NaiveAction, naive_lane

from .conftest import CASES, require_shared
from .test_fixture_classes import anthropic_message_start, anthropic_sse, anthropic_tool_block


def lane(data: bytes) -> list[NaiveAction]:
    events = read_capture(data)
    pipeline = Pipeline()
    for event in events:
        pipeline.feed(event)
    pipeline.close()
    assert pipeline.dialect is not None
    return naive_lane(events, pipeline.dialect, pipeline.results())


def case(name: str) -> bytes:
    require_shared(CASES)
    return Path(CASES / name).read_bytes()


def test_parse_early_executes_a_half_call_and_shows_only_bytes() -> None:
    actions = lane(case("b11-parsable-early-then-more.sse"))
    early = [a for a in actions if a.strategy == "execute_when_parses"]
    assert [(a.name, a.fragment, a.bytes, a.arguments, a.differs) for a in early] == [("search", 0, 14, None, True)]
    assert {a.strategy for a in actions} == {"execute_when_parses", "count_brackets"}


def test_names_concatenated_and_calls_merged_by_position() -> None:
    renamed = [a for a in lane(case("b10-name-repeated-every-chunk.sse")) if a.strategy == "concatenate_names"]
    assert [a.name for a in renamed] == ["read_fileread_fileread_file"]
    merged = [a for a in lane(case("b02-parallel-same-index-distinct-ids.sse")) if a.strategy == "merge_by_position"]
    assert [(a.kind, a.bytes, a.arguments) for a in merged] == [("merged", 58, None)]


def test_block_end_execution_on_a_truncated_message_never_shows_the_secret() -> None:
    secret = "sk-naive-canary-123"
    events = [anthropic_message_start(), *anthropic_tool_block(0, "toolu_1", "deploy", ['{"token": "', secret, '"}'])]
    actions = lane(anthropic_sse(events))  # no message_stop: the latch commits nothing
    at_block_end = [a for a in actions if a.strategy == "execute_at_block_end"]
    assert [(a.name, a.fragment, a.differs) for a in at_block_end] == [("deploy", 2, True)]
    assert secret not in json.dumps([a.to_json() for a in actions])


def test_a_clean_stream_shows_no_difference_from_the_latch() -> None:
    actions = lane(case("b18-crlf-separators.sse"))
    assert actions and all(not a.differs and a.arguments == {"q": "alpha"} for a in actions)
