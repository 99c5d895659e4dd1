"""Content codings (``Content-Encoding``) of proxied bodies, undone for the live session only.

The proxy asks each upstream for ``Accept-Encoding: identity`` and forwards whatever it
answers byte for byte, coding and all: the client's HTTP library decodes it as it would
from the upstream directly. A session, though, assembles provider events, so the content
of an answer the upstream encoded anyway (or of a request body the client encoded) is
decoded for the session: :func:`decoder` for a body read chunk by chunk,
:func:`decode_body` for a whole one.

Codings: ``identity``, ``gzip`` / ``x-gzip`` (several members too) and ``deflate``
(zlib-wrapped or raw); any other (``br``, ``zstd``) is a fault named as such. Several
codings (``deflate, gzip``) are undone last first. Every fault
is a :class:`CodingError` whose message names the coding, never the body: a coding not
known here, data that is not in the coding, a body that ends inside it, or content
beyond the decoder's limit (a small body that decodes to a huge one).
"""

from __future__ import annotations

import zlib
from typing import Any, Protocol

#: Most bytes a body decodes to (per body) before decoding stops with a :class:`CodingError`.
MAX_DECODED_BYTES = 64 * 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b"


class CodingError(ValueError):
    """A body's content coding cannot be undone; the message names the coding."""


class Decoder(Protocol):
    """Undoes one or more content codings of a body fed in pieces."""

    def decode(self, data: bytes) -> bytes:
        """The content of the next ``data`` bytes of the body (possibly empty)."""

    def flush(self, complete: bool = True) -> bytes:
        """The content still held once the body ended; ``complete``: the body ended as its
        sender meant it to (then a body cut short inside its coding is a fault)."""


def _name(coding: str) -> str:
    return coding if len(coding) <= 40 else coding[:39] + "…"


class _Zlib:
    """``gzip`` (every member) or ``deflate`` (zlib-wrapped, else raw), with an output limit."""

    def __init__(self, coding: str, limit: int) -> None:
        self.coding, self.limit = coding, limit
        self.gzip = coding in ("gzip", "x-gzip")
        self.raw = False  # deflate without the zlib wrapper
        self.out = 0  # content bytes returned so far
        self.fed = False  # any byte of the body seen
        self.obj = self._new()

    def _new(self) -> Any:
        return zlib.decompressobj(16 + zlib.MAX_WBITS if self.gzip else -zlib.MAX_WBITS if self.raw else zlib.MAX_WBITS)

    def _error(self, what: str) -> CodingError:
        return CodingError(f"Content-Encoding: {_name(self.coding)}: {what}")

    def decode(self, data: bytes) -> bytes:
        out = bytearray()
        while data:
            self.fed = True
            try:
                piece = self.obj.decompress(data, self.limit - self.out - len(out) + 1)
            except zlib.error:
                if not self.gzip and not self.raw and not self.out and not out:
                    self.raw = True  # a deflate body without the zlib wrapper, as some servers send
                    self.obj = self._new()
                    continue
                raise self._error("the body is not in this coding") from None
            out += piece
            if self.out + len(out) > self.limit:
                raise self._error(f"the content is over {self.limit} bytes")
            data = self.obj.unconsumed_tail
            if not data and self.obj.eof and self.gzip and self.obj.unused_data.startswith(_GZIP_MAGIC):
                data = self.obj.unused_data  # the next gzip member
                self.obj = self._new()
        self.out += len(out)
        return bytes(out)

    def flush(self, complete: bool = True) -> bytes:
        if complete and self.fed and not self.obj.eof:
            raise self._error("the body ended inside its compressed data")
        return self.obj.flush() if not self.obj.eof else b""


class _Chain:
    """Several codings, the last applied undone first."""

    def __init__(self, decoders: list[Decoder]) -> None:
        self.decoders = decoders

    def decode(self, data: bytes) -> bytes:
        for decoder in self.decoders:
            data = decoder.decode(data)
        return data

    def flush(self, complete: bool = True) -> bytes:
        data = b""
        for decoder in self.decoders:
            data = decoder.decode(data) + decoder.flush(complete) if data else decoder.flush(complete)
        return data


def decoder(content_encoding: str | None, limit: int = MAX_DECODED_BYTES) -> Decoder | None:
    """A decoder for a body sent with ``Content-Encoding: <content_encoding>`` (the header's
    value; several lines joined by commas), or None when it needs none (absent, ``identity``).
    Raises :class:`CodingError` for a coding not known here."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip() and c.strip().lower() != "identity"]
    decoders: list[Decoder] = []
    for coding in reversed(codings):
        if coding not in ("gzip", "x-gzip", "deflate"):
            raise CodingError(f"Content-Encoding: {_name(coding)} is not a coding known here")
        decoders.append(_Zlib(coding, limit))
    if not decoders:
        return None
    return decoders[0] if len(decoders) == 1 else _Chain(decoders)


def decode_body(body: bytes, content_encoding: str | None, limit: int = MAX_DECODED_BYTES) -> bytes:
    """The content of a whole ``body`` sent with ``Content-Encoding: <content_encoding>``
    (``body`` itself when it has none). Raises :class:`CodingError` (see the module)."""
    found = decoder(content_encoding, limit)
    if found is None:
        return body
    return found.decode(body) + found.flush()
