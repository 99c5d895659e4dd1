"""Recordings the mock serves (``toollatch mock --recording FILE``): a file → timed pieces.

A HAR with the ``_chunks`` timing extension (:mod:`toollatch.wire.har`, a dashboard
recording's ``.har`` download) gives each chunk with its recorded second; a HAR entry
without it, or a plain capture, gives one provider event a piece, untimed (served at the
mock's ``delay``).
"""

from __future__ import annotations

from pathlib import Path

from toollatch.wire.capture import CaptureError, iter_capture
from toollatch.dialects import detect
from toollatch.wire.har import is_har, read_har
from toollatch.demo.mockwire import split_events


def read_recording(path: Path) -> list[tuple[str, str | None, list[tuple[float, bytes]], bool]]:
    """``(name, dialect, timed pieces, timed)`` per stream of a recording file: each
    streaming entry of a HAR (its ``_chunks`` times when present), or the file as one plain
    capture (one provider event a piece, untimed). Raises :class:`CaptureError` or ``OSError``."""
    data = path.read_bytes()
    if is_har(data[:4096]):
        out = []
        for entry in read_har(data, path.name):
            pieces = list(entry.times.split(entry.body)) if entry.times is not None else [(0.0, p) for p in split_events(entry.body)]
            out.append((entry.name, _dialect_of(entry.body, entry.name), pieces, entry.times is not None))
        if not out:
            raise CaptureError(f"{path.name}: the HAR export has no streaming entry")
        return out
    return [(path.name, _dialect_of(data, path.name), [(0.0, p) for p in split_events(data)], False)]


def _dialect_of(body: bytes, name: str) -> str | None:
    for n, event in enumerate(iter_capture([body], name)):
        found = detect(event)
        if found is not None or n > 64:
            return found
    return None
