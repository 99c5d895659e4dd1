"""``toollatch.web.triage.bulk``: the piecewise checks give what the whole-input calls give."""

from __future__ import annotations

import pytest

from toollatch.web.triage import bulk


@pytest.mark.parametrize("data", [b"", b" \t\n\r", b" x ", b"\n" * (3 * bulk.PIECE) + b"x", b"\x0b\x0c", b"\n" * (2 * bulk.PIECE + 5)])
def test_piecewise_checks_match_the_whole_input_calls(data: bytes) -> None:
    assert bulk.is_blank(data) == (not data.strip())
    assert bulk.count(data, b"\n") == data.count(b"\n")
    for end in (0, 7, bulk.PIECE + 3, len(data) + 10):
        assert bulk.count(data, b"\n", end) == data.count(b"\n", 0, end)
