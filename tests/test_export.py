"""Redacted reproducers replay to identical verdicts and carry none of the argument strings."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from toollatch import Pipeline, read_capture
from toollatch.redaction.export import redact_capture

from .conftest import CAPTURES, CASES, expected_files

ALL_FILES = expected_files(CAPTURES) + expected_files(CASES)


def verdicts(data: bytes) -> list[list[tuple[Any, ...]]]:
    pipeline = Pipeline()
    for event in read_capture(data):
        pipeline.feed(event)
    pipeline.close()
    return [
        [(c.call_id, c.name, c.state.value, (c.reason or "").split(":")[0], c.bytes, c.fragments, c.executor) for c in r.calls]
        + [("end", r.end), ("quirks", sorted(r.quirks.items()))]
        for r in pipeline.results()
    ]


def argument_strings(data: bytes) -> set[str]:
    """String values (4+ characters) inside the committed arguments of the original."""
    pipeline = Pipeline()
    for event in read_capture(data):
        pipeline.feed(event)
    pipeline.close()
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str) and len(value) >= 4 and not re.fullmatch(r"x+", value):
            found.add(value)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    for result in pipeline.results():
        for call in result.calls:
            walk(call.arguments)
    return found


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_redacted_export_replays_to_identical_verdicts(path: Path) -> None:
    original = path.read_bytes()
    redacted = redact_capture(original, str(path))
    assert verdicts(redacted) == verdicts(original)
    text = redacted.decode("utf-8", "surrogatepass")
    leaked = [s for s in argument_strings(original) if json.dumps(s)[1:-1] in text or s in text]
    assert leaked == []


def test_redaction_is_idempotent_in_shape() -> None:
    raw = (
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function",'
        b'"function":{"name":"login","arguments":"{\\"password\\": \\"hunter"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"2\\u00e9\\"}"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
    )
    once = redact_capture(raw)
    assert b"hunter" not in once and b"password" in once  # keys stay, values go
    assert verdicts(once) == verdicts(raw)
    assert redact_capture(once) == once


def test_cli_export_writes_reproducer_report_and_summary(tmp_path: Path) -> None:
    from toollatch.cli import main

    from .test_fixture_classes import wire

    source = tmp_path / "bug.sse"
    source.write_bytes(wire("anthropic", [("t1", "login", ['{"pw": "sk-', 'canary-42"}']), ("t2", "f", ['{"a": ', "oops}"])]))
    out = tmp_path / "repro.sse"
    assert main(["export", "--redact", str(source), "-o", str(out)]) == 0
    produced = [out, tmp_path / "repro.sse.report.json", tmp_path / "repro.sse.md"]
    for path in produced:
        assert b"canary" not in path.read_bytes() and b"oops" not in path.read_bytes()
    assert verdicts(out.read_bytes()) == verdicts(source.read_bytes())
    report = json.loads(produced[1].read_text())
    assert [c["state"] for c in report["streams"][0]["calls"]] == ["committed", "failed"]
    assert all("arguments" not in c for c in report["streams"][0]["calls"])
    summary = produced[2].read_text()
    assert "| 1 | `f` | `t2` | FAILED | `invalid_json` |" in summary and "broke in fragment 1 at byte 6" in summary


def test_cli_exports_report_and_summary_name_the_input_by_its_file_name_only(tmp_path: Path) -> None:
    """They are meant for a public issue: a stream that ends at an unreadable event quotes its
    input's name and line, never the local folders it was read from."""
    from toollatch.cli import main

    folder = tmp_path / "home-of-someone" / "private-project"
    folder.mkdir(parents=True)
    source = folder / "bug.sse"
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1'}}]}, "finish_reason": None}]}
    source.write_text(f"data: {json.dumps(chunk)}\n\ndata: {{not json\n\n")
    out = tmp_path / "repro.sse"
    assert main(["export", str(source), "-o", str(out)]) == 0
    report, summary = (tmp_path / "repro.sse.report.json").read_text(), (tmp_path / "repro.sse.md").read_text()
    assert "bug.sse:3" in report and "bug.sse:3" in summary  # the unreadable event's place, named
    for text in (report, summary, out.read_text()):
        assert "private-project" not in text and "home-of-someone" not in text


def test_cli_export_of_a_missing_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toollatch.cli import main

    assert main(["export", "--redact", str(tmp_path / "nope.sse"), "-o", str(tmp_path / "o.sse")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope.sse" in err


def _recorded(data: bytes, name: str, values: bool) -> tuple[object, ...]:
    from toollatch.redaction.export import EventRedactor
    from toollatch.wire.capture import CaptureError, iter_capture

    recorder = EventRedactor(keep=False, record=True, values=values)
    try:
        for event in iter_capture([data], name):
            recorder.feed(event)
    except CaptureError as exc:
        return ("unreadable", str(exc))
    stray = recorder.finish()[1]
    return stray, recorder.texts, recorder.names, recorder.finals, recorder.piece_strings


def test_a_recording_reading_masks_nothing_and_finds_the_same_places() -> None:
    from .test_large import shared_files

    files = shared_files()
    if not files:
        pytest.skip("no shared captures or cases (TOOLLATCH_SHARED)")
    for path in files:
        data = path.read_bytes()
        assert _recorded(data, path.name, values=False) == _recorded(data, path.name, values=True), path.name
    data = b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\\"q\\":1}"}}]}}]}\n\n'
    event = next(iter(read_capture(data)))
    before = json.dumps(event.data)
    from toollatch.redaction.export import EventRedactor

    recorder = EventRedactor(keep=False, record=True)
    assert recorder.feed(event) == [] and json.dumps(event.data) == before  # the event read is left as it was
    assert [t[0] for t in recorder.texts.values()] == [['{"q":1}']]


def test_a_bedrock_invoke_pair_split_across_chunks_is_no_stray_place() -> None:
    """A committed call whose character is written as a surrogate pair split across two
    InvokeModel chunks: both readings (masking or not) take every place, and the reproducer
    keeps the same verdicts."""
    import base64

    inner = [
        {"type": "message_start", "message": {"id": "m", "role": "assistant", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"a":"\ud83d'}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '\ude00"}'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    data = b"".join(json.dumps({"chunk": {"bytes": base64.b64encode(json.dumps(e).encode()).decode()}}).encode() + b"\n" for e in inner)
    assert verdicts(data)[0][0][2] == "committed"
    found = _recorded(data, "split.jsonl", values=False)
    assert found[0] == [] and found == _recorded(data, "split.jsonl", values=True)
    assert verdicts(redact_capture(data)) == verdicts(data)
