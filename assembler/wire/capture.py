"""Recorded captures → provider events.

Four framings are read, detected from the first bytes:

* raw SSE as ``curl -N`` prints it (``event:``/``data:`` lines, blank-line separated);
* JSON Lines: one provider event (a JSON object) per line, as SDK fixtures store them;
* the AWS binary event stream (``application/vnd.amazon.eventstream``), as Bedrock
  ``ConverseStream`` and ``InvokeModelWithResponseStream`` send it: see
  :class:`_EventStreamReader` below;
* a JSON array of provider events (Gemini's default ``streamGenerateContent`` body), read
  an element at a time by :class:`toollatch.wire.jsonarray.ArrayReader`.

Each provider event keeps where it came from (line number and byte offset), so a fault
can be reported as ``file:line (byte N)``. A line that cannot be read becomes a
:class:`ProviderEvent` with ``error`` set; everything before it is kept.

AWS event stream (provider documents: "Event stream encoding" in the Amazon S3
``SelectObjectContent`` / Amazon Transcribe streaming references, and the Amazon Bedrock
API reference for ``ConverseStream`` / ``InvokeModelWithResponseStream``): each frame is
a 12-byte prelude (total length, headers length, both big-endian uint32, and a CRC-32 of
those 8 bytes), the headers (``:message-type``, ``:event-type`` or ``:exception-type``,
``:content-type``), the payload (JSON here) and a CRC-32 of everything before it. Frames
are decoded by botocore's maintained :class:`botocore.eventstream.EventStreamBuffer`,
which checks both CRCs and the length limits; this module only hands it one frame's bytes
at a time, so memory stays bounded by one frame whatever the stream's length.

A frame becomes ``ProviderEvent(event=<type>, data={<type>: <payload>})`` - the same shape
as the JSON Lines captures the AWS SDKs produce, so the Bedrock adapters read both alike.
An ``error`` frame becomes ``{":error": {"code": <:error-code>, "message": <:error-message>}}``
(:data:`ERROR_FRAME`): the provider's error, which the Bedrock adapters read as they read an
exception event. A fault's text never quotes a header value (the provider fills them).
``line`` is the 1-based frame number, ``offset`` the frame's first byte. A corrupt frame (CRC
mismatch, impossible lengths, unreadable headers) becomes one event with ``error`` naming its
byte offset and reading stops there (lengths after it cannot be trusted); a final frame cut
short yields a data-less event with framing ``truncated_frame`` (the dialect adapter then
reports the stream truncated, as it never saw its normal end).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from botocore.eventstream import ChecksumMismatch, EventStreamBuffer, EventStreamMessage, ParserError

from toollatch.wire.envelope import parse_envelope
from toollatch.wire.sse import SSEDecoder, SSEEvent
from toollatch.wire.untrusted import json_problem

DONE = "[DONE]"
_READ_SIZE = 16 * 1024  # small reads keep the per-read event list (transient memory) small
_PRELUDE = 12  # total length, headers length, prelude CRC: three big-endian uint32
_MIN_FRAME = _PRELUDE + 4  # prelude + message CRC, no headers, no payload
_BLANK = b"\xef\xbb\xbf \t\r\n"


class CaptureError(ValueError):
    """A capture cannot be read at all; the message names the file and where."""


class ProviderEvent(NamedTuple):
    """One provider event from a capture.

    ``event`` is the SSE event type or the event stream's ``:event-type`` (None for JSON
    Lines or a type-less SSE event); ``data`` the parsed JSON payload, or the string
    ``"[DONE]"``; ``line`` (1-based; the frame number in an event stream) and ``offset``
    (bytes, 0-based) locate it in the input. ``error`` is set, and ``data``
    None, when the payload could not be parsed.
    """

    event: str | None
    data: Any
    line: int
    offset: int
    error: str | None = None
    #: Framing deviations met with this event: SSE ``comment_line`` (once per comment line), ``crlf_line_ends``,
    #: ``data_before_event``, ``done_variant`` (``[DONE]`` with extra whitespace), and
    #: ``truncated_frame`` (input ended inside an event stream frame, or inside the last line of
    #: JSON Lines, which has no line end and does not parse; ``data`` is None).
    framing: tuple[str, ...] = ()
    #: The payload text ``data`` was parsed from (None for events built in memory). The
    #: envelope parse keeps the last of duplicate keys; an adapter re-checks this text
    #: strictly, only for the rare event that carries argument text as a JSON value.
    raw: str | None = None


class _Unparsed:
    """The type of :data:`UNPARSED`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNPARSED"

    def __reduce__(self) -> str:
        return "UNPARSED"


#: :attr:`ProviderEvent.data` of an event whose payload (its ``raw`` text) a decoder left
#: to be parsed by its reader (``PushDecoder(defer_over=...)``: a payload too large to
#: parse in one go where a thread must stay responsive); :func:`toollatch.core.large.read_unparsed`
#: parses it.
UNPARSED: Any = _Unparsed()


#: Builds a :class:`ProviderEvent` from a tuple of its seven fields without the Python-level
#: ``__new__`` of a named tuple: one per event.
_event = tuple.__new__


def _where(name: str, line: int, offset: int) -> str:
    return f"{name}:{line} (byte {offset})"


def sse_framing(ev: SSEEvent) -> tuple[str, ...]:
    """An SSE event's framing deviations as :attr:`ProviderEvent.framing` holds them: each
    name once, sorted, except ``comment_line``, once per comment line (a quirk is counted
    per entry), all of those first (``comment_line`` sorts first of the names anyway), so
    the pipeline takes a run of them as one op (:func:`toollatch.core.pipeline.framing_ops`)."""
    names = tuple(sorted(ev.framing))
    if ev.comment_lines <= 1:
        return names
    return ("comment_line",) * ev.comment_lines + tuple(n for n in names if n != "comment_line")


def _parse_payload(
    text: str, event: str | None, name: str, line: int, offset: int, framing: tuple[str, ...] = ()
) -> ProviderEvent:
    if len(text) < 32 and text.strip() == DONE:
        variant = ("done_variant",) if text != DONE else ()
        return ProviderEvent(event, DONE, line, offset, framing=framing + variant)
    try:
        return _event(ProviderEvent, (event, parse_envelope(text), line, offset, None, framing, text))
    except (ValueError, RecursionError) as exc:
        msg = json_problem(exc)
        if isinstance(exc, json.JSONDecodeError):
            msg = f"{msg} at character {exc.pos} of the event data"
        where = _where(name, line, offset)
        if text[:1] == ":":  # a gateway's keep-alive comment wrapped as data (``data: : PROCESSING``)
            msg += "; it begins with ':', an SSE comment sent as data"
        return ProviderEvent(event, None, line, offset, f"{where}: event data is not JSON ({msg})", framing)


def _iter_sse(head: bytes, rest: Iterator[bytes], name: str, lines: int = 0, skipped: int = 0) -> Iterator[ProviderEvent]:
    decoder = SSEDecoder()
    for chunk in _chain(head, rest):
        for ev in decoder.decode(chunk):
            kind = None if ev.event == "message" else ev.event
            framing = sse_framing(ev) if ev.framing else ()
            yield _parse_payload(ev.data, kind, name, ev.line + lines, ev.offset + skipped, framing)
    decoder.flush()  # the spec dispatches nothing at end of input


def _iter_jsonl(head: bytes, rest: Iterator[bytes], name: str, lines: int = 0, skipped: int = 0) -> Iterator[ProviderEvent]:
    line_no, offset = lines, skipped
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
        last = _jsonl_line(raw, name, line_no + 1, offset)
        if last.error is not None:  # no line end and no whole value: the input was cut mid-line
            last = ProviderEvent(None, None, line_no + 1, offset, framing=("truncated_frame",))
        yield last


def _jsonl_line(
    raw: bytes, name: str, line: int, offset: int, scrub: Callable[[str], str] | None = None, defer_over: int | None = None
) -> ProviderEvent:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = _where(name, line, offset + exc.start)
        return ProviderEvent(None, None, line, offset, f"{where}: not UTF-8")
    if line == 1:
        text = text.removeprefix("\ufeff")
    text = scrub(text) if scrub is not None else text
    if defer_over is not None and len(text) > defer_over:  # parsed by its reader
        return ProviderEvent(None, UNPARSED, line, offset, raw=text)
    return _parse_payload(text, None, name, line, offset)


def _iter_eventstream(head: bytes, rest: Iterator[bytes], name: str) -> Iterator[ProviderEvent]:
    reader = _EventStreamReader(name)
    for chunk in _chain(head, rest):
        yield from reader.feed(chunk)
        if reader.failed:
            return
    yield from reader.close()


#: What botocore (or the data it is handed) may raise while decoding one frame.
_FRAME_ERRORS = (ParserError, KeyError, IndexError, ValueError, struct.error)


class _EventStreamReader:
    """AWS event-stream frames → provider events, one frame in memory at a time.

    botocore's ``EventStreamBuffer`` does the decoding: prelude CRC, length limits, message
    CRC, headers. This class only hands it each frame's bytes once they are all there - first
    the 12-byte prelude (which botocore validates), then the rest of the frame, whose length
    the validated prelude gives - so every input byte is copied a constant number of times.
    """

    def __init__(self, name: str, scrub: Callable[[str], str] | None = None, defer_over: int | None = None) -> None:
        self._name = name
        self._scrub = scrub  # applied to each payload's text before it is parsed
        self._defer_over = defer_over  # a payload over it: left unparsed (FRAME_PAYLOAD)
        self._buffer = EventStreamBuffer()
        self._pending: list[bytes] = []
        self._have = 0  # bytes in _pending
        self._need = _PRELUDE  # bytes the current step (prelude, or rest of frame) needs
        self._total: int | None = None  # the current frame's validated total length
        self._frame = 1
        self._offset = 0  # the current frame's first byte
        self.failed = False

    def feed(self, chunk: bytes) -> Iterator[ProviderEvent]:
        """Events of the frames that ``chunk`` completes."""
        pos, size = 0, len(chunk)
        while not self.failed:
            missing = self._need - self._have
            if size - pos < missing:
                if pos < size:
                    self._pending.append(chunk[pos:])
                    self._have += size - pos
                return
            self._pending.append(chunk[pos : pos + missing])
            pos += missing
            data = b"".join(self._pending)
            self._pending, self._have = [], 0
            event = self._prelude(data) if self._total is None else self._message(data)
            if event is not None:
                yield event

    def close(self) -> Iterator[ProviderEvent]:
        """End of input: a frame begun and not finished is reported as ``truncated_frame``."""
        if not self.failed and (self._have or self._total is not None):
            yield ProviderEvent(None, None, self._frame, self._offset, framing=("truncated_frame",))

    def _prelude(self, data: bytes) -> ProviderEvent | None:
        self._buffer.add_data(data)
        try:
            premature = next(self._buffer, None)  # validates the prelude CRC and the limits
        except ChecksumMismatch as exc:
            return self._fail(f"prelude CRC mismatch ({exc})")
        except _FRAME_ERRORS as exc:
            return self._fail(f"unreadable prelude ({type(exc).__name__}: {exc})")
        total, headers = struct.unpack(">II", data[:8])
        if premature is not None or total < _MIN_FRAME or headers > total - _MIN_FRAME:
            return self._fail(f"impossible frame lengths (total {total}, headers {headers})")
        self._total, self._need = total, total - _PRELUDE
        return None

    def _message(self, data: bytes) -> ProviderEvent | None:
        self._buffer.add_data(data)
        try:
            message = next(self._buffer, None)
        except ChecksumMismatch as exc:
            return self._fail(f"message CRC mismatch ({exc})")
        except _FRAME_ERRORS as exc:
            return self._fail(f"unreadable headers ({type(exc).__name__})")  # its text can quote a header's name
        if message is None:  # cannot happen: the whole frame was handed over
            return self._fail("frame incomplete after its announced length")
        assert self._total is not None
        event = self._event(message)
        self._frame += 1
        self._offset += self._total
        self._total, self._need = None, _PRELUDE
        return event

    def _where(self) -> str:
        return f"{self._name}: event-stream frame {self._frame} (byte {self._offset})"

    def _fail(self, what: str) -> ProviderEvent:
        self.failed = True
        return ProviderEvent(None, None, self._frame, self._offset, f"{self._where()}: {what}")

    def _event(self, message: EventStreamMessage) -> ProviderEvent:
        headers: dict[str, Any] = message.headers
        line, offset = self._frame, self._offset
        message_type = headers.get(":message-type")
        kind_header = {"event": ":event-type", "exception": ":exception-type"}.get(message_type)
        if message_type == "error":
            # the provider reporting an error: an event its dialect reads (the code a word,
            # the message free text kept for Reveal), never quoted in a framing fault
            body = {k: str(v) for k, v in ((ERROR_CODE, headers.get(":error-code")), (ERROR_MESSAGE, headers.get(":error-message"))) if v not in (None, "")}
            return ProviderEvent(ERROR_FRAME, {ERROR_FRAME: body}, line, offset)
        # No header value of the frame is quoted in a fault below: the provider fills them,
        # and argument text can reach them (a fault's text ends the stream, shown as it is).
        if kind_header is None:
            return ProviderEvent(None, None, line, offset, f"{self._where()}: a frame of unknown :message-type")
        kind = headers.get(kind_header)
        if not isinstance(kind, str) or not kind:
            return ProviderEvent(None, None, line, offset, f"{self._where()}: {kind_header} header missing")
        payload: bytes = message.payload
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            return ProviderEvent(kind, None, line, offset, f"{self._where()}: {message_type} payload is not JSON (not UTF-8)")
        if self._scrub is not None:
            text = self._scrub(text)
        if self._defer_over is not None and len(text) > self._defer_over:  # parsed by its reader
            return ProviderEvent(FRAME_PAYLOAD + kind, UNPARSED, line, offset, raw=text)
        return frame_event(kind, text, self._name, line, offset)


#: The event an event-stream ``error`` frame becomes: ``{ERROR_FRAME: {ERROR_CODE: <:error-code>,
#: ERROR_MESSAGE: <:error-message>}}`` (either left out when the frame has none), of event
#: type ``ERROR_FRAME``: a key no provider event has (the Bedrock adapters read it as the
#: provider's error).
ERROR_FRAME, ERROR_CODE, ERROR_MESSAGE = ":error", "code", "message"


#: The event type of an event-stream frame left unparsed (``PushDecoder(defer_over=...)``):
#: this prefix, then the frame's own type; :func:`frame_event` reads it.
FRAME_PAYLOAD = "\x00frame:"


def frame_event(kind: str, text: str, name: str, frame: int, offset: int) -> ProviderEvent:
    """The provider event of event-stream frame number ``frame`` (its first byte at
    ``offset`` of input ``name``) of type ``kind``, from its payload ``text`` (empty: ``{}``):
    ``{kind: payload}`` as Bedrock's JSON Lines shape has it, or an ``error`` naming the
    frame when the payload is not JSON."""
    try:
        body = parse_envelope(text) if text else {}
    except (ValueError, RecursionError) as exc:
        where = f"{name}: event-stream frame {frame} (byte {offset})"  # its type unquoted: the provider names it
        return ProviderEvent(kind, None, frame, offset, f"{where}: frame payload is not JSON ({json_problem(exc)})")
    return ProviderEvent(kind, {kind: body}, frame, offset, raw=text or None)


def _chain(head: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if head:
        yield head
    yield from rest


def iter_capture(chunks: Iterable[bytes], name: str = "<input>") -> Iterator[ProviderEvent]:
    """Provider events of a capture given as byte chunks (any split), in bounded memory.

    The framing is detected from the first bytes: a gzip member is inflated first; HTTP
    heads in front (``curl -i``) are skipped; an AWS event-stream prelude (see
    :func:`is_eventstream`) means the binary event stream; otherwise the first non-blank
    byte ``{`` means JSON Lines, anything else SSE. The decoding is
    :class:`toollatch.wire.intake.PushDecoder`'s, the one every intake uses.
    """
    return (_iter_pushed or _load_iter_pushed())(chunks, name)


#: :func:`toollatch.wire.intake.iter_pushed`, once loaded (intake builds on this module's
#: framings, so it cannot be imported while this module loads); an import statement per
#: call would cost more than reading a small capture's first event.
_iter_pushed: Callable[[Iterable[bytes], str], Iterator[ProviderEvent]] | None = None


def _load_iter_pushed() -> Callable[[Iterable[bytes], str], Iterator[ProviderEvent]]:
    global _iter_pushed
    from toollatch.wire.intake import iter_pushed

    _iter_pushed = iter_pushed
    return iter_pushed


def _skip_http_heads(head: bytes) -> tuple[bytes, bool]:
    """Drop the HTTP response head(s) ``curl -i`` prints before the body.

    Returns the bytes after the heads and whether the body has begun (False: the head is
    not complete yet, read more). Header lines are never kept. Interim responses
    (``HTTP/1.1 100 Continue``) are skipped too.
    """
    while head.startswith(b"HTTP/"):
        ends = [i for i in (head.find(b"\r\n\r\n"), head.find(b"\n\n")) if i != -1]
        if not ends:
            return head, len(head) > 64 * 1024  # an absurd head: give up skipping
        end = min(ends)
        head = head[end + (4 if head[end : end + 4] == b"\r\n\r\n" else 2) :]
    return head, bool(head.lstrip(_BLANK)) and len(head) >= _PRELUDE


def is_eventstream(head: bytes) -> bool:
    """True if ``head`` starts like an AWS event stream.

    Its first four bytes are the first frame's total length, big-endian, so a frame under
    16 MiB starts with a NUL byte, which no SSE or JSON Lines capture does; a larger frame
    is recognised by a prelude whose CRC-32 checks and whose lengths are consistent.
    """
    if head[:1] == b"\x00":
        return True
    if len(head) < _PRELUDE:
        return False
    total, headers, crc = struct.unpack(">III", head[:_PRELUDE])
    return crc == zlib.crc32(head[:8]) and total >= _MIN_FRAME and headers <= total - _MIN_FRAME


def read_capture(data: bytes, name: str = "<input>") -> list[ProviderEvent]:
    """All provider events of an in-memory capture (see :func:`iter_capture`)."""
    return list(iter_capture([data], name))


def iter_file(path: Path) -> Iterator[ProviderEvent]:
    """Provider events of a capture file, read in 16 KiB pieces.

    Raises :class:`CaptureError` when the file cannot be opened.
    """
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise CaptureError(f"{path}: cannot open: {exc.strerror}") from None
    with handle:
        yield from iter_capture(iter(lambda: handle.read(_READ_SIZE), b""), str(path))
