"""Bytes in, provider events out, pushed one chunk at a time.

:class:`PushDecoder` is the push form of :func:`toollatch.wire.capture.iter_capture`: ``feed``
takes each chunk as it arrives (any split) and returns the provider events it completes,
``close`` those left at the end of input. The framing is detected from the first bytes,
with the very rules and payload parsing :mod:`toollatch.wire.capture` documents:

* a gzip member (``1f 8b``, RFC 1952) is inflated as it arrives and its content detected
  in turn (a capture saved with ``Content-Encoding: gzip`` kept);
* one or more HTTP response heads in front (``curl -i``) are skipped, positions staying
  those of the input;
* an AWS event-stream prelude means the binary event stream (Bedrock);
* a first non-blank byte ``[`` means a JSON array of provider events (Gemini's default
  streaming body; read one element at a time by :class:`~toollatch.wire.jsonarray.ArrayReader`),
  ``{`` JSON Lines, anything else raw SSE.

Memory stays bounded by one event (one frame, one line) plus the detection window.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable, Iterator

from toollatch.wire.capture import (
    _BLANK,
    DONE,
    _PRELUDE,
    CaptureError,
    UNPARSED,
    ProviderEvent,
    _event,
    _EventStreamReader,
    _jsonl_line,
    _parse_payload,
    _skip_http_heads,
    is_eventstream,
    sse_framing,
)
from toollatch.wire.envelope import parse_envelope, parse_plain, read_is_plain
from toollatch.wire.jsonarray import ArrayReader
from toollatch.wire.sse import SSEDecoder
from toollatch.wire.ssefast import FastSSEDecoder
from toollatch.wire.untrusted import json_problem

_GZIP = b"\x1f\x8b"
#: A head whose first byte is one of these may begin with blank bytes (``_BLANK``'s first bytes).
_BLANK_FIRST = frozenset(bytes([b]) for b in _BLANK)
#: Largest piece of inflated output produced per step (keeps each step's memory small).
_INFLATE_STEP = 256 * 1024


#: Bytes of nothing but blank characters after which the framing is taken to be SSE without
#: waiting for a first non-blank byte (JSON Lines or an array after that much whitespace
#: then reads as SSE, and finds no event).
BLANK_HEAD_LIMIT = 64 * 1024


#: How an SSE input's first line starts (a data or event field, a comment). No other framing
#: does: an AWS event stream's first bytes are its first frame's length (these would mean a
#: frame of over 900 MB, where frames are at most 16 MiB), JSON starts with ``{`` or ``[``,
#: gzip with 0x1f 0x8b, an HTTP head with ``HTTP/``.
_SSE_FIRST = (b"data:", b"event:", b":")

class PushDecoder:
    """One input's bytes → provider events, in arrival order.

    ``name`` names the input in errors (``name:line (byte N)``). ``feed`` and ``close``
    never raise for bad input: a fault becomes a :class:`ProviderEvent` with ``error`` set
    (everything before it is kept); a gzip member that cannot be inflated raises
    :class:`~toollatch.wire.capture.CaptureError` naming the byte where inflating failed.
    """

    __slots__ = (
        "_array", "_closed", "_frames", "_head", "_inflate", "_inner", "_jsonl", "_jsonl_line", "_jsonl_offset",
        "_lines", "_mode", "_read", "_skipped", "_sse", "defer_over", "name", "scrub",
    )

    def __init__(self, name: str = "<input>", scrub: Callable[[str], str] | None = None, defer_over: int | None = None) -> None:
        self.name = name
        #: Applied to each event's payload text before it is parsed (the proxy replaces
        #: forwarded credentials an upstream echoes); None: the text as read.
        self.scrub = scrub
        #: An SSE event whose payload is longer than this (characters) is not parsed here:
        #: its :attr:`~toollatch.wire.capture.ProviderEvent.data` is
        #: :data:`~toollatch.wire.capture.UNPARSED` and ``raw`` holds the (scrubbed) text,
        #: for the reader to parse off its event loop (:func:`toollatch.core.large.read_unparsed`).
        #: None: every payload is parsed here.
        self.defer_over = defer_over
        self._head = b""
        self._mode: str | None = None  # "sse", "jsonl", "array", "eventstream", "gzip" once known
        self._lines = 0  # lines and bytes of HTTP heads skipped in front
        self._skipped = 0
        self._sse: SSEDecoder | None = None
        self._jsonl: list[bytes] = []
        self._jsonl_line = 0
        self._jsonl_offset = 0
        self._frames: _EventStreamReader | None = None
        self._array: ArrayReader | None = None
        self._inflate: zlib._Decompress | None = None
        self._inner: PushDecoder | None = None
        self._read = 0  # compressed bytes read (gzip), for error positions
        self._closed = False

    @property
    def framing(self) -> str | None:
        """``"sse"``, ``"jsonl"``, ``"array"``, ``"eventstream"`` or ``"gzip"`` once detected, else None."""
        return self._mode

    def feed(self, chunk: bytes) -> list[ProviderEvent]:
        """The events ``chunk`` completes (an empty list while an event is incomplete)."""
        if self._closed or not chunk:
            return []
        if self._mode is None:
            self._head += chunk
            if not self._decide(final=False):
                return []
            chunk, self._head = self._head, b""
            if not chunk:
                return []
        return self._route(chunk)

    def close(self) -> list[ProviderEvent]:
        """End of input: the events still held (a JSON Lines line without its line end; a
        cut event-stream frame as ``truncated_frame``)."""
        if self._closed:
            return []
        out: list[ProviderEvent] = []
        if self._mode is None:
            self._decide(final=True)
            chunk, self._head = self._head, b""
            out += self._route(chunk) if chunk else []
        self._closed = True
        mode = self._mode
        if mode == "sse" and self._sse is not None:
            self._sse.flush()  # the spec dispatches nothing at end of input
        elif mode == "jsonl":
            out += self._jsonl_close()
        elif mode == "array" and self._array is not None:
            out += self._array.close()
        elif mode == "eventstream" and self._frames is not None:
            out += list(self._frames.close())
        elif mode == "gzip" and self._inner is not None:
            if self._inflate is not None and not self._inflate.eof and self._read:
                out += self._inner.feed(self._inflate.flush())
            out += self._inner.close()
        return out

    # ------------------------------------------------------------------ detection

    def _decide(self, *, final: bool) -> bool:
        """Pick the framing from the head held so far; False: read more first (the rules of
        :func:`toollatch.wire.capture.iter_capture`, HTTP heads skipped, gzip added)."""
        head = self._head
        if head.startswith(_SSE_FIRST):  # the common input: SSE from its first byte, nothing else starts so
            self._mode = "sse"
            self._sse = FastSSEDecoder()
            return True
        # the head without its leading blank bytes, copied only when it has some
        body = head if head[:1] not in _BLANK_FIRST else head.lstrip(_BLANK)
        if not final:
            if not (head[:1] == b"\x00" or head.startswith(_GZIP) or (len(head) >= _PRELUDE and body)):
                if len(head) < BLANK_HEAD_LIMIT:
                    return False
                # That many blank bytes and nothing else: SSE (blank lines), decided now, so
                # that the held head is not copied and rescanned with every chunk after it.
            if head.startswith(b"HTTP/"):
                rest, done = _skip_http_heads(head)
                cut = len(head) - len(rest)
                self._skipped += cut
                self._lines += head[:cut].count(b"\n")
                self._head = head = rest
                body = head if head[:1] not in _BLANK_FIRST else head.lstrip(_BLANK)
                if not done:
                    return False
        if head.startswith(_GZIP):
            self._mode = "gzip"
            self._inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            self._inner = PushDecoder(self.name, self.scrub, self.defer_over)
        elif is_eventstream(head):
            self._mode = "eventstream"
            self._frames = _EventStreamReader(self.name, self.scrub, self.defer_over)
        elif body.startswith(b"["):
            self._mode = "array"
            self._array = ArrayReader(self.name, self._skipped, self.scrub, self.defer_over)
        elif body.startswith(b"{"):
            self._mode = "jsonl"
            self._jsonl_line, self._jsonl_offset = self._lines, self._skipped
        else:
            self._mode = "sse"
            self._sse = FastSSEDecoder()
        return True

    def _route(self, chunk: bytes) -> list[ProviderEvent]:
        mode = self._mode
        if mode == "sse":
            return self._sse_events(chunk)
        if mode == "jsonl":
            return self._jsonl_feed(chunk)
        if mode == "eventstream":
            assert self._frames is not None
            return [] if self._frames.failed else list(self._frames.feed(chunk))
        if mode == "array":
            assert self._array is not None
            return self._array.feed(chunk)
        return self._gunzip(chunk)

    # ------------------------------------------------------------------ framings

    def _sse_events(self, chunk: bytes) -> list[ProviderEvent]:
        assert self._sse is not None
        out = []
        lines, skipped, name = self._lines, self._skipped, self.name
        scrub, defer = self.scrub, self.defer_over
        rows = self._sse.decode_rows(chunk)
        # the payloads of the fast path's rows lie whole in this read: one check of the read
        # for them all (those the full decoder reads may begin in an earlier read)
        parse = parse_plain if rows and read_is_plain(chunk) else parse_envelope
        # no payload of the read to scrub, and none long enough to be left unparsed
        quick = scrub is None and (defer is None or len(chunk) <= defer)
        for ev in rows:
            if ev.__class__ is tuple:  # a plain event of the fast path: no framing notes
                kind, text, line, offset = ev  # type: ignore[misc]
                if quick and len(text) >= 32:  # the common event: a JSON payload
                    try:
                        value = parse(text)
                    except (ValueError, RecursionError):  # _parse_payload parses it again, or words the error
                        pass
                    else:
                        kind = None if kind == "message" else kind
                        out.append(_event(ProviderEvent, (kind, value, line + lines, offset + skipped, None, (), text)))
                        continue
                framing: tuple[str, ...] = ()
                parse_text = parse
            else:
                kind, text, line, offset = ev.event, ev.data, ev.line, ev.offset  # type: ignore[union-attr]
                framing = sse_framing(ev) if ev.framing else ()  # type: ignore[union-attr, arg-type]
                parse_text = parse_envelope
            if kind == "message":
                kind = None
            if defer is not None and len(text) > defer:
                text = scrub(text) if scrub is not None else text
                out.append(_event(ProviderEvent, (kind, UNPARSED, line + lines, offset + skipped, None, framing, text)))
                continue
            if framing or scrub is not None or len(text) < 32:
                text = scrub(text) if scrub is not None else text
                out.append(_parse_payload(text, kind, name, line + lines, offset + skipped, framing))
                continue
            try:  # the common event: a JSON payload, no framing notes (_parse_payload's result, one call less)
                value = parse_text(text)
            except (ValueError, RecursionError):  # _parse_payload parses it again, or words the error
                out.append(_parse_payload(text, kind, name, line + lines, offset + skipped))
                continue
            out.append(_event(ProviderEvent, (kind, value, line + lines, offset + skipped, None, (), text)))
        return out

    def _jsonl_feed(self, chunk: bytes) -> list[ProviderEvent]:
        out: list[ProviderEvent] = []
        pending = self._jsonl
        start = 0
        while (nl := chunk.find(b"\n", start)) != -1:
            pending.append(chunk[start : nl + 1])
            raw = b"".join(pending)
            pending.clear()
            self._jsonl_line += 1
            if raw.strip():
                out.append(_jsonl_line(raw, self.name, self._jsonl_line, self._jsonl_offset, self.scrub, self.defer_over))
            self._jsonl_offset += len(raw)
            start = nl + 1
        if start < len(chunk):
            pending.append(chunk[start:])
        return out

    def _jsonl_close(self) -> list[ProviderEvent]:
        raw = b"".join(self._jsonl)
        self._jsonl = []
        if not raw.strip():
            return []
        line = self._jsonl_line + 1
        last = _jsonl_line(raw, self.name, line, self._jsonl_offset, self.scrub)
        if last.error is not None:  # no line end and no whole value: the input was cut mid-line
            last = ProviderEvent(None, None, line, self._jsonl_offset, framing=("truncated_frame",))
        return [last]

    def _gunzip(self, chunk: bytes) -> list[ProviderEvent]:
        assert self._inner is not None
        out: list[ProviderEvent] = []
        data = chunk
        while data:
            if self._inflate is None or self._inflate.eof:
                unused = self._inflate.unused_data if self._inflate is not None else b""
                data = unused + data if unused else data
                if not data.startswith(_GZIP[: len(data)]):
                    break  # bytes after the last member (padding): ignored, as gzip(1) does
                self._inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            try:
                piece = self._inflate.decompress(data, _INFLATE_STEP)
            except zlib.error as exc:
                self._closed = True
                raise CaptureError(f"{self.name}: gzip data cannot be inflated near byte {self._read} ({exc})") from None
            self._read += len(data) - len(self._inflate.unconsumed_tail)
            data = self._inflate.unconsumed_tail
            out += self._inner.feed(piece)
            if self._inflate.eof and self._inflate.unused_data:
                data, self._inflate = self._inflate.unused_data + data, None
        return out


def iter_pushed(chunks: Iterable[bytes], name: str = "<input>", defer_over: int | None = None) -> Iterator[ProviderEvent]:
    """Provider events of ``chunks`` through one :class:`PushDecoder` (pull form;
    ``defer_over`` as the decoder's)."""
    decoder = PushDecoder(name, defer_over=defer_over)
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.close()


__all__ = ["PushDecoder", "iter_pushed"]
