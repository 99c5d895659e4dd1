"""Whole-input checks in bounded pieces.

A C call over a 50 MiB ``bytes`` (``strip``, ``count``) holds the interpreter for tens to
hundreds of milliseconds, and the event loop with it, even from a worker thread. These
helpers do the same work a megabyte at a time, so a thread running them lets the loop in
between pieces.
"""

from __future__ import annotations

#: Bytes one piece covers.
PIECE = 1024 * 1024
_WHITESPACE = b" \t\n\r\x0b\x0c"


def is_blank(data: bytes) -> bool:
    """``not data.strip()`` (only ASCII whitespace, or empty), a piece at a time."""
    view = memoryview(data)
    return all(not bytes(view[i : i + PIECE]).strip(_WHITESPACE) for i in range(0, len(data), PIECE))


def count(data: bytes, sub: bytes, end: int | None = None) -> int:
    """``data.count(sub, 0, end)`` for a one-byte ``sub``, a piece at a time."""
    assert len(sub) == 1
    end = len(data) if end is None else min(end, len(data))
    return sum(data.count(sub, i, min(i + PIECE, end)) for i in range(0, end, PIECE))
