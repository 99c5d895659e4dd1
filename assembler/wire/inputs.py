"""Any supported input file → assembled streams.

Raw SSE (``curl -N``, with or without the ``curl -i`` head), JSON Lines, the AWS binary
event stream, and HAR 1.2 exports (each streaming entry is assembled on its own, with
the ``tools`` of its request as the registry unless one is given). An entry with the
``_chunks`` timing extension (:mod:`toollatch.wire.har`) is fed chunk by chunk on its recorded
clock, so call transitions are in recorded seconds.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import BinaryIO

from toollatch.wire.capture import _READ_SIZE, CaptureError, iter_capture
from toollatch.core.config import AssembleConfig
from toollatch.wire.har import is_har, read_har
from toollatch.wire.intake import PushDecoder
from toollatch.core.model import StreamResult
from toollatch.core.pipeline import Pipeline
from toollatch.core.registry import RegistryError, ToolRegistry

#: Bytes read to recognise a HAR document.
SNIFF = 4096


def assemble_path(
    path: Path,
    *,
    dialect: str | None = None,
    config: AssembleConfig | None = None,
    registry: ToolRegistry | None = None,
    reveal: bool = False,
) -> list[tuple[str, StreamResult]]:
    """Assemble every stream in ``path``; each result comes with the name of its source.

    Raises :class:`CaptureError` when the file cannot be read or holds no known stream.
    """
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise CaptureError(f"{path}: cannot open: {exc.strerror}") from None
    with handle:
        return assemble_stream(handle, str(path), dialect=dialect, config=config, registry=registry, reveal=reveal)


def assemble_stream(
    handle: BinaryIO,
    name: str,
    *,
    dialect: str | None = None,
    config: AssembleConfig | None = None,
    registry: ToolRegistry | None = None,
    reveal: bool = False,
) -> list[tuple[str, StreamResult]]:
    """Assemble every stream read from ``handle`` (a file, or standard input as ``curl -N``
    writes it), in 16 KiB reads as they arrive; a HAR export is read whole. ``name`` names
    the input in errors. Raises :class:`CaptureError` as :func:`assemble_path` does."""
    try:
        head = _read_head(handle)
    except OSError as exc:
        raise CaptureError(f"{name}: cannot read: {exc.strerror}") from None
    if is_har(head):
        entries = read_har(head + handle.read(), name)
        if not entries:
            raise CaptureError(f"{name}: the HAR export has no streaming entry")
        out: list[tuple[str, StreamResult]] = []
        for entry in entries:
            own = registry
            if own is None and entry.tools is not None:
                try:
                    own = ToolRegistry.from_tools(entry.tools).ensure_usable()
                except RegistryError as exc:
                    raise CaptureError(f"{entry.name}: request tools: {exc}") from None
            now = [0.0]  # with the _chunks extension, the pipeline runs on the recorded clock
            clock = (lambda: now[0]) if entry.times is not None else time.monotonic
            pipeline = Pipeline(dialect, config=config, registry=own, reveal=reveal, name=entry.name, emit_events=False, clock=clock)
            if entry.times is None:
                for event in iter_capture([entry.body], entry.name):
                    pipeline.feed(event)
            else:
                decoder = PushDecoder(entry.name)
                for t, chunk in entry.times.split(entry.body):
                    now[0] = t
                    for event in decoder.feed(chunk):
                        pipeline.feed(event)
                for event in decoder.close():
                    pipeline.feed(event)
            pipeline.close()
            out += [(f"{entry.name} {entry.method} {entry.url}", r) for r in pipeline.results()]
        return out
    if not head:
        raise CaptureError(f"{name} is empty: give a raw SSE capture, JSON Lines, a HAR export or a Bedrock event stream")
    pipeline = Pipeline(dialect, config=config, registry=registry, reveal=reveal, name=name, emit_events=False)
    rest = iter(lambda: _read1(handle), b"")
    read = 0
    for event in iter_capture(itertools.chain([head], rest), name):
        read += 1
        pipeline.feed(event)
    try:
        pipeline.close()
    except CaptureError:
        if read:  # with no event read, the pipeline can only say it found no provider stream
            raise
        if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith((b"data:", b"event:")):  # SSE cut inside its first event
            raise CaptureError(f"{name} (byte 0): no event could be read: the input ends inside its first SSE event (an event ends at a blank line)") from None
        raise CaptureError(f"{name} (byte 0): no known provider stream (no event could be read): give a raw SSE capture, JSON Lines, a HAR export or a Bedrock event stream") from None
    return [(name, r) for r in pipeline.results()]


def _read1(handle: BinaryIO) -> bytes:
    """What is there, up to 16 KiB (a pipe's bytes as they arrive, not a full read)."""
    read1 = getattr(handle, "read1", None)
    return read1(_READ_SIZE) if read1 is not None else handle.read(_READ_SIZE)


def _read_head(handle: BinaryIO) -> bytes:
    """Up to :data:`SNIFF` bytes, enough to tell a HAR document, without waiting on a pipe
    for more than a HAR needs: reading stops at the first line end past the first byte."""
    head = b""
    while len(head) < SNIFF:
        piece = _read1(handle)
        if not piece:
            break
        head += piece
        if not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{") and head.strip():
            break  # not JSON: no HAR, start assembling
        if b"\n" in head.lstrip() and not is_har(head) and b'"log"' not in head:
            break
    return head
