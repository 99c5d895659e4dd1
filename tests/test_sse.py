"""Tests for toollatch.wire.sse (WHATWG HTML 9.2.6 "Interpreting an event stream")."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch.wire.sse import SSEDecoder, SSEEvent, iter_sse

BOM = b"\xef\xbb\xbf"


def run(chunks: Sequence[bytes]) -> tuple[list[SSEEvent], SSEDecoder]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.decode(chunk))
    events.extend(decoder.flush())
    return events, decoder


def events_of(*chunks: bytes) -> list[SSEEvent]:
    return run(chunks)[0]


def datas(*chunks: bytes) -> list[str]:
    return [e.data for e in events_of(*chunks)]


def split_at(raw: bytes, cuts: Sequence[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(raw)]
    return [raw[a:b] for a, b in zip(bounds, bounds[1:])]


def bytewise(raw: bytes) -> list[bytes]:
    return [raw[i : i + 1] for i in range(len(raw))]


# ----------------------------------------------------------------------------- line ends


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"], ids=["LF", "CR", "CRLF"])
def test_each_line_end_style(eol: bytes) -> None:
    raw = eol.join([b"event: e", b"data: a", b"data: b", b"", b"data: c", b"", b""])
    events, decoder = run([raw])
    assert [(e.event, e.data) for e in events] == [("e", "a\nb"), ("message", "c")]
    assert decoder.lines_read == 6
    assert decoder.bytes_read == len(raw)
    assert decoder.incomplete_tail is False


def test_mixed_line_ends_in_one_stream() -> None:
    assert datas(b"data: a\rdata: b\ndata: c\r\n\r\ndata: d\n\r") == ["a\nb\nc", "d"]


def test_cr_then_lf_in_next_read_is_one_line_end() -> None:
    # If the LF were a line of its own it would be a blank line and dispatch "a" alone.
    events, decoder = run([b"data: a\r", b"\ndata: b\r\n\r\n"])
    assert [e.data for e in events] == ["a\nb"]
    assert decoder.lines_read == 3


def test_line_is_emitted_at_cr_and_following_lf_swallowed() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"data: a\r") == []
    assert decoder.decode(b"\n") == []  # rest of the CRLF, not a blank line
    assert [e.data for e in decoder.decode(b"\r")] == ["a"]  # dispatched at the CR already
    assert decoder.decode(b"\n") == []  # and this LF is swallowed, no extra blank line
    assert decoder.flush() == []
    assert decoder.lines_read == 2
    assert decoder.incomplete_tail is False


def test_cr_carry_survives_empty_reads() -> None:
    events, decoder = run([b"data: a\r", b"", b"", b"\n\n"])
    assert [e.data for e in events] == ["a"]
    assert decoder.lines_read == 2  # "\n" swallowed, then one blank line


def test_cr_then_cr_across_reads_is_a_blank_line() -> None:
    assert datas(b"data: a\r", b"\rdata: b\r", b"\r") == ["a", "b"]


def test_lf_not_after_cr_is_a_line_end() -> None:
    assert datas(b"data: a\n", b"\n", b"data: b\n\n") == ["a", "b"]


def test_only_cr_lf_are_line_ends_not_other_unicode_breaks() -> None:
    odd = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
    raw = f"data: a{odd}b\n\n".encode()
    assert datas(raw) == [f"a{odd}b"]
    assert datas(*bytewise(raw)) == [f"a{odd}b"]


# ----------------------------------------------------------------------------- fields


def test_multiline_data_joined_with_lf() -> None:
    assert datas(b"data: one\ndata: two\ndata:\ndata: four\n\n") == ["one\ntwo\n\nfour"]


def test_blank_data_dispatches_empty_string() -> None:
    assert datas(b"data:\n\n") == [""]
    assert datas(b"data\n\n") == [""]  # field with no colon: empty value
    assert datas(b"data:\ndata:\n\n") == ["\n"]


def test_blank_line_without_data_does_not_dispatch_and_resets_type() -> None:
    assert events_of(b"\n\n\n") == []
    events = events_of(b"event: x\nid: 1\n\ndata: y\n\n")
    assert [(e.event, e.data, e.id) for e in events] == [("message", "y", "1")]


def test_comments_are_ignored() -> None:
    raw = b": hello\ndata: a\n:data: b\n: data: c\ndata: d\n\n:\n\n"
    events, decoder = run([raw])
    assert [e.data for e in events] == ["a\nd"]
    assert decoder.incomplete_tail is False


def test_event_field_sets_type_per_event() -> None:
    events = events_of(b"event: add\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\nevent\ndata: 4\n\n")
    assert [(e.event, e.data) for e in events] == [
        ("add", "1"),
        ("message", "2"),
        ("message", "3"),
        ("message", "4"),
    ]


def test_last_event_id_persists_and_nul_is_ignored() -> None:
    raw = b"data: a\n\nid: 7\ndata: b\n\ndata: c\n\nid: 8\x00x\ndata: d\n\nid:\ndata: e\n\n"
    assert [(e.data, e.id) for e in events_of(raw)] == [
        ("a", None),
        ("b", "7"),
        ("c", "7"),
        ("d", "7"),  # id containing U+0000 is ignored
        ("e", ""),  # `id:` alone sets the buffer to the empty string
    ]


def test_id_set_in_non_dispatched_block_still_counts() -> None:
    assert [e.id for e in events_of(b"id: 5\n\ndata: x\n\n")] == ["5"]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"retry: 3000", 3000),
        (b"retry:0", 0),
        (b"retry: 0010", 10),
        (b"retry", None),
        (b"retry:", None),
        (b"retry:  12", None),  # only one space is removed, " 12" is not all digits
        (b"retry: 12 ", None),
        (b"retry: -1", None),
        (b"retry: 1.5", None),
        (b"retry: 12a", None),
        (b"retry: +5", None),
        ("retry: ١٢".encode(), None),  # Arabic-Indic digits: isdigit() but not ASCII
        ("retry: ²".encode(), None),
        (b"retry: " + b"0" * 5000 + b"7", 7),
        (b"retry: " + b"9" * 5000, None),  # too large for int(): ignored, no crash
    ],
)
def test_retry_field(line: bytes, expected: int | None) -> None:
    (event,) = events_of(line + b"\ndata: x\n\n")
    assert event.retry == expected


def test_retry_is_per_event_and_last_valid_wins() -> None:
    raw = b"retry: 5\nretry: x\ndata: a\n\ndata: b\n\nretry: 1\nretry: 2\ndata: c\n\n"
    assert [e.retry for e in events_of(raw)] == [5, None, 2]


@pytest.mark.parametrize(
    ("line", "value"),
    [
        (b"data:x", "x"),
        (b"data: x", "x"),
        (b"data:  x", " x"),
        (b"data:x ", "x "),
        (b"data: a:b: c", "a:b: c"),
        (b"data:\t x", "\t x"),
        (b"data: ", ""),
    ],
)
def test_exactly_one_space_after_colon_is_removed(line: bytes, value: str) -> None:
    assert datas(line + b"\n\n") == [value]


def test_unknown_and_miscased_fields_are_ignored() -> None:
    raw = b"Data: no\ndata : no\n data: no\nfoo: bar\ndata: yes\n\n"
    assert datas(raw) == ["yes"]


def test_done_sentinel_is_plain_data() -> None:
    (event,) = events_of(b'data: {"a": 1}\n\n', b"data: [DONE]\n\n")[1:]
    assert (event.event, event.data) == ("message", "[DONE]")


# ----------------------------------------------------------------------------- BOM and UTF-8


def test_leading_bom_is_stripped() -> None:
    events, decoder = run([BOM + b"data: x\n\n"])
    assert [(e.data, e.offset) for e in events] == [("x", 3)]
    assert decoder.bytes_read == len(BOM) + 9


@pytest.mark.parametrize("cut", range(1, 4))
def test_bom_split_across_reads_is_stripped(cut: int) -> None:
    raw = BOM + b"data: x\n\n"
    assert [(e.data, e.offset) for e in events_of(raw[:cut], raw[cut:])] == [("x", 3)]


def test_bom_split_byte_by_byte_with_empty_reads() -> None:
    assert datas(b"", b"\xef", b"", b"\xbb", b"\xbf", b"data: x\n\n") == ["x"]


def test_only_one_leading_bom_is_stripped() -> None:
    # The second BOM becomes part of the field name "\ufeffdata": unknown, ignored.
    assert events_of(BOM + BOM + b"data: x\n\ndata: y\n\n")[0].data == "y"


def test_bom_elsewhere_is_kept() -> None:
    assert datas(b"data: \xef\xbb\xbfx\n\n") == ["\ufeffx"]
    assert datas(b"data: a\n\xef\xbb\xbfdata: b\n\n") == ["a"]  # not a field named data


def test_partial_bom_prefix_is_ordinary_invalid_input() -> None:
    events = events_of(b"\xef", b"\xbbdata: x\n\ndata: y\n\n")
    assert [(e.data, e.line, e.offset) for e in events] == [("y", 3, 11)]


@pytest.mark.parametrize("text", ["é", "😀", "aé😀€b", "\u2028"])
def test_multibyte_utf8_split_at_every_byte(text: str) -> None:
    raw = f"event: {text}\ndata: {text}\n\n".encode()
    whole = events_of(raw)
    assert [(e.event, e.data) for e in whole] == [(text, text)]
    for cut in range(len(raw) + 1):
        assert events_of(raw[:cut], raw[cut:]) == whole, cut
    assert events_of(*bytewise(raw)) == whole


def test_invalid_utf8_is_replaced() -> None:
    assert datas(b"data: \xff\xc3\n\n") == ["\ufffd\ufffd"]
    # A truncated sequence ended by a line end is replaced, even across reads.
    assert datas(b"data: \xe2\x82", b"\n\n") == ["\ufffd"]
    assert datas(b"data: \xc3", b"\xa9\n\n") == ["é"]
    assert datas(b"data: \xf0\x9f", b"\r", b"\n\r\n") == ["\ufffd"]


# ----------------------------------------------------------------------------- end of input


@pytest.mark.parametrize(
    "raw",
    [
        b"data: x\n",
        b"data: x",
        b"data: x\n\ndata: y",
        b"data: x\n\ndata: y\n",
        b"data: x\n\nevent: e\n",
        b"data: x\n\n: keep-alive\n",  # comment after the last blank line: not a boundary
        b"data: x\n\nd",
        b"\xef",
        b"\xef\xbb",
        BOM + b"data",
    ],
)
def test_unterminated_tail_is_discarded(raw: bytes) -> None:
    for chunks in ([raw], bytewise(raw)):
        events, decoder = run(chunks)
        assert [e.data for e in events] == (["x"] if raw.startswith(b"data: x\n\n") else [])
        assert decoder.incomplete_tail is True


@pytest.mark.parametrize(
    "raw",
    [b"", BOM, b"data: x\n\n", b"data: x\r\n\r", b"data: x\r\r", b": c\n\n", b"\n\n\n"],
)
def test_cleanly_terminated_stream_is_not_incomplete(raw: bytes) -> None:
    events, decoder = run([raw])
    assert decoder.incomplete_tail is False
    assert [e.data for e in events] == (["x"] if b"x" in raw else [])


def test_incomplete_tail_is_false_before_flush() -> None:
    decoder = SSEDecoder()
    decoder.decode(b"data: x")
    assert decoder.incomplete_tail is False
    assert decoder.flush() == []
    assert decoder.incomplete_tail is True


def test_flush_is_final() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"data: x\n") == []
    assert decoder.flush() == []
    assert decoder.flush() == []
    with pytest.raises(RuntimeError):
        decoder.decode(b"\n")


def test_iter_sse() -> None:
    chunks = (c for c in [b"data: a\r", b"\n\r\ndata:", b" b\n\ndata: c\n"])
    assert [e.data for e in iter_sse(chunks)] == ["a", "b"]


# ----------------------------------------------------------------------------- positions


def test_line_and_offset_with_bom_crlf_and_multibyte() -> None:
    raw = (
        BOM
        + b": h\xc3\xa9llo\r\ndata: a\r\n\r\n"
        + b"event: e\r\ndata: b\r\n\r\n\r\n"
        + b": x\r\nid: 1\r\ndata: c\r\n\r\n"
    )
    events, decoder = run([raw])
    assert [(e.data, e.line, e.offset) for e in events] == [
        ("a", 1, 3),  # the event starts at its comment line, after the 3-byte BOM
        ("b", 4, 24),  # 3 + len(": héllo\r\n") 10 + 9 + 2
        ("c", 8, 47),  # 24 + 10 + 9 + 2 + 2
    ]
    assert raw[24:].startswith(b"event: e\r\n")
    assert raw[47:].startswith(b": x\r\n")
    assert decoder.lines_read == 11
    assert decoder.bytes_read == len(raw)
    for cut in range(len(raw) + 1):
        assert events_of(raw[:cut], raw[cut:]) == events, cut
    assert events_of(*bytewise(raw)) == events


def test_offset_counts_swallowed_lf_of_split_crlf() -> None:
    (a, b) = events_of(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n")
    assert (a.line, a.offset, b.line, b.offset) == (1, 0, 3, 11)


# ----------------------------------------------------------------------------- properties

_CHARS = st.one_of(
    st.sampled_from(list("\x00\x0b\x0c\x1c\x85\u2028\ufeffé😀: d")),
    st.characters(codec="utf-8", exclude_characters="\r\n"),
)
_TEXT = st.text(alphabet=_CHARS, max_size=8)
_EOLS = (b"\n", b"\r", b"\r\n")


@st.composite
def sse_streams(draw: st.DrawFn) -> tuple[bytes, list[SSEEvent], list[int]]:
    """Serialise random events with random line ends.

    Returns the bytes, the events they must decode to, and for each event the byte
    index of the line end that dispatches it (where a 1-byte-at-a-time feed yields it).
    """
    out = bytearray(BOM if draw(st.booleans()) else b"")
    expected: list[SSEEvent] = []
    dispatch_at: list[int] = []
    prev_eol = b""
    line_no = 0
    last_id: str | None = None

    def emit(line: bytes) -> tuple[int, int]:
        nonlocal prev_eol, line_no
        # After a lone CR, an LF would merge into a CRLF: an empty line must not end in LF.
        choices = _EOLS[1:] if (prev_eol == b"\r" and not line) else _EOLS
        eol = draw(st.sampled_from(choices))
        start = len(out)
        out.extend(line + eol)
        prev_eol, line_no = eol, line_no + 1
        return line_no, start

    def field(name: str, value: str) -> bytes:
        if value == "" and draw(st.booleans()):
            return name.encode()
        sep = ": " if value.startswith(" ") or draw(st.booleans()) else ":"
        return f"{name}{sep}{value}".encode()

    for _ in range(draw(st.integers(0, 4))):
        for _ in range(draw(st.integers(0, 2))):
            emit(b"")  # extra blank lines do nothing
        lines: list[bytes] = []
        if draw(st.booleans()):
            lines.append(b":" + draw(_TEXT).encode())
        etype = draw(st.none() | _TEXT)
        if etype is not None:
            lines.append(field("event", etype))
        eid = draw(st.none() | _TEXT)
        if eid is not None:
            lines.append(field("id", eid))
            if "\x00" not in eid:
                last_id = eid
        retry = draw(st.none() | st.integers(0, 10**9))
        if retry is not None:
            lines.append(field("retry", str(retry)))
        data = draw(st.lists(_TEXT, min_size=1, max_size=3))
        # Other fields in any order; data lines keep their relative order among them.
        order = list(draw(st.permutations(lines)))
        slots = draw(st.lists(st.integers(0, len(order)), min_size=len(data), max_size=len(data)))
        for k, (slot, d) in enumerate(zip(sorted(slots), data)):
            order.insert(slot + k, field("data", d))
        first = [emit(line) for line in order][0]
        dispatch_at.append(len(out))
        emit(b"")
        expected.append(SSEEvent(etype or "message", "\n".join(data), last_id, retry, *first))
    return bytes(out), expected, dispatch_at


@settings(max_examples=300, deadline=None)
@given(stream=sse_streams(), cuts=st.lists(st.integers(0, 4096), max_size=12))
def test_property_split_invariance(
    stream: tuple[bytes, list[SSEEvent], list[int]], cuts: list[int]
) -> None:
    raw, expected, dispatch_at = stream
    whole, decoder = run([raw])
    assert whole == expected
    assert decoder.incomplete_tail is False
    assert decoder.bytes_read == len(raw)
    assert run(split_at(raw, [c % (len(raw) + 1) for c in cuts]))[0] == whole

    decoder = SSEDecoder()
    seen: list[tuple[int, SSEEvent]] = []
    for i, chunk in enumerate(bytewise(raw)):
        seen.extend((i, e) for e in decoder.decode(chunk))
    assert decoder.flush() == []
    assert [e for _, e in seen] == whole
    assert [i for i, _ in seen] == dispatch_at  # dispatched at the blank line's first byte


def reference(raw: bytes) -> tuple[list[SSEEvent], bool, int]:
    """A deliberately naive, non-incremental reading of the spec: decode the whole
    stream, drop one BOM, split on CRLF|CR|LF; byte offsets from splitting raw bytes."""
    start = 3 if raw.startswith(BOM) else 0
    text = raw[start:].decode("utf-8", "replace")
    text_lines = re.split("\r\n|\r|\n", text)
    byte_starts = [start] + [m.end() for m in re.compile(b"\r\n|\r|\n").finditer(raw, start)]
    assert len(text_lines) == len(byte_starts)
    tail, complete = text_lines[-1], text_lines[:-1]
    events: list[SSEEvent] = []
    etype, data, last_id, retry, first = "", None, None, None, None
    for n, line in enumerate(complete):
        if line == "":
            if data is not None:
                events.append(SSEEvent(etype or "message", data[:-1], last_id, retry, *first))
            etype, data, retry, first = "", None, None, None
            continue
        if first is None:
            first = (n + 1, byte_starts[n])
        if line.startswith(":"):
            continue
        name, value = (line.split(":", 1) + [""])[:2]
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data = (data or "") + value + "\n"
        elif name == "event":
            etype = value
        elif name == "id" and "\x00" not in value:
            last_id = value
        elif name == "retry" and re.fullmatch("[0-9]+", value):
            retry = int(value)
    return events, bool(tail) or first is not None, len(complete)


_SOUP = st.lists(
    st.sampled_from(
        [b"\r", b"\n", b"\r\n", b"data", b":", b" ", b"event", b"id", b"retry", b"7", b"x"]
        + [b"\x00", b"\x0b", b"\xff", BOM, b"\xef", b"\xbb", b"\xc3", b"\xa9", b"\xe2\x80\xa8"]
        + [b"\xf0\x9f\x98\x80"]
    ),
    max_size=40,
).map(b"".join)


@settings(max_examples=500, deadline=None)
@given(raw=_SOUP, cuts=st.lists(st.integers(0, 256), max_size=10))
def test_property_matches_naive_reference(raw: bytes, cuts: list[int]) -> None:
    expected, tail, lines = reference(raw)
    for chunks in ([raw], split_at(raw, [c % (len(raw) + 1) for c in cuts]), bytewise(raw)):
        events, decoder = run(chunks)
        assert events == expected
        assert decoder.incomplete_tail is tail
        assert decoder.lines_read == lines
        assert decoder.bytes_read == len(raw)


def test_invalid_utf8_is_replaced_and_reported_but_a_sent_replacement_character_is_not() -> None:
    decoder = SSEDecoder()
    (bad,) = decoder.decode(b'data: {"a":"\xff\xfe"}\n\n')
    assert bad.data == '{"a":"\ufffd\ufffd"}' and "invalid_utf8" in bad.framing
    (sent,) = SSEDecoder().decode('data: {"a":"\ufffd"}\n\n'.encode())
    assert "invalid_utf8" not in sent.framing
    split = SSEDecoder()
    events = split.decode(b'data: {"a":"\xff') + split.decode(b'"}\n\n')
    assert "invalid_utf8" in events[0].framing


def test_comment_lines_are_counted_per_line_not_per_event() -> None:
    events = list(iter_sse([b": a\n: b\n: c\n\ndata: x\n\n: d\ndata: y\n\ndata: z\n\n"]))
    assert [(e.data, e.comment_lines) for e in events] == [("x", 3), ("y", 1), ("z", 0)]
    assert ["comment_line" in e.framing for e in events] == [True, True, False]
