"""SSE decoding at ``bytes.find`` speed for the common stream shape, the full decoder for the rest.

:class:`FastSSEDecoder` is a :class:`~toollatch.wire.sse.SSEDecoder` that reads the events
nearly every provider sends - LF line ends, an optional ``id:`` line, an optional ``event:``
line, then exactly one ``data:`` line and a blank line, valid UTF-8 - with a few C-level scans per event instead
of a regular-expression match and a field dispatch per line. Everything else is handed to
the inherited WHATWG decoder at the event boundary where it begins: a CR anywhere in the
read (CR or CRLF line ends), a BOM or a read at the very start that could begin one, a
comment, ``retry:`` or any other field, ``id:`` after ``event:`` or holding U+0000, a
field without colon, several ``data:`` lines, ``data:`` before ``event:``, bytes that are not UTF-8, a read that ends inside an
event (the rest of that event and the boundary after it are read by the full decoder too),
except a read that ends with one whole ``data:`` line (an input cut before its last blank
line): that line is read here, its event left pending as the full decoder leaves it.

The results are those of :class:`~toollatch.wire.sse.SSEDecoder` for every input and every
split of it: the same events (framing notes and comment counts included), positions,
:attr:`~toollatch.wire.sse.SSEDecoder.lines_read`, ``bytes_read`` and ``incomplete_tail``.
The fast path only runs where the full decoder holds nothing between two events, and keeps
its counters, so either can take over at any event boundary.
"""

from __future__ import annotations

import re
from typing import TypeAlias

from toollatch.wire.sse import SSEDecoder, SSEEvent

__all__ = ["FastSSEDecoder", "PlainRow"]

#: A plain event as :meth:`FastSSEDecoder.decode_rows` gives it: ``(event, data, line,
#: offset)``, the :class:`~toollatch.wire.sse.SSEEvent` fields of the same names.
PlainRow: TypeAlias = tuple[str, str, int, int]

_LF = 0x0A
_SPACE = 0x20
_BOM_FIRST = 0xEF
#: The first byte that is not a line feed: a run of blank lines is skipped in one search
#: (megabytes of them before one event cost no Python step per line).
_NOT_LF = re.compile(rb"[^\n]")


class FastSSEDecoder(SSEDecoder):
    """Drop-in :class:`~toollatch.wire.sse.SSEDecoder` with a fast path for plain events.

    Same interface, results and errors (:class:`RuntimeError` from :meth:`decode` after
    :meth:`flush`); see the module docstring for which input takes the fast path.
    """

    __slots__ = ()

    def decode(self, chunk: bytes) -> list[SSEEvent]:
        """Consume ``chunk`` (bytes, any length) and return the events it completed."""
        return self._decode(chunk, False)  # type: ignore[return-value]

    def decode_rows(self, chunk: bytes) -> list[SSEEvent | PlainRow]:
        """As :meth:`decode`, except that each event the fast path reads (a plain one: no
        framing notes, no comment lines, no ``retry``) comes as a :data:`PlainRow` ``(event,
        data, line, offset)`` tuple: the fields of its :class:`~toollatch.wire.sse.SSEEvent`
        but ``id`` (the last-event-id, which a reader of provider events does not use).
        Events the full decoder reads come as the :class:`~toollatch.wire.sse.SSEEvent`
        :meth:`decode` gives. Saves building an object per event for readers that take
        the fields once."""
        return self._decode(chunk, True)

    def _decode(self, chunk: bytes, rows: bool) -> list[SSEEvent | PlainRow]:
        if self._flushed or not chunk or b"\r" in chunk:
            return super().decode(chunk)  # type: ignore[return-value]
        if self._at_start:
            if self._head or chunk[0] == _BOM_FIRST:  # a BOM, or a read that could begin one
                return super().decode(chunk)  # type: ignore[return-value]
            self._at_start = False
        events: list[SSEEvent | PlainRow] = []
        pos, size = 0, len(chunk)
        cut = chunk.rfind(b"\n\n")
        end = cut + 2 if cut >= 0 else 0  # every line before `end` is complete
        while pos < size:
            # the full decoder idle, at an event boundary with nothing carried (_idle, inline)
            if not self._parts and self._first is None and not self._skip_lf and not self._framing and not self._comments:
                pos = self._plain(chunk, pos, end, events, rows)
                if pos == size:
                    break
            # an event begun in an earlier read, or one that is not plain: the full decoder
            # reads up to the blank line that ends it, then the fast path goes on if it can
            blank = chunk.find(b"\n\n", pos)
            if blank < 0:
                if not self._last_data_line(chunk, pos):
                    events += super().decode(chunk[pos:])
                break
            events += super().decode(chunk[pos : blank + 2])
            pos = blank + 2
        return events

    def _idle(self) -> bool:
        """True at an event boundary with nothing carried to the next event."""
        return not self._parts and self._first is None and not self._skip_lf and not self._framing and not self._comments

    def _last_data_line(self, chunk: bytes, pos: int) -> bool:
        """Read ``chunk[pos:]`` when it is one whole ``data:`` line and nothing else (a read, or
        an input, that ends before the blank line after it), the full decoder idle: its event is
        left pending as the full decoder leaves it. False, nothing read, for anything else."""
        if not self._idle() or chunk.find(b"\n", pos) != len(chunk) - 1 or not chunk.startswith(b"data:", pos):
            return False
        try:
            line = chunk[pos:-1].decode()
        except UnicodeDecodeError:  # the full decoder replaces it and says so
            return False
        self._bytes_read += len(chunk) - pos
        self._lines_read += 1
        self._first = (self._lines_read, self._line_start)
        self._data.append(line[6:] if line[5:6] == " " else line[5:])
        self._line_start = self._bytes_read
        return True

    def _plain(self, chunk: bytes, pos: int, end: int, events: list[SSEEvent | PlainRow], rows: bool) -> int:
        """Append the plain events from ``pos`` (an event boundary, the full decoder idle)
        to ``events`` (as :data:`PlainRow` tuples when ``rows``); stop before the first event
        that is not plain, or at ``end`` (after the last blank line of ``chunk``). Returns
        where it stopped, the counters set as the full decoder would have them there."""
        base = self._bytes_read - pos  # input offset of chunk[0]
        line = self._lines_read  # lines complete before `pos`
        last_id = self._last_id
        find = chunk.find
        startswith = chunk.startswith
        not_lf = _NOT_LF.search
        append = events.append
        try:
            while pos < end:
                if startswith(b"data: ", pos):  # the most common event: one data line, no type
                    nl = find(b"\n", pos)
                    if chunk[nl + 1] != _LF:
                        break  # more lines: the full decoder reads it
                    data = chunk[pos + 6 : nl].decode()
                    append(("message", data, line + 1, base + pos) if rows else SSEEvent("message", data, last_id, None, line + 1, base + pos))
                    line += 2
                    pos = nl + 2
                    continue
                if chunk[pos] == _LF:  # a run of blank lines
                    found = not_lf(chunk, pos, end)
                    after = found.start() if found is not None else end
                    line += after - pos
                    pos = after
                    continue
                at = pos
                kind = "message"
                event_id = last_id
                nl = find(b"\n", at)
                if startswith(b"id:", at):  # the last event id (a stamp some streams carry)
                    event_id = chunk[at + 4 if chunk[at + 3] == _SPACE else at + 3 : nl].decode()
                    if "\x00" in event_id:
                        break  # ignored by the spec: the full decoder reads it
                    at = nl + 1
                    nl = find(b"\n", at)
                if startswith(b"event:", at):
                    kind = chunk[at + 7 if chunk[at + 6] == _SPACE else at + 6 : nl].decode() or "message"
                    at = nl + 1
                    nl = find(b"\n", at)
                if not startswith(b"data:", at) or chunk[nl + 1] != _LF:
                    break  # not plain: the full decoder reads it
                data = chunk[at + 6 if chunk[at + 5] == _SPACE else at + 5 : nl].decode()
                if rows:
                    append((kind, data, line + 1, base + pos))
                else:
                    append(SSEEvent(kind, data, event_id, None, line + 1, base + pos))  # no framing notes
                line += chunk.count(b"\n", pos, at) + 2  # the lines before data:, data:, the blank line
                last_id = event_id
                pos = nl + 2
        except UnicodeDecodeError:  # not UTF-8: the full decoder replaces it and says so
            pass
        # hand over at the boundary `pos`, as the full decoder would stand there
        self._bytes_read = self._line_start = base + pos
        self._lines_read = line
        self._last_id = last_id
        return pos
