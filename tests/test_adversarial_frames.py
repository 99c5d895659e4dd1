"""Provider words and event-stream headers that could quote a failed call's text: never shown.

An AWS event stream's headers (``:error-code``, ``:error-message``, the type a frame claims,
a header's name) and a documented word a failed call holds in another case or behind JSON
``\\u`` escapes reached a stream's end as they were; an error of any shape kept its keys in
the reproducer. Each route is fed a canary (:data:`~.test_adversarial_leaks.WORD`) and every
output is grepped for it.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from toollatch.cli import main

from .test_adversarial_leaks import WORD, _chunk, sse, upload_leaks
from .test_eventstream import encode_events, encode_frame, encode_header


# ------------------------------------------------------------------ Bedrock event-stream faults


def _bedrock_open_call() -> bytes:
    """An event stream whose call holds :data:`WORD` in its argument text (never valid JSON)."""
    return encode_events([
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "lookup"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"q": "' + WORD}}}},
    ])


#: A frame whose headers the provider fills with :data:`WORD`: each once ended the stream
#: with a detail quoting it (a framing fault's text, never guarded as a provider word).
FRAME_ROUTES: dict[str, bytes] = {
    "error-code": encode_frame({":message-type": "error", ":error-code": WORD, ":error-message": "m"}, b""),
    "error-message": encode_frame({":message-type": "error", ":error-code": "ThrottlingException", ":error-message": WORD}, b""),
    "event-type-not-utf8": encode_frame({":message-type": "event", ":event-type": WORD}, b"\xff\xfe"),
    "event-type-not-json": encode_frame({":message-type": "event", ":event-type": WORD}, b"{not json"),
    "exception-type-not-json": encode_frame({":message-type": "exception", ":exception-type": WORD}, b"{not json"),
    "unknown-message-type": encode_frame({":message-type": WORD}, b"{}"),
}


@pytest.mark.parametrize("route", sorted(FRAME_ROUTES))
def test_an_event_stream_frames_header_values_are_never_shown_by_the_command_line(route: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "in.bin").write_bytes(_bedrock_open_call() + FRAME_ROUTES[route])
    main(["assemble", "--json", str(tmp_path / "in.bin")])
    out = capsys.readouterr()
    assert WORD not in out.out + out.err and '"end": "error"' in out.out
    main(["assemble", str(tmp_path / "in.bin")])
    out = capsys.readouterr()
    assert WORD not in out.out + out.err
    main(["assemble", "--json", "--reveal", str(tmp_path / "in.bin")])
    if route.startswith("error-"):  # the provider's own error: Reveal shows its words and text
        assert WORD in capsys.readouterr().out


@pytest.mark.parametrize("route", ["error-code", "error-message", "event-type-not-json"])
def test_an_event_stream_frames_header_values_are_never_shown_in_any_output(route: str, tmp_path: Path) -> None:
    assert upload_leaks(tmp_path, route, _bedrock_open_call() + FRAME_ROUTES[route], "x.bin") == []


def test_a_header_name_is_never_quoted_in_a_fault(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """botocore's text for a header given twice quotes its name, which the provider picks."""
    headers = encode_header(WORD, "a") * 2 + encode_header(":message-type", "event") + encode_header(":event-type", "metadata")
    prelude = struct.pack(">II", 12 + len(headers) + 2 + 4, len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + b"{}"
    (tmp_path / "in.bin").write_bytes(_bedrock_open_call() + message + struct.pack(">I", zlib.crc32(message)))
    main(["assemble", "--json", str(tmp_path / "in.bin")])
    out = capsys.readouterr()
    assert WORD not in out.out + out.err and "unreadable headers (DuplicateHeader)" in out.out


#: A documented word a failed call holds with a character written as a JSON ``\u`` escape
#: (its reader sees the word): ``(dialect, stream)``.
ESCAPED_WORD_ROUTES: dict[str, tuple[str, bytes]] = {
    "openai-chat-error-type": ("openai-chat", sse([
        _chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": ""}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "serv\\u0065r_error'}}]}),
        {"error": {"type": "server_error", "message": "m"}},
    ])),
    "bedrock-error-frame": ("bedrock-converse", encode_events([
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "lookup"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"q": "\\u0049nternalFailure'}}}},
    ]) + encode_frame({":message-type": "error", ":error-code": "InternalFailure"}, b"")),
}


@pytest.mark.parametrize("route", sorted(ESCAPED_WORD_ROUTES))
def test_a_documented_word_a_failed_call_holds_escaped_is_hidden(route: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dialect, raw = ESCAPED_WORD_ROUTES[route]
    word = "server_error" if dialect == "openai-chat" else "InternalFailure"
    (tmp_path / "in.bin").write_bytes(raw)
    main(["assemble", "--json", "--dialect", dialect, str(tmp_path / "in.bin")])
    doc = json.loads(capsys.readouterr().out)
    (stream,) = doc["streams"]
    assert stream["end"] == "error" and word not in stream["end_detail"] and f"(hidden value, {len(word)} characters)" in stream["end_detail"]


_BEDROCK_LINES = [
    {"messageStart": {"role": "assistant"}},
    {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "lookup"}}}},
    {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"q": "' + WORD}}}},
]
_CHAT_LINES = [
    _chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": ""}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "' + WORD}}]}),
]


@pytest.mark.parametrize("error", [
    {":error": WORD}, {":error": [WORD]}, {":error": {"code": WORD, "message": {"m": WORD}}}, {":error": {WORD: "x", "code": "InternalFailure"}},
    {"throttlingException": {WORD: "x"}}, {"throttlingException": {"message": {"code": {WORD: 1}}}},
    {"error": {WORD: "x", "type": "server_error"}}, {"error": {"code": {WORD: 1}, "type": "server_error"}},
])
def test_an_error_of_any_shape_is_masked_in_the_reproducer(error: dict[str, Any]) -> None:
    """Its keys as well as its values: a provider names them, and they can quote the arguments."""
    from toollatch.redaction.export import redact_capture

    lines = _CHAT_LINES if "error" in error else _BEDROCK_LINES
    raw = "".join(json.dumps(doc) + "\n" for doc in [*lines, error]).encode()
    assert WORD not in redact_capture(raw).decode("utf-8", "replace")


def test_a_call_holding_a_documented_word_in_another_case_or_a_malformed_escape_hides_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Words match without case (as the vocabulary does); text with an escape that cannot be
    read is taken to hold every word (hidden: the safe side); an escaped backslash is no escape."""
    for text, shown in (('{"q": "internalfailure', False), ('{"q": "\\u12G4', False), ('{"q": "\\\\u0049nternalFailure"}', True)):
        raw = encode_events([*_BEDROCK_LINES[:2], {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": text}}}}])
        (tmp_path / "in.bin").write_bytes(raw + encode_frame({":message-type": "error", ":error-code": "InternalFailure"}, b""))
        main(["assemble", "--json", str(tmp_path / "in.bin")])
        (stream,) = json.loads(capsys.readouterr().out)["streams"]
        assert stream["end_detail"].endswith("InternalFailure" if shown else "(hidden value, 15 characters)"), (text, stream["end_detail"])


@pytest.mark.parametrize(("held", "word"), [
    ("max_to\u212aens", "max_to\u212aens"), ("max_to\\u212aens", "max_to\u212aens"), ("max_to\u212aens", "max_tokens"),
])
def test_a_word_that_folds_to_a_documented_one_is_no_documented_word(held: str, word: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``str.lower`` folds the Kelvin sign to ``k``: ``max_to\u212aens`` is not ``max_tokens``,
    but a call holding it holds ``max_tokens`` for its reader."""
    raw = sse([*_CHAT_LINES[:1], _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "' + held}}]}), _chunk({}, word)])
    (tmp_path / "in.sse").write_bytes(raw)
    main(["assemble", "--json", str(tmp_path / "in.sse")])
    (stream,) = json.loads(capsys.readouterr().out)["streams"]
    assert word not in stream["end_detail"] and "hidden" in stream["end_detail"], stream["end_detail"]


def test_an_end_with_more_text_than_is_searched_hides_every_documented_word(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Past SEARCHED_BYTES (argument bytes times words) or SEARCHED_CALLS every call is taken
    to hold every word."""
    import toollatch.core.stream_end as stream_end

    raw = encode_events([*_BEDROCK_LINES[:2], {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"q": "' + "a" * 200}}}}])
    (tmp_path / "in.bin").write_bytes(raw + encode_frame({":message-type": "error", ":error-code": "InternalFailure"}, b""))
    for budget, calls, shown in ((10_000, 1024, True), (100, 1024, False), (10_000, 0, False)):
        monkeypatch.setattr(stream_end, "SEARCHED_BYTES", budget)
        monkeypatch.setattr(stream_end, "SEARCHED_CALLS", calls)
        main(["assemble", "--json", str(tmp_path / "in.bin")])
        (stream,) = json.loads(capsys.readouterr().out)["streams"]
        assert stream["end_detail"].endswith("InternalFailure" if shown else "(hidden value, 15 characters)"), stream["end_detail"]


@pytest.mark.parametrize("cut", ["caf\\u00", "caf\\u", "\\ud83d\\u", "C:\\\\\\", "https:\\/\\/x", "a\\nb\\\"c"])
def test_a_word_no_call_holds_is_shown_whatever_escape_the_text_ends_or_is_cut_in(cut: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A truncated call is often cut inside an escape; JSON's ``\\/`` is no Python escape:
    neither hides (nor warns about) a stop reason no call holds."""
    raw = sse([*_CHAT_LINES[:1], _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "' + cut}}]}), _chunk({}, "length")])
    (tmp_path / "in.sse").write_bytes(raw)
    main(["assemble", "--json", str(tmp_path / "in.sse")])
    (stream,) = json.loads(capsys.readouterr().out)["streams"]
    assert stream["end"] == "truncated" and stream["end_detail"] == "finish_reason length", stream["end_detail"]


@pytest.mark.parametrize("code", [{"detail": WORD}, [WORD]])
def test_a_responses_error_events_code_of_any_shape_is_masked_in_the_reproducer(code: Any) -> None:
    from toollatch.redaction.export import redact_capture

    from .test_adversarial_leaks import _ADDED, _CREATED, _named_sse, _r_delta

    raw = _named_sse([_CREATED, _ADDED, _r_delta('{"q": "' + WORD), {"type": "error", "code": code, "message": "m"}])
    assert WORD not in redact_capture(raw).decode("utf-8", "replace")


def test_a_call_whose_text_has_a_raw_0x01_byte_holds_every_word(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """0x01 marks ``\\u`` escapes while they are read: a raw one (never in valid JSON) could
    make ``\\n\x01udeadline_exceeded`` read as an escape and hide the word from the search."""
    raw = sse([*_CHAT_LINES[:1], _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "\\n\x01udeadline_exceeded'}}]}),
               {"error": {"type": "deadline_exceeded", "message": "m"}}])
    (tmp_path / "in.sse").write_bytes(raw)
    main(["assemble", "--json", str(tmp_path / "in.sse")])
    (stream,) = json.loads(capsys.readouterr().out)["streams"]
    assert stream["end"] == "error" and stream["end_detail"] == "(hidden value, 17 characters)", stream["end_detail"]



#: A documented word held with a character a reader takes for an ASCII letter in another
#: case (its capital is ASCII, or its lowercase is), raw or as a ``\u`` escape, and the end
#: that shows the word: ``(held, finish_reason or None, error type or None)``.
FOLDED_WORDS = [
    ("max_token\u017f", "max_tokens", None),  # long s: capital S
    ("max_token\\u017f", "max_tokens", None),
    ("\u0131nvalid_request_error", None, "invalid_request_error"),  # dotless i: capital I
    ("\\u0131nvalid_request_error", None, "invalid_request_error"),
    ("content_\ufb01lter", "content_filter", None),  # the fi ligature: capitals FI
    ("content_\\ufb01lter", "content_filter", None),
    ("\u017ferver_error", None, "server_error"),
    ("max_to\u212aens", "max_tokens", None),  # the Kelvin sign: lowercase k
    ("invalid_\u200brequest_error", None, "invalid_request_error"),  # a zero-width space: not seen
    ("invalid_\\u200brequest_error", None, "invalid_request_error"),
    ("max_\u00adtokens\ufe0f", "max_tokens", None),  # a soft hyphen, a variation selector
    ("\u0130NVALID_REQUEST_ERROR", None, "invalid_request_error"),  # the dotted capital I: i and a dot above
    ("i\\u0307nvalid_request_error", None, "invalid_request_error"),
    ("invalid_\\udb40\\udc20request_error", None, "invalid_request_error"),  # a tag character, as an escaped pair
    ("max_\U000e0020tokens", "max_tokens", None),
    ("i\u034f\u0307nvalid_request_error", None, "invalid_request_error"),  # a dot above on an i, an invisible joiner between
    ("\\u0130\\u200d\\u0307nvalid_request_error", None, "invalid_request_error"),
]


@pytest.mark.parametrize(("held", "reason", "error"), FOLDED_WORDS)
def test_a_word_held_with_a_character_read_as_an_ascii_letter_is_hidden(held: str, reason: str | None, error: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``str.lower`` alone leaves the long s, the dotless i, the sharp s and the ligatures
    as they are, though their capitals are ASCII letters, and a character no reader sees
    (a zero-width space) splits no word: a call holding ``max_tokenſ`` or
    ``max_\u200btokens`` holds ``max_tokens`` for its reader."""
    end: dict[str, Any] = _chunk({}, reason) if reason else {"error": {"type": error, "message": "m"}}
    raw = sse([*_CHAT_LINES[:1], _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "' + held}}]}), end])
    (tmp_path / "in.sse").write_bytes(raw)
    main(["assemble", "--json", str(tmp_path / "in.sse")])
    (stream,) = json.loads(capsys.readouterr().out)["streams"]
    word = reason or error
    assert word not in stream["end_detail"] and f"(hidden value, {len(word)} characters)" in stream["end_detail"], stream["end_detail"]


def test_a_letter_with_a_stroke_or_a_mark_is_no_ascii_letter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Control: the d with stroke (U+0111), the e with acute, a dot above a c and a lone high
    surrogate (escaped) stay what they are, so a word no call holds is still shown."""
    for held in ("rate_limit_exceede\u0111", "rate_limit_exc\u00e9eded", "rate_limit_exc\\u0307eeded", "rate_limit_\\ud834exceeded"):
        raw = sse([*_CHAT_LINES[:1], _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "' + held}}]}),
                   {"error": {"type": "rate_limit_exceeded", "message": "m"}}])
        (tmp_path / "in.sse").write_bytes(raw)
        main(["assemble", "--json", str(tmp_path / "in.sse")])
        (stream,) = json.loads(capsys.readouterr().out)["streams"]
        assert stream["end_detail"].endswith("rate_limit_exceeded"), (held, stream["end_detail"])


def test_a_bedrock_word_held_with_a_character_read_as_an_ascii_letter_is_hidden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for held, code in (("\u0131nternalfailure", "InternalFailure"), ("\\u0131nternalFailure", "InternalFailure"), ("internal\u017ferviceunavailable", "ServiceUnavailable")):
        raw = encode_events([*_BEDROCK_LINES[:2], {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"q": "' + held}}}}])
        (tmp_path / "in.bin").write_bytes(raw + encode_frame({":message-type": "error", ":error-code": code}, b""))
        main(["assemble", "--json", str(tmp_path / "in.bin")])
        (stream,) = json.loads(capsys.readouterr().out)["streams"]
        assert stream["end_detail"].endswith(f"(hidden value, {len(code)} characters)"), (held, stream["end_detail"])
    for held in ("acce\u00dfdeniedexception", "ACCESSDENIEDEXCEPTION"):
        raw = "".join(json.dumps(doc) + "\n" for doc in [*_BEDROCK_LINES[:2], {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"q": "' + held}}}}, {"accessDeniedException": {"message": "m"}}])
        (tmp_path / "in.jsonl").write_text(raw)
        main(["assemble", "--json", "--dialect", "bedrock-converse", str(tmp_path / "in.jsonl")])
        (stream,) = json.loads(capsys.readouterr().out)["streams"]
        assert "accessDeniedException" not in stream["end_detail"], (held, stream["end_detail"])


def _anthropic_error_event(extra: dict[str, Any]) -> bytes:
    docs = [
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m"}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"q": "' + WORD}}),
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "m"}, **extra}),
    ]
    return "".join(f"event: {kind}\ndata: {json.dumps(doc)}\n\n" for kind, doc in docs).encode()


@pytest.mark.parametrize("extra", [{WORD: 1}, {"request_id": WORD}, {"other": WORD}, {"other": {WORD: [WORD]}}])
@pytest.mark.parametrize("dialect", ["openai-responses", "anthropic"])
def test_an_error_events_undocumented_keys_are_masked_in_the_reproducer(dialect: str, extra: dict[str, Any]) -> None:
    """An error event is an error object itself: its keys as well as its values (a key beside
    the code once reached ``export.sse`` as it was); the replay ends the same way."""
    from toollatch import Pipeline, read_capture
    from toollatch.redaction.export import redact_capture

    from .test_adversarial_leaks import _ADDED, _CREATED, _named_sse, _r_delta

    if dialect == "anthropic":
        raw = _anthropic_error_event(extra)
    else:
        raw = _named_sse([_CREATED, _ADDED, _r_delta('{"q": "' + WORD), {"type": "error", "code": "server_error", "message": "m", "sequence_number": 3, **extra}])
    reproducer = redact_capture(raw)
    assert WORD not in reproducer.decode("utf-8", "replace")
    assert _verdicts(reproducer, dialect) == _verdicts(raw, dialect)


def _verdicts(data: bytes, dialect: str) -> list[tuple[Any, ...]]:
    """Each stream's end and detail, and each call's state, reason, bytes and fragments."""
    from toollatch import Pipeline, read_capture

    pipeline = Pipeline(dialect)
    for event in read_capture(data):
        pipeline.feed(event)
    pipeline.close()
    return [(r.end, r.end_detail, [(c.state, c.reason, c.bytes, c.fragments) for c in r.calls]) for r in pipeline.results()]


def _named(docs: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    return "".join((f"event: {kind}\n" if kind else "") + f"data: {json.dumps(doc)}\n\n" for kind, doc in docs).encode()


#: An error event its dialect names by the SSE event name alone, or holding a key whose
#: value is null: ``(dialect, stream)``, :data:`WORD` a failed call's text and a key or value.
ERROR_EVENTS_BY_NAME: dict[str, tuple[str, bytes]] = {
    "anthropic-event-name": ("anthropic", _anthropic_error_event({})[: _anthropic_error_event({}).rindex(b"event: error")] + _named([
        ("error", {"error": {"type": "overloaded_error", "message": "m"}, "request_id": WORD, "other": WORD, WORD: 1})])),
    "anthropic-null-key": ("anthropic", _anthropic_error_event({WORD: None})),
    "responses-event-name": ("openai-responses", b""),
    "responses-type-not-a-string": ("openai-responses", b""),
    "cohere-type-not-a-string": ("cohere", b""),
    "responses-null-key": ("openai-responses", b""),
    "cohere-event-name": ("cohere", _named([
        ("tool-call-start", {"type": "tool-call-start", "index": 0, "delta": {"message": {"tool_calls": {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": ""}}}}}),
        ("tool-call-delta", {"type": "tool-call-delta", "index": 0, "delta": {"message": {"tool_calls": {"function": {"arguments": '{"q": "' + WORD}}}}}),
        ("error", {"message": "m", "other": WORD, "code": WORD, WORD: None})])),
}


@pytest.mark.parametrize("route", sorted(ERROR_EVENTS_BY_NAME))
def test_an_error_event_named_by_its_sse_event_or_with_a_null_key_is_masked_in_the_reproducer(route: str) -> None:
    from toollatch.redaction.export import redact_capture

    from .test_adversarial_leaks import _ADDED, _CREATED, _r_delta

    dialect, raw = ERROR_EVENTS_BY_NAME[route]
    if dialect == "openai-responses":
        error = {
            "responses-event-name": {"code": "server_error", "message": "m", "other": WORD},
            "responses-type-not-a-string": {"type": [WORD], "code": "server_error", "message": "m"},
            "responses-null-key": {"type": "error", "code": "server_error", "message": "m", WORD: None},
        }[route]
        raw = _named([(d["type"], d) for d in (_CREATED, _ADDED, _r_delta('{"q": "' + WORD))] + [("error", error)])
    if route == "cohere-type-not-a-string":  # an error by its string message, the type read no further
        raw = ERROR_EVENTS_BY_NAME["cohere-event-name"][1].rsplit(b"event: error", 1)[0] + _named([(None, {"type": {WORD: WORD}, "message": "m"})])
    reproducer = redact_capture(raw)
    assert WORD not in reproducer.decode("utf-8", "replace")
    assert _verdicts(reproducer, dialect) == _verdicts(raw, dialect)


#: Events of dialects without error events that carry ``"type": "error"`` beside what they
#: are: masked as what their adapter reads, never as an error event.
NOT_ERROR_EVENTS: dict[str, tuple[str, bytes]] = {
    "openai-chat": ("openai-chat", sse([
        _chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": ""}}]}),
        {**_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "v'}}]}), "type": "error"},
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]}, "tool_calls"),
    ])),
    "gemini": ("gemini", sse([
        {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "lookup", "args": {"q": "v"}}}]}, "index": 0}], "type": "error"},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0}]},
    ])),
    "bedrock-invoke": ("bedrock-invoke", "".join(json.dumps(doc) + "\n" for doc in [
        {"chunk": {"bytes": base64.b64encode(json.dumps(inner).encode()).decode()}, **({"type": "error"} if "delta" in inner else {})} for inner in [
            {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m"}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"q": "v'}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
            {"type": "message_stop"},
        ]
    ]).encode()),
    "bedrock-converse": ("bedrock-converse", "".join(json.dumps(doc) + "\n" for doc in [
        *_BEDROCK_LINES[:2], {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"q": "v"}'}}}, "type": "error"},
        {"contentBlockStop": {"contentBlockIndex": 0}}, {"messageStop": {"stopReason": "tool_use"}},
    ]).encode()),
}


@pytest.mark.parametrize("route", sorted(NOT_ERROR_EVENTS))
def test_a_type_error_field_in_another_dialects_event_keeps_its_replay(route: str) -> None:
    from toollatch.redaction.export import redact_capture

    dialect, raw = NOT_ERROR_EVENTS[route]
    assert _verdicts(redact_capture(raw), dialect) == _verdicts(raw, dialect)


@pytest.mark.parametrize("kind", [[WORD], {WORD: WORD}, [{"a": [WORD]}]])
@pytest.mark.parametrize("dialect", ["openai-responses", "anthropic", "cohere"])
def test_an_events_type_that_is_not_a_string_is_masked_in_the_reproducer(dialect: str, kind: Any) -> None:
    """No adapter reads such a type (they read the SSE event name instead): it is masked,
    keys too, in an event of any kind; the replay ends the same way."""
    from toollatch.redaction.export import redact_capture

    from .test_adversarial_leaks import _ADDED, _CREATED, _r_delta

    if dialect == "anthropic":
        raw = _anthropic_error_event({})
        raw = raw[: raw.rindex(b"event: error")] + _named([("message_delta", {"type": kind, "delta": {"stop_reason": "end_turn"}}), ("error", {"type": kind, "error": {"type": "overloaded_error", "message": "m"}})])
    elif dialect == "cohere":
        raw = ERROR_EVENTS_BY_NAME["cohere-event-name"][1].rsplit(b"event: error", 1)[0]
        raw += _named([("tool-call-delta", {"type": kind, "index": 0, "delta": {"message": {"tool_calls": {"function": {"arguments": "x"}}}}}), ("error", {"type": kind, "message": "m"})])
    else:
        delta = {**_r_delta(" x"), "type": kind}
        raw = _named([(d["type"], d) for d in (_CREATED, _ADDED, _r_delta('{"q": "' + WORD))] + [("response.function_call_arguments.delta", delta), ("error", {"type": kind, "code": "server_error", "message": "m"})])
    reproducer = redact_capture(raw)
    assert WORD not in reproducer.decode("utf-8", "replace")
    assert _verdicts(reproducer, dialect) == _verdicts(raw, dialect)


def test_a_word_split_by_an_invisible_character_whose_halves_two_fragments_carry_is_hidden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A tag character (U+E0020) cut between its surrogate halves by two fragments: the buffer
    holds both halves raw, which a reader sees as the one character no reader sees."""
    for first, second, shown in (
        ("invalid_\udb40", "\udc20request_error", False),
        ("invalid_\udb40", "\udc20x", True),
        ("\\\udb40", "\udc20\\u0069nvalid_request_error", False),  # a backslash before it escapes no backslash after it
    ):
        raw = sse([*_CHAT_LINES[:1], _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "' + first}}]}),
                   _chunk({"tool_calls": [{"index": 0, "function": {"arguments": second}}]}), {"error": {"type": "invalid_request_error", "message": "m"}}])
        (tmp_path / "in.sse").write_bytes(raw)
        main(["assemble", "--json", str(tmp_path / "in.sse")])
        (stream,) = json.loads(capsys.readouterr().out)["streams"]
        assert stream["end_detail"].endswith("invalid_request_error" if shown else "(hidden value, 21 characters)"), (first, second, stream["end_detail"])
