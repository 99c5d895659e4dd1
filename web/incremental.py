"""Push-style capture decoding for live streams: :class:`IncrementalCapture` turns chunks,
as they arrive, into the provider events :func:`assembler.capture.iter_capture` reads from
a whole capture (SSE or JSON Lines), with the very same payload rules."""

from __future__ import annotations

from typing import Any

from assembler.capture import (  # the very payload rules iter_capture uses
    ProviderEvent,
    _parse_payload,
)
from assembler.sse import SSEDecoder

from .credentials import scrub_text


class IncrementalCapture:
    """Push-style capture decoding: ``decode(chunk)`` returns the events the chunk
    completes, ``close()`` those left at end of input. SSE and JSON Lines, detected from
    the first non-blank byte exactly as :func:`assembler.capture.iter_capture` does; any
    split of the input gives the same events as reading it whole."""

    def __init__(self, name: str, secrets: tuple[str, ...] = ()) -> None:
        self.name = name
        self.secrets = list(secrets)  # scrubbed from each event's text before it is parsed
        self._head = b""
        self._mode: str | None = None  # "sse" or "jsonl" once known
        self._sse = SSEDecoder()
        self._line: list[bytes] = []
        self._lines = 0
        self._offset = 0

    def decode(self, chunk: bytes) -> list[ProviderEvent]:
        if self._mode is None:
            self._head += chunk
            stripped = self._head.lstrip(b"\xef\xbb\xbf \t\r\n")
            if not stripped:
                return []
            self._mode = "jsonl" if stripped[:1] == b"{" else "sse"
            chunk, self._head = self._head, b""
        return self._sse_events(self._sse.decode(chunk)) if self._mode == "sse" else self._jsonl(chunk)

    def close(self) -> list[ProviderEvent]:
        if self._mode == "sse":
            return self._sse_events(self._sse.flush())
        if self._mode == "jsonl" and self._line:
            raw = b"".join(self._line)
            self._line = []
            return [self._jsonl_event(raw, self._lines + 1)] if raw.strip() else []
        return []

    def _sse_events(self, events: list[Any]) -> list[ProviderEvent]:
        out = []
        for ev in events:
            kind = None if ev.event == "message" else ev.event
            out.append(_parse_payload(scrub_text(ev.data, self.secrets), kind, self.name, ev.line, ev.offset, tuple(sorted(ev.framing))))
        return out

    def _jsonl(self, chunk: bytes) -> list[ProviderEvent]:
        out: list[ProviderEvent] = []
        start = 0
        while (nl := chunk.find(b"\n", start)) != -1:
            self._line.append(chunk[start : nl + 1])
            raw = b"".join(self._line)
            self._line = []
            self._lines += 1
            if raw.strip():
                out.append(self._jsonl_event(raw, self._lines))
            self._offset += len(raw)
            start = nl + 1
        if start < len(chunk):
            self._line.append(chunk[start:])
        return out

    def _jsonl_event(self, raw: bytes, line: int) -> ProviderEvent:
        try:
            text = raw.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError:
            return ProviderEvent(None, None, line, self._offset, f"{self.name}:{line} (byte {self._offset}): not UTF-8")
        return _parse_payload(scrub_text(text, self.secrets), None, self.name, line, self._offset)
