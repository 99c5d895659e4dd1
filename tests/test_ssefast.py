"""Tests for toollatch.wire.ssefast: the fast SSE path gives the full decoder's results."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .conftest import CAPTURES, CASES, require_shared
from toollatch.wire.sse import SSEDecoder
from toollatch.wire.ssefast import FastSSEDecoder


def trace(cls: type[SSEDecoder], chunks: Sequence[bytes]) -> list[Any]:
    """Everything a decoder tells, read by read: each event with all its fields (framing
    notes and comment counts too, which event equality leaves out), the counters after
    every read, and the tail verdict after flush."""
    decoder = cls()
    out: list[Any] = []
    for chunk in chunks:
        for e in decoder.decode(chunk):
            out.append((e.event, e.data, e.id, e.retry, e.line, e.offset, e.framing, e.comment_lines))
        out.append(("read", decoder.bytes_read, decoder.lines_read))
    out.extend(decoder.flush())
    out.append(("tail", decoder.incomplete_tail))
    return out


def trace_rows(chunks: Sequence[bytes]) -> list[Any]:
    """:func:`trace` of :meth:`FastSSEDecoder.decode_rows`, every event without its ``id``
    (a row has none): a row stands for an event without framing notes or comments."""
    decoder = FastSSEDecoder()
    out: list[Any] = []
    for chunk in chunks:
        for e in decoder.decode_rows(chunk):
            if type(e) is tuple:
                kind, data, line, offset = e
                out.append((kind, data, None, line, offset, frozenset(), 0))
            else:
                out.append((e.event, e.data, e.retry, e.line, e.offset, e.framing, e.comment_lines))
        out.append(("read", decoder.bytes_read, decoder.lines_read))
    out.extend(decoder.flush())
    out.append(("tail", decoder.incomplete_tail))
    return out


def without_ids(entries: list[Any]) -> list[Any]:
    return [e[:2] + e[3:] if len(e) == 8 else e for e in entries]


def split_at(raw: bytes, cuts: Sequence[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(raw)]
    return [raw[a:b] for a, b in zip(bounds, bounds[1:])]


def assert_same(raw: bytes, cuts: Sequence[int]) -> None:
    chunks = split_at(raw, cuts)
    full = trace(SSEDecoder, chunks)
    assert trace(FastSSEDecoder, chunks) == full
    assert trace_rows(chunks) == without_ids(full)


def shared_files() -> list[Path]:
    files = [p for folder in (CAPTURES, CASES) if folder.is_dir() for p in sorted(folder.rglob("*"))]
    return [p for p in files if p.is_file() and not p.name.endswith(".json")]


@pytest.mark.parametrize("path", shared_files() or [None], ids=lambda p: p.name if p else "no-shared-data")
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_shared_capture_and_case_rechunked(path: Path | None, data: st.DataObject) -> None:
    if path is None:
        require_shared(CAPTURES)  # skips, saying TOOLLATCH_SHARED is needed
        pytest.fail("shared files listed as absent but present")
    raw = path.read_bytes()
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=12), label="cuts")
    assert_same(raw, cuts)


def test_shared_files_in_their_16_kib_reads_and_bytewise() -> None:
    require_shared(CAPTURES)
    for path in shared_files():
        raw = path.read_bytes()
        assert_same(raw, range(16384, len(raw), 16384))
        assert_same(raw, range(1, len(raw)))


TOKENS = [
    b"data:", b"data: ", b"data", b"event:", b"event: ", b"event", b"id:", b"id: 7", b"retry: 10",
    b"retry: x", b":", b": ping", b"\n", b"\n", b"\n\n", b"\r", b"\r\n", b"x", b"{}", b" ",
    b"\xef\xbb\xbf", b"\xef", b"\xff", b"\xc3\xa9", b"\xc3", b"\x00", b"message_start",
]
plain_event = st.builds(
    lambda kind, data: (b"event: " + kind + b"\n" if kind is not None else b"") + b"data: " + data + b"\n\n",
    st.one_of(st.none(), st.sampled_from([b"ping", b"", b" x", b"\xc3\xa9", b"\xff"])),
    st.sampled_from([b"{}", b"", b" [DONE]", b"\xc3\xa9", b"\xe2\x82", b"a:b"]),
)


@settings(max_examples=1500, deadline=None)
@given(
    pieces=st.lists(st.one_of(st.sampled_from(TOKENS), plain_event), max_size=30),
    cuts=st.lists(st.integers(0, 400), max_size=6),
)
def test_generated_edge_inputs(pieces: list[bytes], cuts: list[int]) -> None:
    raw = b"".join(pieces)
    assert_same(raw, [c for c in cuts if c <= len(raw)])


@pytest.mark.parametrize(
    "raw",
    [
        b"\xef\xbb\xbfdata: a\n\n",  # BOM
        b"data: a\r\n\r\ndata: b\n\n",  # CRLF
        b"data: a\n\ndata: b\r\rdata: c\n\n",  # CR in a later event
        b"data: a\ndata: b\n\n",  # multi-line data
        b"id: 1\ndata: a\n\ndata: b\n\n",  # id persists into a plain event
        b"retry: 5\ndata: a\n\n: keep-alive\n\ndata: b\n\n",  # comment before a blank line carried over
        b"data: a\nevent: late\n\n",  # data before event
        b"data\n\nevent\ndata: b\n\n",  # fields without colon
        b"data: \xff\n\n",  # not UTF-8
        b"event: \xff\ndata: a\n\n",
        b"\n\n\ndata: a\n\n\n\n\ndata: b\n\n\n",  # blank-line runs of every parity
        b"event: x\n\n",  # an event type and no data
        b"data: a\n\ndata: cut",  # input ends inside an event
        b"data: a\n\ndata: \xff\n\ndata: b\n\n",  # a run of one-line events, one not UTF-8
        b"data: a\n\ndata: b\n\ndata:c\n\n",  # the last without the space
        b"data: a\n\ndata: b\ndata: c\n\n",  # two data lines in the last event
        b"data: a\n\ndata: b\n\n\n",  # a blank line more at the end
        b"data: \n\ndata:  x\n\ndata: data: \n\n",  # empty data, two spaces, data naming data
    ],
)
def test_unusual_shapes_every_split(raw: bytes) -> None:
    for cut in range(len(raw) + 1):
        assert_same(raw, [cut])
    assert_same(raw, range(1, len(raw)))


def test_plain_events_never_reach_the_full_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bytes] = []
    full = SSEDecoder.decode

    def counted(self: SSEDecoder, chunk: bytes) -> list[Any]:
        calls.append(chunk)
        return full(self, chunk)

    monkeypatch.setattr(SSEDecoder, "decode", counted)
    decoder = FastSSEDecoder()
    events = decoder.decode(b"event: a\ndata: {\"x\": 1}\n\ndata: [DONE]\n\n\n")
    assert [(e.event, e.data, e.line, e.offset) for e in events] == [("a", '{"x": 1}', 1, 0), ("message", "[DONE]", 4, 25)]
    assert calls == []
    assert (decoder.bytes_read, decoder.lines_read) == (40, 6)
    decoder.decode(b"data: a\r\n\r\n")  # a CR line end: the full decoder reads it
    assert calls == [b"data: a\r\n\r\n"]


def test_rows_are_plain_tuples_and_other_events_full_ones() -> None:
    decoder = FastSSEDecoder()
    rows = decoder.decode_rows(b"event: a\ndata: {}\n\n: ping\ndata: b\n\n")
    assert rows[0] == ("a", "{}", 1, 0)
    assert type(rows[1]) is not tuple and (rows[1].data, rows[1].comment_lines) == ("b", 1)


def test_decode_after_flush_raises_as_the_full_decoder_does() -> None:
    decoder = FastSSEDecoder()
    decoder.flush()
    with pytest.raises(RuntimeError, match="after flush"):
        decoder.decode(b"data: a\n\n")


def stamped(events: int) -> bytes:
    """Writes each prefixed with an ``id:`` stamp line, as a gateway (or the proxy benchmark's mock) may send."""
    body = b""
    for i in range(events):
        kind = b"event: content_block_delta\n" if i % 2 else b""
        body += b"id: t=%d\n" % (1000 + i) + kind + b'data: {"i": %d}\n\n' % i
    return body


def test_events_with_an_id_line_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = stamped(50)
    assert_same(raw, [])
    assert_same(raw, range(7, len(raw), 97))
    calls: list[int] = []
    real = SSEDecoder.decode

    def counted(self: SSEDecoder, chunk: bytes) -> Any:
        calls.append(len(chunk))
        return real(self, chunk)

    monkeypatch.setattr(SSEDecoder, "decode", counted)
    events = FastSSEDecoder().decode(raw)
    assert calls == [] and [e.id for e in events] == [f"t={1000 + i}" for i in range(50)]
    assert [e.event for e in events[:2]] == ["message", "content_block_delta"]


@pytest.mark.parametrize(
    "raw",
    [
        b"id: a\ndata: 1\n\ndata: 2\n\n",  # the id persists to the next event
        b"id:\ndata: 1\n\n",  # id: alone sets it to ""
        b"id: a\x00b\ndata: 1\n\ndata: 2\n\n",  # U+0000: the field is ignored
        b"event: e\nid: a\ndata: 1\n\n",  # id after event: the full decoder
        b"id: a\nid: b\ndata: 1\n\n",  # two id lines: the full decoder
        b"id: a\n\ndata: 1\n\n",  # an id line alone is no event, yet sets the id
        b"id:a\ndata:1\n\nid: b\ndata\n\n",  # no space after the colon; a field without colon
        b"id: \xff\ndata: 1\n\n",  # not UTF-8
    ],
)
def test_id_lines_read_as_the_full_decoder_reads_them(raw: bytes) -> None:
    for cuts in ([], range(1, len(raw)), [len(raw) // 2]):
        assert_same(raw, cuts)
