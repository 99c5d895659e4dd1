"""A JSON array of provider events read one element at a time (assembler/wire/jsonarray.py):
Gemini's default ``streamGenerateContent`` body, pretty-printed, ``,\\r\\n`` between elements."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch.wire.intake import PushDecoder
from toollatch.wire.jsonarray import ArrayReader

CHUNKS: list[dict[str, Any]] = [
    {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP", "index": 0}]},
    {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "get_time", "args": {"tz": "U\"T,C]}"}}}]}, "index": 0}]},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "é 😀 \\ ["}]}, "finishReason": "STOP", "index": 0}]},
]


def gemini_body(chunks: list[dict[str, Any]] = CHUNKS) -> bytes:
    """As Gemini sends it: pretty-printed elements, ``,\\r\\n`` between them."""
    parts = [json.dumps(c, indent=2, ensure_ascii=False).replace("\n", "\r\n") for c in chunks]
    return ("[" + "\r\n,\r\n".join(parts) + "]").encode()


def read(pieces: list[bytes]) -> list[tuple[Any, ...]]:
    decoder = PushDecoder("g.json")
    events = [e for p in pieces for e in decoder.feed(p)] + decoder.close()
    return [(e.line, e.data, e.error, e.framing) for e in events]


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=20), max_size=400))
def test_any_split_gives_every_element_as_one_event(cuts: list[int]) -> None:
    data, pieces, i = gemini_body(), [], 0
    for n in cuts:
        pieces.append(data[i : i + n])
        i += n
    pieces.append(data[i:])
    assert read(pieces) == [(n, c, None, ()) for n, c in enumerate(CHUNKS, 1)]


def test_an_element_is_an_event_as_soon_as_it_is_whole() -> None:
    data = gemini_body()
    first_end = data.index(b"\r\n,")  # the ',' comes with the next element's bytes
    decoder = PushDecoder("g.json")
    assert [e.data for e in decoder.feed(data[:first_end])] == [CHUNKS[0]]
    assert [e.data for e in decoder.feed(data[first_end:])] == CHUNKS[1:]


def test_the_element_text_is_kept_for_the_strict_recheck() -> None:
    (event,) = PushDecoder("g.json").feed(b'[{"a": 1, "a": 2}]')
    assert event.data == {"a": 2} and event.raw == '{"a": 1, "a": 2}'


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (b"[]", []),
        (b'[1, "a,]", {"x": [1, {}]}]', [(1, 1, None, ()), (2, "a,]", None, ()), (3, {"x": [1, {}]}, None, ())]),
        (b'[{"a": 1},', [(1, {"a": 1}, None, ()), (2, None, None, ("truncated_frame",))]),
        (b'[{"a": ', [(1, None, None, ("truncated_frame",))]),
        (b"[{},]", [(1, {}, None, ()), (2, None, "g.json:2 (byte 4): an empty array element (a comma too many)", ())]),
        (b"[{}] junk", [(1, {}, None, ()), (2, None, "g.json:2 (byte 4): bytes after the end of the JSON array", ())]),
        (b"[}]", [(1, None, "g.json:1 (byte 1): a '}' that closes no object", ())]),
    ],
)
def test_edges_and_faults_are_named(body: bytes, want: list[tuple[Any, ...]]) -> None:
    assert read([body]) == want


def test_an_unreadable_element_is_named_and_reading_goes_on() -> None:
    got = read([b'[{"a": nope},\r\n{"b": 1}]'])
    assert got[0][2] is not None and got[0][2].startswith("g.json:1 (byte 1): event data is not JSON")
    assert got[1] == (2, {"b": 1}, None, ())


def test_an_element_over_the_limit_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("toollatch.wire.jsonarray.MAX_ELEMENT_BYTES", 64)
    reader = ArrayReader("g.json")
    events = reader.feed(b'[{"a": "') + reader.feed(b"x" * 100) + reader.feed(b'"}]') + reader.close()
    assert [e.error for e in events] == ["g.json:1 (byte 1): an array element over 64 bytes"]
