"""A JSON array of provider events, read one element at a time as its bytes arrive.

Gemini's default streaming body (``streamGenerateContent`` without ``alt=sse``) is one
JSON array, pretty-printed, whose elements (``GenerateContentResponse`` chunks) arrive as
the model produces them, separated by ``,\\r\\n``; some SDK fixtures and HAR viewers save
SSE events the same way (``[{"event": ..., "data": ...}, ...]``). :class:`ArrayReader`
finds the array's elements by scanning each byte once (strings and their escapes tracked
across chunk splits), so an element becomes a provider event as soon as it is whole (its
closing ``}``; a scalar at its ``,`` or ``]``): nothing is re-parsed and memory is bounded by
one element (:data:`MAX_ELEMENT_BYTES`).

Faults never raise: an element that is not JSON, one over the limit, or non-blank bytes
after the closing ``]`` become a :class:`~toollatch.wire.capture.ProviderEvent` with ``error``
set, naming ``name:<element position> (byte <offset>)``; input that ends inside the array
gives a data-less event with framing ``truncated_frame`` (the stream is then truncated).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from toollatch.wire.capture import DONE, UNPARSED, ProviderEvent, _parse_payload

#: Largest array element read (one provider event); a larger one is an error event.
MAX_ELEMENT_BYTES = 64 * 1024 * 1024
#: From where scanning stands: skip every byte that is not a bracket and every whole string
#: in one match; group 1 is then the bracket (at the array's own level, depth 1, a comma
#: too), or ``"`` where a string starts that this chunk does not finish, or empty at the
#: chunk's end. The Python loop turns once per bracket, not once per byte or string.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_AT_TOP = re.compile(rb'(?:[^"\[\]{},]+|' + _STRING + rb')*([\[\]{},]|"?)', re.DOTALL)
_INSIDE = re.compile(rb'(?:[^"\[\]{}]+|' + _STRING + rb')*([\[\]{}]|"?)', re.DOTALL)
#: The rest of a string a previous chunk (or scan) began; group 1 holds its closing quote,
#: empty when the chunk ends inside it.
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*("?)', re.DOTALL)
_WHITESPACE = b"\xef\xbb\xbf \t\r\n"


#: :attr:`ProviderEvent.event` of an element left unparsed (``defer_over``): its reader
#: parses it, then reads it as an element (:func:`element_event`).
ARRAY_ELEMENT = "\x00array-element"


def element_event(event: ProviderEvent) -> ProviderEvent:
    """One parsed array element as the event it stands for: an ``{"event", "data"}`` pair
    (as SSE viewers export a stream) as that event, else the element with its ``type`` as
    the event type."""
    item = event.data
    if event.error is not None or not isinstance(item, dict):
        return event
    if isinstance(item.get("data"), (dict, str)) and set(item) <= {"event", "data"}:
        kind = item.get("event")  # {"event", "data"} pairs, as SSE viewers export them
        data = DONE if item["data"] == DONE else item["data"]
        return ProviderEvent(kind if isinstance(kind, str) else None, data, event.line, event.offset)
    kind = item.get("type")
    return event._replace(event=kind) if isinstance(kind, str) else event


class ArrayReader:
    """``feed`` bytes of one JSON array (any split), get the elements it completes as events.

    ``offset``: the input position of the first byte fed (bytes skipped in front, e.g. an
    HTTP head), so error positions are those of the input. ``scrub``: applied to each
    element's text before it is parsed (see :class:`toollatch.wire.intake.PushDecoder`).
    """

    def __init__(self, name: str, offset: int = 0, scrub: Callable[[str], str] | None = None, defer_over: int | None = None) -> None:
        self.name = name
        self.scrub = scrub
        self.defer_over = defer_over  # an element longer than this (characters) is left unparsed
        self._pos = offset  # input offset of the next byte fed
        self._depth = 0  # 0 before the top-level '[', 1 inside it, more inside an element
        self._in_string = False
        self._escaped = False  # the previous byte in a string was a backslash
        self._closed = False  # the top-level ']' was read
        self._failed = False
        self._pieces: list[bytes] = []  # the current element's bytes
        self._size = 0
        self._start = offset  # input offset of the current element's first byte
        self._count = 0  # elements (and empty slots) seen
        self._emitted = False  # the current element (an object or array) was sent at its close

    def feed(self, chunk: bytes) -> list[ProviderEvent]:
        """The events whose delimiter ``chunk`` holds, in order."""
        out: list[ProviderEvent] = []
        if self._failed or not chunk:
            self._pos += len(chunk)
            return out
        i, n, begin = 0, len(chunk), 0  # begin: where the current element's bytes start in chunk
        while i < n:
            if self._closed:
                if chunk[i:].strip(_WHITESPACE):
                    out.append(self._error(self._pos + i, "bytes after the end of the JSON array"))
                break
            if self._in_string:
                if self._escaped:
                    self._escaped, i = False, i + 1
                    continue
                m = _STRING_REST.match(chunk, i)
                assert m is not None  # the pattern matches the empty string
                i = m.end()
                if not m.group(1):  # the chunk ends inside the string
                    if i < n:  # ... right after a backslash
                        self._escaped, i = True, n
                    break
                self._in_string = False
                continue
            m = (_AT_TOP if self._depth <= 1 else _INSIDE).match(chunk, i)
            assert m is not None  # the pattern matches the empty string
            token = m.group(1)
            j, i = m.start(1), m.end()
            if not token:
                break  # the chunk's end
            if token == b'"':  # a string this chunk does not finish
                self._in_string = True
                continue
            elif token in b"[{":
                self._depth += 1
                if self._depth == 1:  # the top-level '[': elements start after it
                    begin, self._start = i, self._pos + i
            elif self._depth == 1 and token in b",]":
                self._pieces.append(chunk[begin:j])
                event = self._between() if self._emitted else self._element(last=token == b"]")
                if event is not None:
                    out.append(event)
                begin, self._start, self._emitted = i, self._pos + i, False
                if token == b"]":
                    self._depth, self._closed = 0, True
            elif token == b",":
                pass  # a comma inside an element
            elif self._depth == 1:  # a '}' closing nothing: the array cannot be read further
                out.append(self._error(self._pos + j, "a '}' that closes no object"))
                break
            else:  # ']' or '}' inside an element
                self._depth -= 1
                if self._depth == 1:  # the element's value is whole: an event now, not at the next ','
                    self._pieces.append(chunk[begin : j + 1])
                    event = self._element(last=False)
                    if event is not None:
                        out.append(event)
                    begin, self._start, self._emitted = i, self._pos + i, True
        if self._depth >= 1 and not self._closed and not self._failed and begin < n:
            self._pieces.append(chunk[begin:])
            self._size += n - begin
            if self._size > MAX_ELEMENT_BYTES:
                out.append(self._error(self._start, f"an array element over {MAX_ELEMENT_BYTES} bytes"))
        self._pos += n
        return out

    def close(self) -> list[ProviderEvent]:
        """End of input: a ``truncated_frame`` note when it ended inside the array."""
        if self._failed or self._closed:
            return []
        self._failed = True
        return [ProviderEvent(None, None, self._count + 1, self._start, framing=("truncated_frame",))]

    def _element(self, *, last: bool) -> ProviderEvent | None:
        raw = b"".join(self._pieces)
        self._pieces, self._size = [], 0
        if not raw.strip(_WHITESPACE) and last and self._count == 0:
            return None  # []: an empty array
        self._count += 1
        start = self._start + len(raw) - len(raw.lstrip(_WHITESPACE))  # its first non-blank byte
        try:
            text = raw.decode("utf-8").strip(" \t\r\n")
        except UnicodeDecodeError as exc:
            return self._error(self._start + exc.start, "an array element that is not UTF-8", keep_going=True)
        if not text:
            return self._error(start, "an empty array element (a comma too many)", keep_going=True)
        text = self.scrub(text) if self.scrub is not None else text
        if self.defer_over is not None and len(text) > self.defer_over:  # parsed by its reader (UNPARSED)
            return ProviderEvent(ARRAY_ELEMENT, UNPARSED, self._count, start, raw=text)
        return element_event(_parse_payload(text, None, self.name, self._count, start))

    def _between(self) -> ProviderEvent | None:
        """After an element sent at its close: only blanks may come before its delimiter."""
        raw = b"".join(self._pieces)
        self._pieces, self._size = [], 0
        if raw.strip(_WHITESPACE):
            return self._error(self._start, "bytes after an array element, before its ','", keep_going=True)
        return None

    def _error(self, offset: int, what: str, *, keep_going: bool = False) -> ProviderEvent:
        if not keep_going:
            self._failed = True
        position = self._count if keep_going else self._count + 1
        return ProviderEvent(None, None, position, offset, f"{self.name}:{position} (byte {offset}): {what}")


__all__ = ["MAX_ELEMENT_BYTES", "ArrayReader"]
