"""AWS binary event stream (``application/vnd.amazon.eventstream``) → provider events.

The frames are *encoded here*, independently of the decoder under test, per the AWS "Event
stream encoding" specification (Amazon S3 ``SelectObjectContent`` / Amazon Transcribe
streaming references; the body of Bedrock ``ConverseStream`` and
``InvokeModelWithResponseStream``)::

    prelude   total length (uint32 BE) | headers length (uint32 BE) | CRC-32 of those 8 bytes
    headers   name length (uint8) | name | value type (7 = string) | value length (uint16 BE) | value
    payload   the event's JSON
    message   CRC-32 of everything before it (uint32 BE)

Each Bedrock JSON Lines capture line ``{"<event type>": payload}`` becomes one frame with
``:message-type event``, ``:event-type <event type>`` and the payload as JSON; the binary
form must assemble exactly like the JSON Lines form.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toollatch import AssembleConfig, CallState, Pipeline, iter_capture, iter_file, read_capture
from toollatch.wire.capture import ProviderEvent, is_eventstream
from toollatch.cli import main
from toollatch.core.model import StreamResult

from .conftest import CAPTURES, load_expected, require_shared

HEADER_STRING = 7

# ------------------------------------------------------------------ encoder (the spec, not the decoder)


def encode_header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return bytes([len(raw_name)]) + raw_name + bytes([HEADER_STRING]) + struct.pack(">H", len(raw_value)) + raw_value


def encode_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude, prelude CRC, headers, payload, message CRC."""
    header_bytes = b"".join(encode_header(k, v) for k, v in headers.items())
    total = 12 + len(header_bytes) + len(payload) + 4
    prelude = struct.pack(">II", total, len(header_bytes))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + header_bytes + payload
    return message + struct.pack(">I", zlib.crc32(message))


def _json(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def event_frame(event_type: str, payload: Any) -> bytes:
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return encode_frame(headers, _json(payload))


def exception_frame(exception_type: str, message: str) -> bytes:
    headers = {":exception-type": exception_type, ":content-type": "application/json", ":message-type": "exception"}
    return encode_frame(headers, _json({"message": message}))


def encode_events(events: Sequence[dict[str, Any]]) -> bytes:
    """``{"<type>": payload}`` events (the JSON Lines shape) → event-stream bytes.

    An event whose type ends in ``Exception`` is encoded as an ``exception`` frame.
    """
    out = []
    for event in events:
        ((kind, body),) = event.items()
        if kind.endswith("Exception"):
            headers = {":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"}
            out.append(encode_frame(headers, _json(body)))
        else:
            out.append(event_frame(kind, body))
    return b"".join(out)


def frames_of_jsonl(path: Path) -> list[bytes]:
    return [encode_events([json.loads(line)]) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ------------------------------------------------------------------ helpers


def bedrock_files() -> list[Path]:
    folder = CAPTURES / "bedrock"
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


FILES = bedrock_files()
PARAMS = [pytest.param(p, id=p.name) for p in FILES] or [pytest.param(None, id="no-bedrock-captures")]
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def need(path: Path | None) -> Path:
    if path is None:
        require_shared(CAPTURES / "bedrock")
        pytest.skip("no Bedrock JSON Lines captures found")
    return path


def capture(name: str) -> Path:
    path = CAPTURES / "bedrock" / name
    if not path.exists():
        require_shared(CAPTURES / "bedrock")
        pytest.skip(f"capture {name} not found")
    return path


def run(events: Sequence[ProviderEvent], **kwargs: Any) -> tuple[list[StreamResult], list[dict[str, Any]]]:
    pipeline = Pipeline(clock=lambda: 0.0, name="capture", **kwargs)
    out = []
    for event in events:
        out += pipeline.feed(event)
    out += pipeline.close()
    return pipeline.results(), [e.to_json() for e in out]


def jsons(results: list[StreamResult]) -> list[dict[str, Any]]:
    return [r.to_json() for r in results]


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


# ------------------------------------------------------------------ the encoder itself


def test_encoder_reproduces_the_aws_reference_empty_message() -> None:
    # the empty message of the AWS event-stream test suite (also in botocore's tests)
    assert encode_frame({}, b"") == bytes.fromhex("000000100000000005c248eb7d98c8ff")


def test_encoder_frame_layout() -> None:
    frame = event_frame("messageStop", {"stopReason": "tool_use"})
    total, headers_len, prelude_crc = struct.unpack(">III", frame[:12])
    assert total == len(frame) and prelude_crc == zlib.crc32(frame[:8])
    assert frame[12 : 12 + 1 + len(":event-type")] == b"\x0b:event-type" and frame[12 + 12] == HEADER_STRING
    assert frame[12 + headers_len : -4] == b'{"stopReason":"tool_use"}'
    assert struct.unpack(">I", frame[-4:])[0] == zlib.crc32(frame[:-4])


# ------------------------------------------------------------------ captures: binary == JSON Lines


@pytest.mark.parametrize("path", PARAMS)
def test_binary_form_assembles_like_the_jsonl_form(path: Path | None) -> None:
    path = need(path)
    frames = frames_of_jsonl(path)
    raw = b"".join(frames)
    assert is_eventstream(raw) and not is_eventstream(path.read_bytes())
    binary = read_capture(raw, "capture")
    jsonl = read_capture(path.read_bytes(), "capture")
    assert [e.data for e in binary] == [e.data for e in jsonl]
    assert all(e.error is None and e.framing == () for e in binary)
    assert [e.event for e in binary] == [next(iter(e.data)) for e in jsonl]
    offsets = [sum(len(f) for f in frames[:i]) for i in range(len(frames))]
    assert [(e.line, e.offset) for e in binary] == [(i + 1, o) for i, o in enumerate(offsets)]
    results_bin, events_bin = run(binary)
    results_jsonl, events_jsonl = run(jsonl)
    assert jsons(results_bin) == jsons(results_jsonl)
    assert events_bin == events_jsonl
    expected = load_expected(path)
    (stream,) = results_bin
    assert stream.end == expected["end"] == "complete"
    assert [(c.call_id, c.name, c.arguments, c.executor) for c in stream.calls] == [
        (x["id"], x["name"], x["arguments"], x["executor"]) for x in expected["calls"]
    ]
    assert stream.dialect == ("bedrock-invoke" if path.name.startswith("invoke-") else "bedrock-converse")


@pytest.mark.parametrize("path", PARAMS)
@SETTINGS
@given(data=st.data())
def test_random_byte_splits_of_the_framing_give_identical_results(path: Path | None, data: st.DataObject) -> None:
    path = need(path)
    raw = b"".join(frames_of_jsonl(path))
    whole = read_capture(raw, "capture")
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=60), label="cuts")
    pieces = split(raw, cuts)
    assert list(iter_capture(pieces, "capture")) == whole
    assert jsons(run(whole)[0]) == jsons(run(list(iter_capture(pieces, "capture")))[0])


def test_one_byte_reads_and_the_file_reader_match(tmp_path: Path) -> None:
    path = capture("converse-nova2-lite-two-tools.jsonl")
    raw = b"".join(frames_of_jsonl(path))
    whole = read_capture(raw, str(tmp_path / "c.bin"))
    assert list(iter_capture((raw[i : i + 1] for i in range(len(raw))), str(tmp_path / "c.bin"))) == whole
    (tmp_path / "c.bin").write_bytes(raw)
    assert list(iter_file(tmp_path / "c.bin")) == whole


def test_events_come_out_as_soon_as_their_frame_is_complete() -> None:
    # streaming, not slurping: the reader yields frame k before reading past its last byte
    path = capture("converse-nova-micro-text-then-tool.jsonl")
    frames = frames_of_jsonl(path)
    raw = b"".join(frames)
    consumed = 0

    def reads() -> Iterator[bytes]:
        nonlocal consumed
        for i in range(0, len(raw), 5):
            consumed = min(i + 5, len(raw))
            yield raw[i : i + 5]

    ends = [sum(len(f) for f in frames[: k + 1]) for k in range(len(frames))]
    for k, event in enumerate(iter_capture(reads())):
        assert event.offset == ends[k] - len(frames[k])
        assert ends[k] <= consumed < ends[k] + 5, (k, consumed)


# ------------------------------------------------------------------ corrupt and truncated frames


def test_corrupt_message_crc_names_the_byte_offset_and_keeps_what_came_before() -> None:
    path = capture("converse-nova2-lite-two-tools.jsonl")
    frames = frames_of_jsonl(path)
    bad = next(i for i, f in enumerate(frames) if b"final_result" in f)  # contentBlockStart of the client call
    assert b"contentBlockStart" in frames[bad] and bad > 3
    corrupt = bytearray(frames[bad])
    corrupt[-10] ^= 0x01  # a payload byte: only the message CRC can notice
    raw = b"".join(frames[:bad]) + bytes(corrupt) + b"".join(frames[bad + 1 :])
    offset = sum(len(f) for f in frames[:bad])
    events = read_capture(raw, "x.bin")
    good = read_capture(b"".join(frames[:bad]), "x.bin")
    assert events[:-1] == good and len(events) == bad + 1  # nothing after the corrupt frame
    error = events[-1]
    assert (error.data, error.line, error.offset) == (None, bad + 1, offset)
    assert error.error is not None and f"frame {bad + 1} (byte {offset})" in error.error and "message CRC mismatch" in error.error
    assert error.error.startswith("x.bin: ")
    (stream,), _ = run(events)
    assert stream.end == "error" and stream.end_detail is not None and f"byte {offset}" in stream.end_detail
    # the server-executed call before the fault is kept, with everything it received
    (server,) = stream.calls
    assert (server.call_id, server.name, server.executor) == ("tooluse_VQNZJRUFMoqZzszVsRd4og", "nova_code_interpreter", "server")
    assert server.bytes == len('{"snippet":"1234 * 5678"}') and server.fragments == 1
    assert server.state is CallState.FAILED and server.reason is not None and server.reason.startswith("stream_error")


def test_call_committed_before_a_corrupt_frame_stays_committed() -> None:
    path = capture("converse-nova-micro-text-then-tool.jsonl")
    frames = frames_of_jsonl(path)
    stop = next(i for i, f in enumerate(frames) if b"messageStop" in f)
    corrupt = bytearray(frames[stop])
    corrupt[-1] ^= 0xFF  # the message CRC itself
    raw = b"".join(frames[:stop]) + bytes(corrupt) + b"".join(frames[stop + 1 :])
    events = read_capture(raw)
    assert events[-1].error is not None and f"(byte {sum(len(f) for f in frames[:stop])})" in events[-1].error
    pipelined = AssembleConfig(execute_before_stream_end=True, allow_pipelined_execute=("get_temperature",))
    (stream,), _ = run(events, config=pipelined)
    (call,) = stream.calls
    assert stream.end == "error"
    assert (call.call_id, call.state, call.arguments) == ("tooluse_lAG_zP8QRHmSYOwZzzaCqA", CallState.COMMITTED, {"city": "Paris"})
    # without pipelining the same call is kept but not committed: the stream never ended normally
    (stream,), _ = run(events)
    assert stream.calls[0].state is CallState.FAILED and stream.results[0].is_error


@pytest.mark.parametrize("field", [0, 4, 8])  # total length, headers length, prelude CRC
def test_corrupt_prelude_is_reported_at_its_frame(field: int) -> None:
    path = capture("converse-nova-micro-text-then-tool.jsonl")
    frames = frames_of_jsonl(path)
    corrupt = bytearray(frames[3])
    corrupt[field + 3] ^= 0x04
    raw = b"".join(frames[:3]) + bytes(corrupt) + b"".join(frames[4:])
    events = read_capture(raw)
    assert len(events) == 4 and all(e.error is None for e in events[:3])
    offset = sum(len(f) for f in frames[:3])
    assert events[3].offset == offset and events[3].error is not None
    assert f"frame 4 (byte {offset}): prelude CRC mismatch" in events[3].error


def test_corrupt_first_frame_is_still_read_as_an_event_stream() -> None:
    frame = bytearray(event_frame("messageStart", {"role": "assistant"}))
    frame[9] ^= 0x10  # prelude CRC
    (event,) = read_capture(bytes(frame), "y.bin")
    assert event.error is not None and "y.bin: event-stream frame 1 (byte 0): prelude CRC mismatch" in event.error


def test_impossible_lengths_with_a_valid_prelude_crc() -> None:
    prelude = struct.pack(">II", 12, 0)
    prelude += struct.pack(">I", zlib.crc32(prelude))
    good = event_frame("messageStart", {"role": "assistant"})
    events = read_capture(good + prelude + b"\x00" * 8)
    assert events[0].data == {"messageStart": {"role": "assistant"}}
    assert events[1].error is not None and f"(byte {len(good)}): impossible frame lengths (total 12, headers 0)" in events[1].error


@SETTINGS
@given(data=st.data())
def test_truncated_final_frame_makes_the_stream_truncated(data: st.DataObject) -> None:
    path = capture("converse-nova-micro-text-then-tool.jsonl")
    frames = frames_of_jsonl(path)
    stop = next(i for i, f in enumerate(frames) if b"messageStop" in f)
    raw = b"".join(frames[: stop + 1])
    frame_start = len(raw) - len(frames[stop])
    cut = data.draw(st.integers(frame_start + 1, len(raw) - 1), label="cut")  # inside messageStop
    events = list(iter_capture(split(raw[:cut], data.draw(st.lists(st.integers(0, cut), max_size=8)))))
    assert events[:-1] == read_capture(b"".join(frames[:stop]))
    last = events[-1]
    assert (last.data, last.error, last.framing, last.line, last.offset) == (None, None, ("truncated_frame",), stop + 1, frame_start)
    (stream,), _ = run(events)
    assert stream.end == "truncated" and stream.quirks.get("truncated_frame") == 1
    (call,) = stream.calls
    assert call.state is CallState.FAILED and call.reason is not None and call.reason.startswith("stream_truncated")
    assert [(r.tool_call_id, r.is_error) for r in stream.results] == [("tooluse_lAG_zP8QRHmSYOwZzzaCqA", True)]


def test_stream_cut_at_a_frame_boundary_is_truncated_without_a_framing_quirk() -> None:
    frames = frames_of_jsonl(capture("converse-nova-micro-text-then-tool.jsonl"))
    stop = next(i for i, f in enumerate(frames) if b"messageStop" in f)
    (stream,), _ = run(read_capture(b"".join(frames[:stop])))
    assert stream.end == "truncated" and "truncated_frame" not in stream.quirks


def test_truncated_frame_after_the_normal_end_keeps_the_verdicts() -> None:
    frames = frames_of_jsonl(capture("converse-nova-micro-text-then-tool.jsonl"))
    raw = b"".join(frames)
    (stream,), _ = run(read_capture(raw[:-7]))  # the metadata frame is cut
    assert stream.end == "complete" and stream.quirks.get("truncated_frame") == 1
    assert stream.calls[0].state is CallState.COMMITTED


# ------------------------------------------------------------------ exceptions and other frames


def _converse_open_call() -> list[dict[str, Any]]:
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"city": "Pa'}}}},
    ]


@pytest.mark.parametrize("kind", ["throttlingException", "modelStreamErrorException", "internalServerException"])
def test_exception_frame_becomes_a_stream_error(kind: str) -> None:
    raw = encode_events(_converse_open_call()) + exception_frame(kind, "Too many requests, please wait")
    events = read_capture(raw)
    assert events[-1].data == {kind: {"message": "Too many requests, please wait"}} and events[-1].event == kind
    (stream,), _ = run(events)
    assert stream.dialect == "bedrock-converse" and stream.end == "error"
    assert stream.end_detail == kind  # the free text only when revealed
    (call,) = stream.calls
    assert call.state is CallState.FAILED and call.reason is not None and call.reason.startswith("stream_error")


def test_exception_frame_in_invoke_stream() -> None:
    def chunk(payload: dict[str, Any]) -> dict[str, Any]:
        return {"chunk": {"bytes": base64.b64encode(_json(payload)).decode()}}

    events = [
        chunk({"type": "message_start", "message": {"id": "msg_1", "role": "assistant", "content": []}}),
        chunk({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
        chunk({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"a":'}}),
    ]
    raw = encode_events(events) + exception_frame("modelStreamErrorException", "model stream error")
    (stream,), _ = run(read_capture(raw))
    assert stream.dialect == "bedrock-invoke" and stream.end == "error"
    assert stream.end_detail == "modelStreamErrorException"
    assert [(c.call_id, c.state) for c in stream.calls] == [("toolu_1", CallState.FAILED)]


def test_error_message_type_is_the_providers_error_at_its_offset() -> None:
    """An ``error`` frame is the provider's error: its code shown as a provider word, its
    message free text kept for Reveal, as an exception event's."""
    head = encode_events(_converse_open_call())
    error = encode_frame({":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}, b"")
    events = read_capture(head + error, "e.bin")
    assert events[-1].error is None and events[-1].offset == len(head) and events[-1].line == 4
    assert events[-1].data == {":error": {"code": "InternalFailure", "message": "boom"}}
    (stream,), _ = run(events)
    assert stream.end == "error" and stream.calls[0].state is CallState.FAILED
    assert stream.end_detail == f"error frame 4 (byte {len(head)}): InternalFailure"
    (revealed,), _ = run(events, reveal=True)
    assert revealed.end_detail == f"error frame 4 (byte {len(head)}): InternalFailure: boom"


@pytest.mark.parametrize("invoke", [False, True])
def test_an_error_frame_alone_or_in_an_invoke_stream_ends_it_in_error(invoke: bool) -> None:
    frame = encode_frame({":message-type": "error", ":error-code": "ThrottlingException"}, b"")
    head = b""
    if invoke:
        start = {"type": "message_start", "message": {"id": "m", "content": []}}
        head = event_frame("chunk", {"bytes": base64.b64encode(json.dumps(start).encode()).decode()})
    (stream,), _ = run(read_capture(head + frame))
    assert stream.dialect == ("bedrock-invoke" if invoke else "bedrock-converse")
    assert stream.end == "error" and stream.end_detail == f"error frame {2 if invoke else 1} (byte {len(head)}): ThrottlingException"


def test_payload_that_is_not_json_is_an_error_and_reading_goes_on() -> None:
    bad = encode_frame({":message-type": "event", ":event-type": "contentBlockDelta"}, b"{not json")
    good = event_frame("messageStop", {"stopReason": "tool_use"})
    events = read_capture(bad + good)
    assert events[0].error is not None and "frame payload is not JSON" in events[0].error
    assert "contentBlockDelta" not in events[0].error  # the provider names the type: never quoted
    assert events[1].data == {"messageStop": {"stopReason": "tool_use"}} and events[1].offset == len(bad)


def test_frame_without_event_type_is_an_error() -> None:
    (event,) = read_capture(encode_frame({":message-type": "event"}, b"{}"))
    assert event.error is not None and ":event-type header missing" in event.error


# ------------------------------------------------------------------ detection and the CLI


def test_detection_from_the_prelude() -> None:
    assert is_eventstream(b"\x00")
    big = struct.pack(">II", 0x01000020, 0x10)
    big += struct.pack(">I", zlib.crc32(big))
    assert is_eventstream(big)  # a 16 MiB frame: first byte not NUL, prelude CRC checks
    assert not is_eventstream(big[:8] + b"\x00\x00\x00\x00")
    assert not is_eventstream(b'{"messageStart":{}}\n')
    assert not is_eventstream(b"data: {}\n\n")
    assert not is_eventstream(b"event: x\n")


def test_toollatch_assemble_reads_the_binary_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = capture("invoke-claude-sonnet45-tool.jsonl")
    target = tmp_path / "invoke.eventstream"
    target.write_bytes(b"".join(frames_of_jsonl(path)))
    assert main(["assemble", str(target), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    (stream,) = json.loads(out)["streams"]
    assert stream["dialect"] == "bedrock-invoke" and stream["end"] == "complete"
    assert [(c["call_id"], c["state"], c["arguments"]) for c in stream["calls"]] == [
        ("toolu_bdrk_018dfpvS9zVjdozFjuwZf5cx", "committed", {"location": "Florence,Italy"})
    ]


def test_toollatch_assemble_reports_a_corrupt_frame(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frames = frames_of_jsonl(capture("converse-nova-micro-text-then-tool.jsonl"))
    corrupt = bytearray(frames[2])
    corrupt[20] ^= 0x20
    target = tmp_path / "c.eventstream"
    target.write_bytes(b"".join(frames[:2]) + bytes(corrupt))
    assert main(["assemble", str(target), "--json"]) == 0
    (stream,) = json.loads(capsys.readouterr().out)["streams"]
    assert stream["end"] == "error"
    assert f"{target}: event-stream frame 3 (byte {len(frames[0]) + len(frames[1])}): message CRC mismatch" in stream["end_detail"]


# ------------------------------------------------------------------ large frames (the dashboard)


def _decoded(raw: bytes, defer_over: int | None) -> list[ProviderEvent]:
    from toollatch.wire.intake import PushDecoder

    decoder = PushDecoder("in.bin", defer_over=defer_over)
    return [*decoder.feed(raw), *decoder.close()]


def test_a_frame_over_the_limit_is_left_unparsed_and_read_as_the_decoder_reads_it() -> None:
    from toollatch.core.large import read_unparsed
    from toollatch.wire.capture import UNPARSED

    big = {"delta": {"toolUse": {"input": "x" * 100}}, "contentBlockIndex": 0}
    raw = b"".join([
        event_frame("messageStart", {"role": "assistant"}),
        event_frame("contentBlockDelta", big),
        encode_frame({":event-type": "contentBlockDelta", ":message-type": "event"}, b'{"delta": '),  # not JSON
        encode_frame({":event-type": "contentBlockDelta", ":message-type": "event"}, b'{"a": "\xff' + b"y" * 80 + b'"}'),  # not UTF-8
    ])
    plain, deferred = _decoded(raw, None), _decoded(raw, 50)
    assert [e.data is UNPARSED for e in deferred] == [False, True, False, False]  # UTF-8 is checked where the frame is read
    assert deferred[1].raw == plain[1].raw and deferred[1].line == 2
    assert [read_unparsed(e, "in.bin") for e in deferred] == plain
    assert plain[1].data == {"contentBlockDelta": big} and plain[2].error and "frame 3" in plain[2].error
    cut = encode_frame({":event-type": "contentBlockDelta", ":message-type": "event"}, b'{"delta": ' + b" " * 60)
    assert read_unparsed(_decoded(cut, 50)[0], "in.bin") == _decoded(cut, None)[0]


@pytest.mark.parametrize("path", PARAMS)
def test_every_bedrock_capture_as_frames_assembles_the_same_read_as_large_events(path: Path | None) -> None:
    from toollatch.core.large import CappedPipeline

    raw = b"".join(frames_of_jsonl(need(path)))
    plain = Pipeline(name="in")
    for event in _decoded(raw, None):
        plain.feed(event)
    plain.close()
    large = CappedPipeline(name="in", keep=10**9)
    for event in _decoded(raw, 0):  # every frame left unparsed, read as a large one
        large.feed(event)
    large.close()
    shown = [[(c.key, c.call_id, c.name, c.state, c.reason, c.arguments) for c in r.calls] for r in plain.results()]
    assert [[(c.key, c.call_id, c.name, c.state, c.reason, c.arguments) for c in r.calls] for r in large.results()] == shown
    assert any(shown)
