"""toollatch.observe.timing: compact chunk times, the timed pass and the timing lens; HAR ``_chunks``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toollatch.wire.capture import CaptureError
from toollatch.wire.har import read_har, write_har
from toollatch.observe.timing import STALL_S, ChunkTimes, TimingError, timed_pass, timing_lens

CALL = (
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"a\\": 1}"}}]}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
    b"data: [DONE]\n\n"
)


def _chunks(times: list[float]) -> list[tuple[float, bytes]]:
    events = [e + b"\n\n" for e in CALL.split(b"\n\n") if e]
    assert len(events) == len(times)
    return list(zip(times, events))


def test_chunk_times_round_trip_compactly() -> None:
    times = ChunkTimes.from_chunks([(10.0 + i * 0.01, b"x" * 3) for i in range(100_000)], first_byte_s=0.2)
    doc = times.to_json()
    assert doc["chunks"] == 100_000 and len(doc["ends"]) + len(doc["times"]) < 100_000 * 8 * 4 / 3 + 16
    back = ChunkTimes.from_json(json.loads(json.dumps(doc)))
    assert list(back.ends) == list(times.ends) and back.first_byte_s == 0.2
    assert back.duration_s == pytest.approx(999.99, rel=1e-6)


def test_chunk_times_errors_name_the_field() -> None:
    with pytest.raises(TimingError, match=r"times: 1 chunk ends but 0 times|chunk ends but"):
        ChunkTimes.from_json({"ends": "AQAAAA==", "times": ""})
    with pytest.raises(TimingError, match=r"\.ends: not valid base64"):
        ChunkTimes.from_json({"ends": "!!", "times": ""})


def test_split_and_fit_keep_the_chunks_of_a_body_of_another_length() -> None:
    times = ChunkTimes.from_chunks([(0.0, b"abcd"), (0.5, b"efgh")])
    assert list(times.split(b"abcdefgh")) == [(0.0, b"abcd"), (0.5, b"efgh")]
    assert [t for t, _ in times.split(b"abcdefghijkl")] == [0.0, 0.5]
    assert b"".join(p for _, p in times.split(b"abcdefghijkl")) == b"abcdefghijkl"


def test_timing_lens_marks_stalls_first_call_and_commit() -> None:
    chunks = _chunks([0.0, 0.1, 0.7, 0.75])
    times = ChunkTimes.from_chunks(chunks, first_byte_s=0.3)
    found = timed_pass(chunks, "t.sse")
    doc = timing_lens(times, found, idle_timeout_s=60.0)
    assert doc["recorded"] and doc["duration_s"] == 0.75 and doc["first_byte_s"] == 0.3
    assert doc["first_call_s"] == 0.0
    assert [c["call_id"] for c in doc["commits"]] == ["call_1"] and doc["commits"][0]["t"] == 0.75  # at the normal end
    assert doc["stalls_total"] == 1 and doc["stalls"][0]["gap_s"] == pytest.approx(0.6) and doc["stalls"][0]["gap_s"] >= STALL_S
    assert doc["gaps"]["max_s"] == pytest.approx(0.6)
    assert doc["idle_timeout"]["longest_quiet_s"] == pytest.approx(0.6)
    assert doc["idle_timeout"]["margin_s"] == pytest.approx(59.4)


def test_no_times_are_invented() -> None:
    assert timing_lens(None)["recorded"] is False


def test_har_chunks_extension_round_trips() -> None:
    chunks = _chunks([0.0, 0.05, 0.1, 0.15])
    times = ChunkTimes.from_chunks(chunks)
    har = write_har(CALL, times, url="http://u/v1/chat/completions", request={"stream": True, "tools": []})
    doc = json.loads(har)
    content = doc["log"]["entries"][0]["response"]["content"]
    assert content["text"] == CALL.decode() and [c["t"] for c in content["_chunks"]] == [0.0, 0.05, 0.1, 0.15]
    (entry,) = read_har(har, "r.har")
    assert entry.body == CALL and entry.times is not None
    assert list(entry.times.ends) == list(times.ends) and entry.times.duration_s == pytest.approx(0.15)


def test_har_chunks_that_do_not_join_to_the_body_are_named() -> None:
    doc = json.loads(write_har(CALL, ChunkTimes.from_chunks(_chunks([0, 1, 2, 3])), url="http://u/v1/chat/completions"))
    doc["log"]["entries"][0]["response"]["content"]["_chunks"][1]["text"] = "x"
    with pytest.raises(CaptureError, match=r"r.har: entry 0: response.content._chunks do not join"):
        read_har(json.dumps(doc).encode(), "r.har")
    doc["log"]["entries"][0]["response"]["content"]["_chunks"][1]["t"] = "soon"
    with pytest.raises(CaptureError, match=r"_chunks\[1\].t is not a number"):
        read_har(json.dumps(doc).encode(), "r.har")


def test_har_without_chunks_has_no_times() -> None:
    (entry,) = read_har(write_har(CALL, None, url="http://u/v1/chat/completions"), "r.har")
    assert entry.times is None and entry.body == CALL


def test_assemble_reads_a_timed_har_on_its_recorded_clock(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from toollatch.cli import main

    har = tmp_path / "rec.har"
    har.write_bytes(write_har(CALL, ChunkTimes.from_chunks(_chunks([0.0, 0.1, 0.7, 0.75])), url="http://u/v1/chat/completions"))
    assert main(["assemble", str(har), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (timing,) = doc["timing"]
    assert timing["recorded"] and timing["duration_s"] == 0.75 and timing["stalls_total"] == 1
    (call,) = doc["streams"][0]["calls"]
    assert call["state"] == "committed"
    plain = tmp_path / "rec.sse"
    plain.write_bytes(CALL)
    assert main(["assemble", str(plain), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["timing"] == [{"recorded": False, "why": "a plain capture holds no chunk arrival times: none are invented"}]


def test_cut_keeps_the_times_of_a_readable_prefix() -> None:
    times = ChunkTimes.from_chunks([(0.0, b"abcd"), (0.5, b"efgh"), (0.9, b"ij")])
    cut = times.cut(6)
    assert list(cut.ends) == [4, 6] and list(cut.times) == [0.0, 0.5]
    assert times.cut(8).duration_s == 0.5 and times.cut(100) is times


def test_a_batch_of_arrivals_is_recorded_as_each_one_alone() -> None:
    """add_all (the proxy's tee records a round's chunks at once) gives what add gives one by
    one: offsets from the origin, a time before the previous one taken as it, empty chunks skipped."""
    arrivals = [(3, 100.5), (0, 100.6), (5, 100.4), (2, 101.0), (7, 100.9), (1, 99.0)]
    batched, one_by_one = ChunkTimes(), ChunkTimes()
    batched.add_all(arrivals[:2], 100.0)
    batched.add_all(arrivals[2:], 100.0)
    for size, at in arrivals:
        one_by_one.add(size, at - 100.0)
    assert list(batched.ends) == list(one_by_one.ends) == [3, 8, 10, 17, 18]
    assert list(batched.times) == list(one_by_one.times) == [0.5, 0.5, 1.0, 1.0, 1.0]
