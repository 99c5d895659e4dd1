"""Every real capture and handed case assembles to its expected outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toollatch import Pipeline, ToolRegistry, iter_file
from toollatch.core.model import StreamResult

from .conftest import CAPTURES, CASES, expected_files, load_expected, require_shared, tools_file

SUPPORTED = ("openai-chat", "anthropic", "bedrock", "openai-responses", "gemini", "other")
CAPTURE_FILES = expected_files(CAPTURES, *SUPPORTED)
CASE_FILES = expected_files(CASES)


def assemble(path: Path) -> list[StreamResult]:
    tools = tools_file(path)
    pipeline = Pipeline(registry=ToolRegistry.load(tools) if tools else None, name=str(path))
    for event in iter_file(path):
        pipeline.feed(event)
    pipeline.close()
    return pipeline.results()


def check(path: Path) -> None:
    expected: dict[str, Any] = load_expected(path)
    results = assemble(path)
    calls = [c for r in results for c in r.calls]
    if "end" in expected:
        assert results[-1].end == expected["end"]
    want = expected["calls"]
    assert [c.name for c in calls] == [w["name"] for w in want]
    for got, w in zip(calls, want):
        if w.get("id") is not None:
            assert got.call_id == w["id"]
        state = w.get("state", "committed")
        assert got.state.value == state, got.reason
        if state == "committed":
            assert got.arguments == w["arguments"]
        else:
            assert got.arguments is None
        if w.get("reason"):
            assert (got.reason or "").startswith(w["reason"])
        if w.get("executor"):
            assert got.executor == w["executor"]
    # every client call that is not committed owes exactly one error result
    for r in results:
        owed = [c.call_id for c in r.calls if c.executor == "client" and c.state.value != "committed"]
        assert sorted(map(str, owed)) == sorted(str(x.tool_call_id) for x in r.results)
        assert all(x.is_error for x in r.results)


@pytest.mark.parametrize("path", CAPTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_capture_matches_expected(path: Path) -> None:
    check(path)


@pytest.mark.parametrize("path", CASE_FILES, ids=lambda p: p.name)
def test_case_matches_expected(path: Path) -> None:
    check(path)


def test_shared_data_present() -> None:
    require_shared(CAPTURES)
    require_shared(CASES)
    assert len(expected_files(CAPTURES, "openai-chat")) >= 14
    assert len(expected_files(CAPTURES, "anthropic")) >= 9
    assert CASE_FILES, "no handed cases found"
