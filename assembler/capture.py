"""Recorded captures → provider events.

Two framings are read, detected from the first non-blank byte:

* raw SSE as ``curl -N`` prints it (``event:``/``data:`` lines, blank-line separated);
* JSON Lines: one provider event (a JSON object) per line, as SDK fixtures store them.

Each provider event keeps where it came from (line number and byte offset), so a fault
can be reported as ``file:line (byte N)``. A line that cannot be read becomes a
:class:`ProviderEvent` with ``error`` set; everything before it is kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .sse import SSEDecoder

DONE = "[DONE]"
_READ_SIZE = 64 * 1024


class CaptureError(ValueError):
    """A capture cannot be read at all; the message names the file and where."""


@dataclass(frozen=True, slots=True)
class ProviderEvent:
    """One provider event from a capture.

    ``event`` is the SSE event type (None for JSON Lines or a type-less SSE event);
    ``data`` the parsed JSON payload, or the string ``"[DONE]"``; ``line`` (1-based) and
    ``offset`` (bytes, 0-based) locate it in the input. ``error`` is set, and ``data``
    None, when the payload could not be parsed.
    """

    event: str | None
    data: Any
    line: int
    offset: int
    error: str | None = None
    #: Framing deviations met with this event: SSE ``comment_line``, ``crlf_line_ends``,
    #: ``data_before_event``, and ``done_variant`` (``[DONE]`` with extra whitespace).
    framing: tuple[str, ...] = ()


def _where(name: str, line: int, offset: int) -> str:
    return f"{name}:{line} (byte {offset})"


def _parse_payload(
    text: str, event: str | None, name: str, line: int, offset: int, framing: tuple[str, ...] = ()
) -> ProviderEvent:
    if text.strip() == DONE:
        variant = ("done_variant",) if text != DONE else ()
        return ProviderEvent(event, DONE, line, offset, framing=framing + variant)
    try:
        return ProviderEvent(event, json.loads(text), line, offset, framing=framing)
    except (json.JSONDecodeError, RecursionError) as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nesting too deep"
        where = _where(name, line, offset)
        return ProviderEvent(event, None, line, offset, f"{where}: event data is not JSON ({msg})", framing)


def _iter_sse(head: bytes, rest: Iterator[bytes], name: str) -> Iterator[ProviderEvent]:
    decoder = SSEDecoder()
    for chunk in _chain(head, rest):
        for ev in decoder.decode(chunk):
            kind = None if ev.event == "message" else ev.event
            yield _parse_payload(ev.data, kind, name, ev.line, ev.offset, tuple(sorted(ev.framing)))
    decoder.flush()  # the spec dispatches nothing at end of input


def _iter_jsonl(head: bytes, rest: Iterator[bytes], name: str) -> Iterator[ProviderEvent]:
    line_no, offset = 0, 0
    pending: list[bytes] = []
    for chunk in _chain(head, rest):
        start = 0
        while (nl := chunk.find(b"\n", start)) != -1:
            pending.append(chunk[start : nl + 1])
            raw = b"".join(pending)
            pending.clear()
            line_no += 1
            if raw.strip():
                yield _jsonl_line(raw, name, line_no, offset)
            offset += len(raw)
            start = nl + 1
        if start < len(chunk):
            pending.append(chunk[start:])
    raw = b"".join(pending)
    if raw.strip():
        yield _jsonl_line(raw, name, line_no + 1, offset)


def _jsonl_line(raw: bytes, name: str, line: int, offset: int) -> ProviderEvent:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = _where(name, line, offset + exc.start)
        return ProviderEvent(None, None, line, offset, f"{where}: not UTF-8")
    if line == 1:
        text = text.removeprefix("\ufeff")
    return _parse_payload(text, None, name, line, offset)


def _chain(head: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if head:
        yield head
    yield from rest


def iter_capture(chunks: Iterable[bytes], name: str = "<input>") -> Iterator[ProviderEvent]:
    """Provider events of a capture given as byte chunks (any split), in bounded memory.

    The framing is detected from the first non-blank byte: ``{`` means JSON Lines,
    anything else SSE.
    """
    it = iter(chunks)
    head = b""
    for chunk in it:
        head += chunk
        stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        if stripped:
            break
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped.startswith(b"{"):
        yield from _iter_jsonl(head, it, name)
    else:
        yield from _iter_sse(head, it, name)


def read_capture(data: bytes, name: str = "<input>") -> list[ProviderEvent]:
    """All provider events of an in-memory capture (see :func:`iter_capture`)."""
    return list(iter_capture([data], name))


def iter_file(path: Path) -> Iterator[ProviderEvent]:
    """Provider events of a capture file, read in 64 KiB pieces.

    Raises :class:`CaptureError` when the file cannot be opened.
    """
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise CaptureError(f"{path}: cannot open: {exc.strerror}") from None
    with handle:
        yield from iter_capture(iter(lambda: handle.read(_READ_SIZE), b""), str(path))
