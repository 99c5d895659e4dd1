"""Content codings undone for a live session: every coding an upstream or client may use,
in pieces, with a limit, and a clear error naming the coding otherwise."""

from __future__ import annotations

import gzip
import zlib

import pytest

from toollatch.web.live.content_coding import CodingError, decode_body, decoder

CONTENT = b'data: {"choices": []}\n\n' * 200


def test_no_coding_or_identity_needs_no_decoder() -> None:
    assert decoder(None) is None and decoder("") is None and decoder("identity") is None and decoder(" Identity ") is None
    assert decode_body(b"abc", None) == b"abc"


@pytest.mark.parametrize("size", [1, 3, 50, 10_000])
def test_a_body_fed_in_pieces_decodes_to_its_content(size: int) -> None:
    body = zlib.compress(gzip.compress(CONTENT))  # gzip applied first, then deflate
    found = decoder("gzip, deflate")
    assert found is not None
    out = b"".join(found.decode(body[i : i + size]) for i in range(0, len(body), size)) + found.flush()
    assert out == CONTENT


def test_a_small_body_that_decodes_to_a_huge_one_stops_at_the_limit() -> None:
    bomb = gzip.compress(b"\0" * 5_000_000)
    with pytest.raises(CodingError, match=r"gzip: the content is over 100000 bytes"):
        decode_body(bomb, "gzip", limit=100_000)
    found = decoder("gzip", limit=100_000)
    assert found is not None
    with pytest.raises(CodingError, match="over"):
        for i in range(0, len(bomb), 64):
            found.decode(bomb[i : i + 64])


def test_faults_name_the_coding_and_never_the_body() -> None:
    with pytest.raises(CodingError, match="Content-Encoding: compress is not a coding known here"):
        decoder("compress")
    with pytest.raises(CodingError, match="gzip: the body is not in this coding") as caught:
        decode_body(b"SECRETSECRET not gzip", "gzip")
    assert "SECRET" not in str(caught.value)
    with pytest.raises(CodingError, match="ended inside"):
        decode_body(gzip.compress(CONTENT)[:-30], "gzip")
    cut = decoder("gzip")
    assert cut is not None and cut.decode(gzip.compress(CONTENT)[:-30]) and cut.flush(complete=False) == b""  # a dropped body: no fault of its coding


def test_a_coding_not_known_here_is_named() -> None:
    with pytest.raises(CodingError, match="Content-Encoding: br is not a coding known here"):
        decoder("br")
