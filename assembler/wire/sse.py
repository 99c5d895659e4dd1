"""Incremental Server-Sent Events decoder over raw bytes.

Implements the parsing rules of the WHATWG HTML Living Standard, 9.2.6 "Interpreting an
event stream": one optional leading UTF-8 BOM is stripped, the stream is decoded as
UTF-8 with replacement of invalid sequences, lines end at CRLF, LF or CR, and a blank
line dispatches the event being collected. The incremental shape follows httpx's
``LineDecoder``: :meth:`SSEDecoder.decode` takes any split of the input and
:meth:`SSEDecoder.flush` ends it.

Lines are split on *bytes* (CR and LF never occur inside a UTF-8 multi-byte sequence),
then decoded, so byte offsets stay exact even where invalid input was replaced. Each
chunk is scanned once; pieces of a line that spans reads are decoded incrementally and
joined only when the line ends, so the total cost is linear in the input size. A run of
blank lines is taken in one match (only its first line can dispatch), so megabytes of
them cost a scan, not a step per line.

Recognising ``[DONE]`` or any other payload convention is not this module's job.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

__all__ = ["SSEDecoder", "SSEEvent", "iter_sse"]

_BOM = b"\xef\xbb\xbf"
_EOL_RUN = re.compile(rb"[\r\n]+")  # a line end and the blank lines right after it
_CR, _LF = 0x0D, 0x0A
_NO_FRAMING: frozenset[str] = frozenset()
_REPLACEMENT = "\ufffd".encode()  # U+FFFD as sent, as opposed to one the decoder put in
_UTF8_DECODER = codecs.getincrementaldecoder("utf-8")


@dataclass(slots=True)
class SSEEvent:
    """One dispatched event.

    ``event`` is the event type (``"message"`` when no non-empty ``event:`` field was
    given). ``data`` is the ``data:`` values joined with ``"\\n"`` (the spec's data buffer
    minus its final ``"\\n"``); ``data:`` alone gives ``""``. ``id`` is the last-event-id
    buffer at dispatch: it persists across events and is ``None`` until an ``id:`` field
    without U+0000 is seen (``id:`` alone sets it to ``""``). ``retry`` is the last valid
    (all ASCII digits) ``retry:`` value, in milliseconds, within this event, else ``None``.

    ``line`` (1-based, counted over the whole input) and ``offset`` (0-based, in raw
    input *bytes*, BOM included in the count) locate the event's first line: the first
    non-blank line after the previous blank line, **comment lines included**. A leading
    BOM is not part of any line, so ``raw[offset:]`` always starts with that line's bytes.
    """

    event: str
    data: str
    id: str | None
    retry: int | None
    line: int
    offset: int
    #: Framing deviations met since the previous dispatched event (not part of equality):
    #: ``comment_line``, ``crlf_line_ends`` (a CR or CRLF line end), ``data_before_event``,
    #: ``invalid_utf8`` (bytes that are not UTF-8 were replaced by U+FFFD, as the spec says).
    framing: frozenset[str] = field(default=frozenset(), compare=False)
    #: Comment lines met since the previous dispatched event (``comment_line`` counts lines,
    #: not events: a gateway may send several keep-alive comments between two events).
    comment_lines: int = field(default=0, compare=False)


class SSEDecoder:
    """Incremental SSE decoder (WHATWG HTML Living Standard, 9.2.6 Interpreting an event stream).

    Feed byte chunks of any size to :meth:`decode` (splits may fall mid-line, between the
    CR and LF of a CRLF, inside the BOM or inside a UTF-8 character) and call
    :meth:`flush` once at end of input. Splitting never changes the events produced.

    A line ending in CR is processed at the CR; an LF that starts the next read is then
    swallowed as the rest of that CRLF. Per the spec, an event not terminated by a blank
    line when the input ends is discarded, never dispatched, and so is an unterminated
    final line; :attr:`incomplete_tail` reports that this happened.
    """

    __slots__ = (
        "_at_start", "_bytes_read", "_comments", "_data", "_first", "_flushed", "_framing", "_head", "_incomplete",
        "_last_id", "_line_start", "_lines_read", "_parts", "_pieces", "_raw_parts", "_retry", "_skip_lf", "_type",
    )

    def __init__(self) -> None:
        #: decodes the pieces of a line that spans reads; made when one first does
        self._pieces: codecs.IncrementalDecoder | None = None
        self._head = b""  # bytes held at stream start while they could still be a BOM
        self._at_start = True
        self._skip_lf = False  # the previous read ended with CR
        self._parts: list[str] = []  # decoded pieces of the current unterminated line
        self._raw_parts: list[bytes] = []  # the same pieces undecoded (to tell invalid UTF-8)
        self._line_start = 0  # byte offset of the current line
        self._bytes_read = 0
        self._lines_read = 0
        self._flushed = False
        self._incomplete = False
        # Event buffers (spec: event type, data, last event ID) plus our per-event extras.
        self._type = ""
        self._data: list[str] = []
        self._last_id: str | None = None
        self._retry: int | None = None
        self._first: tuple[int, int] | None = None  # (line, offset) of the event's first line
        self._framing: set[str] = set()  # deviations seen since the last dispatch
        self._comments = 0  # comment lines seen since the last dispatch

    @property
    def incomplete_tail(self) -> bool:
        """After :meth:`flush`: ``True`` if the input did not end on an event boundary.

        That is, the final line had no line end, or a non-blank line (field or comment)
        came after the last blank line; such pending input was discarded. ``False``
        before :meth:`flush`, for empty input and for a cleanly terminated stream.
        """
        return self._incomplete

    @property
    def bytes_read(self) -> int:
        """Raw bytes passed to :meth:`decode` so far (BOM and line ends included)."""
        return self._bytes_read

    @property
    def lines_read(self) -> int:
        """Complete (terminated) lines processed so far; CRLF ends one line."""
        return self._lines_read

    def decode(self, chunk: bytes) -> list[SSEEvent]:
        """Consume ``chunk`` (bytes, any length, may be empty) and return the events
        whose terminating blank line it completed, in input order.

        Raises :class:`RuntimeError` after :meth:`flush`.
        """
        if self._flushed:
            raise RuntimeError("SSEDecoder.decode() called after flush()")
        base = self._bytes_read  # input offset of chunk[0]
        self._bytes_read += len(chunk)
        pos = 0
        if self._at_start:
            chunk = self._head + chunk
            base -= len(self._head)
            if len(chunk) < len(_BOM) and _BOM.startswith(chunk):
                self._head = chunk  # maybe a BOM split across reads: wait for more
                return []
            self._at_start, self._head = False, b""
            if chunk.startswith(_BOM):
                pos = self._line_start = len(_BOM)
        n = len(chunk)
        if self._skip_lf and pos < n:
            self._skip_lf = False
            if chunk[pos] == _LF:  # second half of a CRLF split across reads
                pos += 1
                self._line_start += 1
        events: list[SSEEvent] = []
        for m in _EOL_RUN.finditer(chunk, pos):
            start, end = m.span()
            if (
                end - start == 2 and self._first is None and not self._parts and not self._framing
                and chunk[start] == _LF and chunk[start + 1] == _LF and chunk.startswith(b"data: ", pos)
            ):
                # The common event: one "data: " line, valid UTF-8, its blank line right after,
                # nothing else since the last dispatch. Dispatched at once, as the steps below would.
                try:
                    text = chunk[pos + 6 : start].decode("utf-8")
                except UnicodeDecodeError:
                    pass  # replaced and reported by the steps below
                else:
                    self._lines_read += 2
                    events.append(SSEEvent("message", text, self._last_id, None, self._lines_read - 1, self._line_start, _NO_FRAMING, 0))
                    pos = end
                    self._line_start = base + pos
                    continue
            segment = chunk[pos:start]
            if self._parts:
                self._parts.append(self._pieces.decode(segment, final=True))  # type: ignore[union-attr]
                text = "".join(self._parts)
                self._parts.clear()
                if "\ufffd" in text and _REPLACEMENT not in b"".join(self._raw_parts) + segment:
                    self._framing.add("invalid_utf8")
                self._raw_parts.clear()
            else:
                text = segment.decode("utf-8", "replace")
                if "\ufffd" in text and _REPLACEMENT not in segment:
                    self._framing.add("invalid_utf8")  # replaced, as the spec says, and reported
            # The match is this line's end and the ends of any blank lines after it: the
            # first blank line dispatches, the others change nothing but the counts, so a
            # run of any length costs a few scans in C, not a step per line.
            first = 2 if chunk[start] == _CR and end - start > 1 and chunk[start + 1] == _LF else 1
            self._lines_read += 1
            if first == 2 or chunk[start] == _CR:
                self._framing.add("crlf_line_ends")
            self._process(text, self._line_start, events)
            blank = start + first
            if blank < end:
                second = 2 if chunk[blank] == _CR and end - blank > 1 and chunk[blank + 1] == _LF else 1
                self._lines_read += 1
                if second == 2 or chunk[blank] == _CR:
                    self._framing.add("crlf_line_ends")
                self._process("", base + blank, events)
                rest = blank + second
                if rest < end:
                    crs = chunk.count(b"\r", rest, end)
                    self._lines_read += chunk.count(b"\n", rest, end) + crs - (chunk.count(b"\r\n", rest, end) if crs else 0)
                    if crs:
                        self._framing.add("crlf_line_ends")
            pos = end
            self._line_start = base + pos
        if pos < n:
            if self._pieces is None:
                self._pieces = _UTF8_DECODER(errors="replace")
            self._parts.append(self._pieces.decode(chunk[pos:]))
            self._raw_parts.append(chunk[pos:])
        elif n and chunk[-1] == _CR:  # a match ended exactly here, and it was a lone CR
            self._skip_lf = True
        return events

    def flush(self) -> list[SSEEvent]:
        """End of input. Always returns ``[]``: the spec dispatches nothing at end of
        input, so a pending event or unterminated line is discarded (see
        :attr:`incomplete_tail`). A second call is a no-op.
        """
        if not self._flushed:
            self._flushed = True
            self._incomplete = bool(self._head or self._parts) or self._first is not None
            self._parts.clear()
            self._raw_parts.clear()
            if self._pieces is not None:
                self._pieces.reset()
            self._data.clear()
        return []

    def _process(self, line: str, offset: int, events: list[SSEEvent]) -> None:
        if line[:5] == "data:":  # the common line, fast
            if self._first is None:
                self._first = (self._lines_read, offset)
            self._data.append(line[6:] if line[5:6] == " " else line[5:])
            return
        if not line:  # blank line: dispatch (if there is data), then reset
            if self._data and self._first is not None:
                events.append(
                    SSEEvent(
                        event=self._type or "message",
                        data="\n".join(self._data),
                        id=self._last_id,
                        retry=self._retry,
                        line=self._first[0],
                        offset=self._first[1],
                        framing=frozenset(self._framing) if self._framing else _NO_FRAMING,
                        comment_lines=self._comments,
                    )
                )
                self._framing.clear()  # otherwise carried to the next event
                self._comments = 0
            self._type, self._retry, self._first = "", None, None
            self._data.clear()
            return
        if self._first is None:
            self._first = (self._lines_read, offset)
        if line[0] == ":":  # comment
            self._framing.add("comment_line")
            self._comments += 1
            return
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]  # exactly one space is removed
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._type = value
            if self._data:
                self._framing.add("data_before_event")
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            try:  # leading zeros are harmless; int() refuses > 4300 digits
                self._retry = int(value.lstrip("0") or "0")
            except ValueError:  # an absurd number of milliseconds: ignore the field
                pass
        # any other field name is ignored


def iter_sse(chunks: Iterable[bytes]) -> Iterator[SSEEvent]:
    """Yield the events of a byte stream given as ``chunks``: decode all, then flush.

    An unterminated final event is silently discarded; use :class:`SSEDecoder` directly
    to observe :attr:`SSEDecoder.incomplete_tail`.
    """
    decoder = SSEDecoder()
    for chunk in chunks:
        yield from decoder.decode(chunk)
    yield from decoder.flush()
