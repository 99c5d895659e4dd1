"""Capture framing: raw SSE (curl -N) and JSON Lines -> provider events with locations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch.wire.capture import DONE, CaptureError, ProviderEvent, iter_capture, iter_file, read_capture

from .test_fixture_classes import anthropic_sse, anthropic_tool_events, openai_sse, openai_tool_chunks

SSE = openai_sse(openai_tool_chunks([("call_1", "f", ['{"k":', '"日本"}'])]))
# the same stream as a gateway might frame it: CRLF line ends and keep-alive comments
CRLF_SSE = (b": keep-alive\n" + SSE.replace(b"\n\n", b"\n: ping\n\n", 2)).replace(b"\n", b"\r\n")
ANTHROPIC = anthropic_sse(anthropic_tool_events([("toolu_1", "f", ['{"k":', '"é"}'])]))
JSONL = (
    "\n".join(json.dumps(e, ensure_ascii=False) for e in anthropic_tool_events([("toolu_1", "f", ['{"k":', '"é"}'])])) + "\n"
).encode()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


def test_sse_events_carry_type_payload_and_location() -> None:
    events = read_capture(ANTHROPIC, "x.sse")
    assert events[0].event == "message_start" and events[0].data["type"] == "message_start"
    assert (events[0].line, events[0].offset) == (1, 0)
    for event in events:
        assert event.error is None
        assert ANTHROPIC[event.offset :].startswith(b"event: " + event.event.encode())
        assert ANTHROPIC[: event.offset].count(b"\n") == event.line - 1


def test_sse_without_event_field_and_done() -> None:
    events = read_capture(SSE)
    assert all(e.event is None for e in events)
    assert events[-1].data == DONE
    assert all(isinstance(e.data, dict) for e in events[:-1])


def test_jsonl_events_locations_count_bytes_and_blank_lines() -> None:
    data = b'\n{"type":"ping","s":"\xc3\xa9\xc3\xa9"}\n\n{"type":"message_stop"}'  # last line has no newline
    events = read_capture(data, "x.jsonl")
    assert [(e.event, e.data["type"], e.line, e.offset) for e in events] == [
        (None, "ping", 2, 1),
        (None, "message_stop", 4, 1 + len(b'{"type":"ping","s":"\xc3\xa9\xc3\xa9"}\n') + 1),
    ]


def test_jsonl_with_bom_and_crlf() -> None:
    data = b'\xef\xbb\xbf{"a":1}\r\n{"b":2}\r\n'
    assert [e.data for e in read_capture(data)] == [{"a": 1}, {"b": 2}]


def test_jsonl_detected_after_leading_blank_lines_and_full_jsonl_capture() -> None:
    events = read_capture(b"\n\n" + JSONL)
    assert [e.data["type"] for e in events][:2] == ["message_start", "ping"]
    assert events[0].line == 3 and events[0].offset == 2


def test_crlf_and_comment_framing_gives_the_same_payloads() -> None:
    plain, crlf = read_capture(SSE), read_capture(CRLF_SSE)
    assert [(e.event, e.data) for e in crlf] == [(e.event, e.data) for e in plain]
    assert all("crlf_line_ends" in e.framing for e in crlf)
    assert "comment_line" in crlf[0].framing
    assert all(e.framing == () for e in plain)


def test_a_bad_sse_line_is_an_error_event_and_reading_goes_on() -> None:
    data = b'data: {"a":1}\n\ndata: {"a":\n\ndata: {"b":2}\n\n'
    events = read_capture(data, "cap.sse")
    assert [e.data for e in events] == [{"a": 1}, None, {"b": 2}]
    bad = events[1]
    assert bad.error is not None
    where = data.index(b'data: {"a":\n')
    assert where == 15
    assert bad.error.startswith(f"cap.sse:3 (byte {where})")
    assert "not JSON" in bad.error


def test_a_bad_jsonl_line_names_line_and_byte() -> None:
    data = b'{"a":1}\nnot json at all\n{"b":2}\n'
    events = read_capture(data, "cap.jsonl")
    assert [e.data for e in events] == [{"a": 1}, None, {"b": 2}]
    assert events[1].error is not None and events[1].error.startswith("cap.jsonl:2 (byte 8)")


def test_a_non_utf8_jsonl_line_names_the_byte() -> None:
    data = b'{"a":1}\n{"b":"\xff"}\n'
    (ok, bad) = read_capture(data, "cap.jsonl")
    assert ok.data == {"a": 1}
    assert bad.error == "cap.jsonl:2 (byte 14): not UTF-8"


def test_error_message_does_not_quote_the_line() -> None:
    secret = "sk-live-dontprintme"
    (bad,) = read_capture(b'{"k": "' + secret.encode() + b'", oops}\n', "c.jsonl")
    assert bad.error is not None and secret not in bad.error


def test_empty_input_has_no_events() -> None:
    assert read_capture(b"") == []
    assert read_capture(b"\n \n") == []


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["sse", "crlf", "anthropic", "jsonl"]), st.data())
def test_any_split_gives_identical_events(kind: str, data: st.DataObject) -> None:
    raw = {"sse": SSE, "crlf": CRLF_SSE, "anthropic": ANTHROPIC, "jsonl": JSONL}[kind]
    raw = b'data: {"x":\n\n' + raw if kind != "jsonl" else b"{bad\n" + raw  # an error event too
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=30))
    assert list(iter_capture(split(raw, cuts), "n")) == read_capture(raw, "n")


def test_bytewise_split_gives_identical_events() -> None:
    for raw in (SSE, CRLF_SSE, ANTHROPIC, JSONL, b"\xef\xbb\xbf" + JSONL, b"\xef\xbb\xbf" + SSE):
        assert list(iter_capture([raw[i : i + 1] for i in range(len(raw))])) == read_capture(raw)


def test_iter_file_reads_and_names_missing_files(tmp_path: Path) -> None:
    path = tmp_path / "c.sse"
    path.write_bytes(SSE)
    assert list(iter_file(path)) == read_capture(SSE, str(path))
    missing = tmp_path / "nope.sse"
    with pytest.raises(CaptureError, match="nope.sse"):
        list(iter_file(missing))


def test_provider_event_is_frozen() -> None:
    event = ProviderEvent(None, {}, 1, 0)
    with pytest.raises(AttributeError):
        event.line = 2  # type: ignore[misc]


@pytest.mark.parametrize("payload", ['{"a": 1}', '  {"a": 1}', '{"a": 1}  ', '\t{"a": 1}\t'])
def test_event_data_with_whitespace_around_the_json_parses(payload: str) -> None:
    (event,) = read_capture(f"data: {payload}\n\n".encode())
    assert event.error is None and event.data == {"a": 1}


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ('{"a": 1} x', "at character 9"),
        ('  {"a": ', "at character 8"),
        ("{'a': 1}", "at character 1"),
        # after the value only JSON's own whitespace may follow: not U+00A0 or a form feed
        ('{"a": 1}\u00a0', "at character 8"),
        ('{"a": 1} \x0c', "at character 9"),
    ],
)
def test_event_data_that_is_not_json_names_the_character(payload: str, where: str) -> None:
    (event,) = read_capture(f"data: {payload}\n\n".encode(), "cap.sse")
    assert event.data is None and event.error is not None
    assert event.error.startswith("cap.sse:1 (byte 0): event data is not JSON") and where in event.error


@pytest.mark.parametrize(
    ("payload", "problem"),
    [('{"a": ' + "9" * 5000 + "}", "a number too long to convert"), ("[" * 100_000 + "]" * 100_000, "nesting too deep")],
)
def test_event_data_json_cannot_hold_is_an_error_event_not_a_crash(payload: str, problem: str) -> None:
    before = 'data: {"ok": 1}\n\n'
    events = read_capture(f"{before}data: {payload}\n\n".encode(), "cap.sse")
    assert events[0].data == {"ok": 1}  # what was read before is kept
    assert events[1].data is None and events[1].error is not None
    assert events[1].error.startswith("cap.sse:3 (byte 17): event data is not JSON") and problem in events[1].error
    assert "9999" not in events[1].error


def test_a_json_lines_capture_cut_mid_line_ends_with_a_truncated_frame_not_an_error() -> None:
    whole = b'{"a": 1}\n{"b": 2}\n'
    events = read_capture(whole + b'{"c": "unfinished', "cut.jsonl")
    assert [e.data for e in events[:2]] == [{"a": 1}, {"b": 2}]
    assert events[2].data is None and events[2].error is None
    assert events[2].framing == ("truncated_frame",) and (events[2].line, events[2].offset) == (3, len(whole))
    (last,) = read_capture(b'{"c": 3}', "whole.jsonl")  # a complete last line without its line end is fine
    assert last.data == {"c": 3} and last.framing == ()


def test_comment_line_is_framed_once_per_comment_line() -> None:
    events = read_capture(b": keep-alive\n: keep-alive\n\ndata: {}\n\n: one\ndata: {}\n\ndata: [DONE]\n\n")
    assert [e.framing.count("comment_line") for e in events] == [2, 1, 0]
