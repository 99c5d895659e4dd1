"""Bug-report captures in: uploads and pastes → stored sources → replayable sessions.

Accepted inputs, detected from the first bytes (:func:`detect_format`): raw SSE (with or
without the HTTP head ``curl -i`` prints: the head is never stored), JSON Lines, a JSON array
of provider events, the AWS binary event stream (Bedrock), any of these gzip-compressed, and
HAR 1.2 exports. A HAR export is split into its streaming entries; each
becomes its own source, with its request's ``tools`` as the registry. Of a HAR, only the
response bodies and the tools are kept: never headers, cookies or query strings.

Uploads are read from the multipart form in :data:`READ_CHUNK` pieces up to the size
limit (:func:`read_upload`). A source keeps its raw bytes; provider events are parsed
lazily, one piece at a time, both for the dry run here and for every replay, so memory
holds the bytes and one chunk's events, never a list of the whole file's events.

A text capture whose last line (JSON Lines) or event (SSE) was cut off is still read:
the incomplete tail is reported (:func:`cut_tail`) and, for JSON Lines, left out so the
stream ends as *truncated* rather than as an unreadable line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from starlette.datastructures import UploadFile

from toollatch.wire.capture import CaptureError, is_eventstream
from toollatch.core.config import AssembleConfig
from toollatch.wire.har import is_har, read_har
from toollatch.observe.timing import ChunkTimes, TimingError
from toollatch.core.model import StreamResult, escape_surrogates
from toollatch.core.large import CappedPipeline
from toollatch.core.registry import RegistryError, ToolRegistry

from toollatch.web.triage import bulk
from toollatch.web.live.credentials import redact_url
from toollatch.web.triage.sources import LoadedSource, SourceError, capped_events, escaped_strings, parse_tools
from toollatch.web.store import Store, StoredSource

log = logging.getLogger("toollatch.web")

#: Bytes read from an uploaded file at a time.
READ_CHUNK = 1024 * 1024
#: Bytes of an upload joined on the event loop; a larger one is joined in a worker thread.
JOIN_ON_LOOP_BYTES = 4 * 1024 * 1024
#: Bytes looked at to recognise the format.
SNIFF = 64 * 1024
#: A line of a text capture (bytes.splitlines' line ends: CR, LF, CRLF).
_LINE = re.compile(rb"[^\r\n]+")
#: Tools files larger than this are refused.
MAX_TOOLS_BYTES = 1024 * 1024

FORMAT_LABELS = {
    "sse": "raw SSE",
    "http+sse": "raw SSE with an HTTP head (curl -i)",
    "jsonl": "JSON Lines",
    "http+jsonl": "JSON Lines with an HTTP head (curl -i)",
    "eventstream": "AWS binary event stream",
    "har": "HAR export",
    "json-array": "JSON array of provider events",
    "http+json-array": "JSON array of provider events with an HTTP head (curl -i)",
    "gzip": "gzip-compressed capture",
}


@dataclass(frozen=True)
class CutTail:
    """Where an input was cut off: 1-based ``line`` and ``byte`` offset of the incomplete tail."""

    line: int
    byte: int
    what: str  # "line" (JSON Lines) or "event" (SSE)

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "byte": self.byte, "what": self.what}


# ------------------------------------------------------------------ detection


def _body_start(data: bytes) -> int:
    """Bytes of the HTTP response head(s) ``curl -i`` prints before the body (0 if none)."""
    pos = 0
    while data.startswith(b"HTTP/", pos):
        ends = [i for i in (data.find(b"\r\n\r\n", pos, pos + SNIFF), data.find(b"\n\n", pos, pos + SNIFF)) if i != -1]
        if not ends:
            return pos
        end = min(ends)
        pos = end + (4 if data[end : end + 4] == b"\r\n\r\n" else 2)
    return pos


def detect_format(data: bytes) -> str:
    """One of :data:`FORMAT_LABELS`' keys, from the first bytes of ``data``."""
    head = data[:SNIFF]
    if is_har(head):
        return "har"
    if is_eventstream(head):
        return "eventstream"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"  # inflated as it is read (toollatch.wire.intake); no tail is cut from it
    start = _body_start(head)
    prefix = "http+" if start else ""
    body = head[start:].lstrip(b"\xef\xbb\xbf \t\r\n")
    return prefix + ("jsonl" if body.startswith(b"{") else "json-array" if body.startswith(b"[") else "sse")


def cut_tail(data: bytes, fmt: str) -> CutTail | None:
    """The incomplete last line (JSON Lines) or event (SSE) of a text capture, if any."""
    if fmt.endswith("jsonl"):
        start = data.rfind(b"\n") + 1
        tail = data[start:]
        if bulk.is_blank(tail):
            return None
        try:
            json.loads(tail.decode("utf-8"))
            return None  # a complete last line without a newline
        except (UnicodeDecodeError, ValueError, RecursionError):
            return CutTail(bulk.count(data, b"\n", start) + 1, start, "line")
    if fmt.endswith("sse"):
        ends = [i + n for i, n in ((data.rfind(b"\n\n"), 2), (data.rfind(b"\r\n\r\n"), 4), (data.rfind(b"\r\r"), 2)) if i != -1]
        start = max(ends, default=_body_start(data))
        tail = data[start:]
        # line by line, not tail.splitlines(): a tail of millions of lines is no single long call
        if bulk.is_blank(tail) or all(not m[0].strip() or m[0].startswith(b":") for m in _LINE.finditer(tail)):
            return None
        skip = len(tail) - len(tail.lstrip(b"\r\n"))
        start += skip
        return CutTail(bulk.count(data, b"\n", start) + 1, start, "event")
    return None


def readable_part(data: bytes, fmt: str) -> tuple[bytes, CutTail | None]:
    """``data`` without a cut-off JSON Lines tail, and where it was cut (None: complete)."""
    tail = cut_tail(data, fmt)
    if tail is not None and tail.what == "line":
        return data[: tail.byte], tail
    return data, tail


# ------------------------------------------------------------------ reading


async def read_upload(file: UploadFile, limit: int) -> bytes:
    """The uploaded file's bytes, read :data:`READ_CHUNK` at a time; :class:`SourceError` (413)
    over ``limit`` bytes. The pieces are joined in a worker thread when they hold more than
    :data:`JOIN_ON_LOOP_BYTES`."""
    parts: list[bytes] = []
    total = 0
    while chunk := await file.read(READ_CHUNK):
        total += len(chunk)
        if total > limit:
            raise SourceError(f"{file.filename} is larger than the {limit / 2**20:.0f} MiB upload limit.", status=413)
        parts.append(chunk)
    if total <= JOIN_ON_LOOP_BYTES:
        return b"".join(parts)
    return await asyncio.to_thread(b"".join, parts)  # one copy of up to the upload limit: never on the event loop


@dataclass(frozen=True)
class DryRun:
    """What a full pass of the assembler over a source found (no argument text kept)."""

    count: int
    dialect: str | None
    results: list[StreamResult]


def dry_run(data: bytes, name: str, config: AssembleConfig, registry: ToolRegistry | None) -> DryRun:
    """Assemble ``data`` once, lazily; :class:`SourceError` naming file, line and byte if unreadable."""
    pipeline = CappedPipeline(config=config, registry=registry, name=name, clock=lambda: 0.0, progress_events=False)  # as the session will assemble it
    count, line, offset = 0, 0, 0
    try:
        for event in capped_events(data, name):
            count, line, offset = count + 1, event.line, event.offset
            pipeline.feed(event)
        pipeline.close()
    except CaptureError as exc:
        raise SourceError(unreadable(name, str(exc), count, line, offset)) from None
    except Exception as exc:  # a bug must not become a 500; the text could quote content
        log.error("dry run of %s raised %s", name, type(exc).__name__)
        raise SourceError(f"Cannot assemble {name}: the assembler failed ({type(exc).__name__}) near {name}:{line} (byte {offset}).") from None
    return DryRun(count, pipeline.dialect, pipeline.results())


def unreadable(name: str, text: str, count: int, line: int, offset: int) -> str:
    """The message for a capture the assembler cannot read: the file and the byte, once each.

    ``text`` is the :class:`CaptureError`'s; it names the file, and the line and byte when it
    knows them (``broken.sse:1 (byte 0): event data is not JSON``). When it does not, the
    place the reading got to is added: after ``count`` events, the last at ``line`` and byte
    ``offset``.
    """
    prefix = "Not a readable provider stream: "
    if "byte " in text:
        return prefix + text
    what = text.removeprefix(f"{name}: ")
    where = f"{name}:{line} (byte {offset:,})" if count else f"{name} (byte 0)"
    read = f"the {count:,} event{'' if count == 1 else 's'} read" if count != 1 else "the one event read"
    if what.startswith("no known provider stream"):  # "… found", "… in the first N events"
        if not count:
            return prefix + f"{where}: no known provider stream (no event could be read). Upload raw SSE, JSON Lines, a HAR export or a Bedrock event stream."
        return prefix + f"{where}: no known provider stream in {read}."
    return prefix + f"{where}: {what}" + (f" (after {read})." if count else ".")


def summary(run: DryRun) -> dict[str, Any]:
    """The searchable summary of a dry run: tool names, verdicts (states and reason codes), quirks."""
    calls = [c for r in run.results for c in r.calls]
    verdicts = {c.state.value for c in calls} | {(c.reason or "").split(":", 1)[0] for c in calls if c.reason}
    quirks = {q for r in run.results for q in r.quirks}
    return {
        "tools": sorted({c.name for c in calls if c.name}),
        "verdicts": sorted(verdicts),
        "quirks": sorted(quirks),
        "dialect": run.dialect,
        "events": run.count,
        "streams": len(run.results),
        "calls": len(calls),
        "ends": [r.end for r in run.results],
    }


# ------------------------------------------------------------------ sources


def _times(meta: dict[str, Any], size: int) -> ChunkTimes | None:
    """The chunk times stored in ``meta`` for the first ``size`` bytes, or None (none, or unreadable)."""
    try:
        return ChunkTimes.from_json(meta["chunk_times"]).cut(size) if meta.get("chunk_times") else None
    except TimingError:
        return None


def _loaded(
    kind: str, name: str, data: bytes, tools: list[Any] | None, run: DryRun, stored_id: str | None, title: str, times: ChunkTimes | None = None
) -> LoadedSource:
    what = "Uploaded" if kind == "upload" else "Recorded"
    description = f"{what} {run.dialect or 'provider'} stream, replayed through the assembler" + (
        "; arguments are checked against the request's tool schemas." if tools else "; no tools, so names and schemas are not checked."
    )
    return LoadedSource(kind, name, title, description, data, run.count, run.dialect, tools, None, stored_id, times)  # type: ignore[arg-type]


def _registry(tools: list[Any] | None, name: str) -> ToolRegistry | None:
    if tools is None:
        return None
    try:
        return ToolRegistry.from_tools(tools).ensure_usable()
    except RegistryError as exc:  # names the tool and the place, never a schema value
        raise SourceError(f"{name}: the request's tools cannot be used: {exc}") from None
    except Exception as exc:  # a shape the registry does not expect: its text could quote the request
        raise SourceError(f"{name}: the request's tools cannot be used ({type(exc).__name__}).") from None


def _pieces(name: str, data: bytes, tools: list[Any] | None) -> Iterator[tuple[str, bytes, list[Any] | None, dict[str, Any]]]:
    """``(name, body, tools, meta)`` per stream in the input (one, or one per HAR entry)."""
    fmt = detect_format(data)
    if fmt != "har":
        yield name, data, tools, {"format": fmt}
        return
    try:
        entries = read_har(data, name)
    except CaptureError as exc:
        raise SourceError(f"Not a readable HAR export. {redact_url(str(exc))}") from None  # an entry's URL may carry keys
    if not entries:
        raise SourceError(f"{name}: the HAR export has no streaming entry (text/event-stream, event stream or JSON Lines response).")
    for entry in entries:
        meta = {"format": detect_format(entry.body), "har": {"entry": entry.name.rsplit("#", 1)[-1], "method": entry.method, "url": redact_url(entry.url), "status": entry.status}}
        if entry.times is not None:  # the _chunks extension: each chunk's arrival, kept packed
            meta["chunk_times"] = entry.times.to_json()
        # the export's strings are stored and shown: lone surrogates escaped, as in a stream's ops
        yield escape_surrogates(entry.name), entry.body, tools if tools is not None else escaped_strings(entry.tools), escaped_strings(meta)


def ingest(
    filename: str, data: bytes, tools_raw: bytes | None, tools_name: str, config: AssembleConfig, store: Store, *, origin: str = "file"
) -> list[LoadedSource]:
    """Check, store (kind ``"upload"``) and load an upload or paste; one source per stream.

    Raises :class:`SourceError` with a message naming the file, line and byte. Nothing is
    stored unless every stream in the input can be read.
    """
    name = Path(filename or "upload").name[:200] or "upload"
    if bulk.is_blank(data):
        raise SourceError(f"{name} is empty: upload a raw SSE capture, JSON Lines, a HAR export or a Bedrock event stream.", status=400)
    if tools_raw is not None and len(tools_raw) > MAX_TOOLS_BYTES:
        raise SourceError(f"Tools file {tools_name} is larger than 1 MiB.", status=413)
    tools = parse_tools(tools_raw, tools_name) if tools_raw else None
    checked: list[tuple[str, bytes, list[Any] | None, dict[str, Any], DryRun]] = []
    for piece_name, body, piece_tools, meta in _pieces(name, data, tools):
        readable, tail = readable_part(body, meta["format"])
        if bulk.is_blank(readable):
            where = f" (cut off at {piece_name}:{tail.line}, byte {tail.byte})" if tail else ""
            raise SourceError(f"{piece_name} holds no complete provider event{where}.", status=422)
        run = dry_run(readable, piece_name, config, _registry(piece_tools, piece_name))  # positions as in the file
        meta = {**meta, "origin": origin, "cut": tail.to_json() if tail else None}
        head = _body_start(body) if meta["format"].startswith("http+") else 0
        if head:  # an HTTP head (curl -i) may carry cookies or tokens: never stored
            meta["http_head"] = {"bytes": head, "lines": body.count(b"\n", 0, head)}
            body = body[head:]
        checked.append((piece_name, body, piece_tools, meta, run))
    out: list[LoadedSource] = []
    for piece_name, body, piece_tools, meta, run in checked:
        sid = store.save(kind="upload", name=piece_name, body=body, tools=piece_tools, meta=meta, summary=summary(run))
        readable, _ = readable_part(body, meta["format"])
        title = f"{'Paste' if origin == 'paste' else 'Upload'}: {piece_name}"
        out.append(_loaded("upload", piece_name, readable, piece_tools, run, sid, title, _times(meta, len(readable))))
    return out


def load_stored(stored: StoredSource, config: AssembleConfig) -> LoadedSource:
    """A stored source (with its body) as a replayable source; :class:`SourceError` if unreadable."""
    assert stored.body is not None
    if stored.kind == "recording":
        from toollatch.web.live.recordings import (
            recording_source,  # the live layer knows how its recordings replay
        )

        return replace(recording_source(stored, config), kind="recording", stored_id=stored.id)
    fmt = str(stored.meta.get("format") or detect_format(stored.body))
    readable, _ = readable_part(stored.body, fmt)
    tools = stored.tools if isinstance(stored.tools, list) else None
    run = dry_run(readable, stored.name, config, _registry(tools, stored.name))
    kind = stored.kind if stored.kind in ("upload", "recording", "capture") else "upload"
    label = {"upload": "Paste" if stored.meta.get("origin") == "paste" else "Upload", "recording": "Recording", "capture": "Capture"}[kind]
    return _loaded(kind, stored.name, readable, tools, run, stored.id, f"{label}: {stored.name}", _times(stored.meta, len(readable)))
