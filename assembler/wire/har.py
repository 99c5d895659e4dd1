"""HAR 1.2 exports (Chrome, Firefox, mitmproxy) → one capture per streaming entry.

Provider-independent: an entry is *streaming* when its response MIME type is an event
stream (``text/event-stream``, ``application/vnd.amazon.eventstream``) or JSON Lines, or
its request body asked for ``"stream": true``. The entry's response body becomes the
capture (``content.encoding: base64`` decoded); the ``tools`` array of its request body
becomes the registry. Headers and cookies are never read, so nothing of them is kept; of
the request URL only scheme, host, port and path are kept or quoted (:func:`~toollatch.wire.urls.scrub_url`:
no userinfo, query or fragment, where credentials travel), in the entries and in every error.

HAR is one JSON document, so it is parsed whole (the file's size bounds memory).

**Chunk timing extension.** HAR 1.2 keeps a response body whole; toollatch writes (and
reads back) each chunk as it arrived in ``response.content._chunks`` (custom fields start
with ``_``, as HAR 1.2 allows): ``[{"t": seconds since the first byte, "text": str} |
{"t": ..., "base64": str}, ...]``, the chunks joined being ``content.text``; the entry's
``timings.wait`` (ms) is the time to first byte.
:func:`write_har` makes such a file; :func:`read_har` returns the times in
:attr:`HarStream.times` (None when an entry has no ``_chunks``; an entry whose chunks do
not join to its body is an error naming it).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from toollatch.wire.capture import CaptureError
from toollatch.observe.timing import ChunkTimes
from toollatch.wire.untrusted import json_problem, parse_json
from toollatch.wire.urls import scrub_url

_STREAM_TYPES = ("event-stream", "eventstream", "jsonl", "ndjson", "x-ndjson")
#: Characters of a (scrubbed) request URL quoted in an error message, and kept, at most.
MAX_URL_QUOTED = 200
MAX_URL_KEPT = 2048
#: Characters of a request method kept, at most.
MAX_METHOD = 16


@dataclass(frozen=True, slots=True)
class HarStream:
    """One streaming exchange: ``body`` is the response bytes, ``tools`` the request's tools.

    ``url`` is the request URL without userinfo, query or fragment (at most
    :data:`MAX_URL_KEPT` characters); ``method`` at most :data:`MAX_METHOD`.
    """

    name: str
    method: str
    url: str
    status: int
    body: bytes
    tools: list[Any] | None
    times: ChunkTimes | None = None


def is_har(head: bytes) -> bool:
    """True if ``head`` (the first KiB or so) looks like a HAR document, not JSON Lines."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith(b"{"):
        return False
    first = text.split(b"\n", 1)[0].strip()
    complete_line = first.endswith(b"}")
    return b'"log"' in text[:4096] and (not complete_line or b'"entries"' in first)


def read_har(data: bytes, name: str = "<input>") -> list[HarStream]:
    """The streaming entries of a HAR export, in file order; raises :class:`CaptureError`.

    Errors name the file and the entry (0-based, as in ``log.entries``); a request URL in a
    message is scrubbed like the stored one.
    """
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise CaptureError(f"{name}: HAR is not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise CaptureError(f"{name}:{exc.lineno} (column {exc.colno}): HAR is not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # an integer over the digit limit; deep nesting
        raise CaptureError(f"{name}: HAR is not valid JSON ({json_problem(exc)})") from None
    entries = doc.get("log", {}).get("entries") if isinstance(doc, dict) and isinstance(doc.get("log"), dict) else None
    if not isinstance(entries, list):
        raise CaptureError(f"{name}: not a HAR export (no log.entries)")
    streams: list[HarStream] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        request = entry.get("request") if isinstance(entry.get("request"), dict) else {}
        response = entry.get("response") if isinstance(entry.get("response"), dict) else {}
        content = response.get("content") if isinstance(response.get("content"), dict) else {}
        body_json = _request_json(request)
        mime = str(content.get("mimeType") or "").lower()
        if not (any(t in mime for t in _STREAM_TYPES) or body_json.get("stream") is True):
            continue
        text = content.get("text")
        if not isinstance(text, str):
            where = scrub_url(request.get("url"), limit=MAX_URL_QUOTED) or "?"
            raise CaptureError(f"{name}: entry {i} ({where}): the response body was not saved in the HAR")
        if content.get("encoding") == "base64":
            try:
                body = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                raise CaptureError(f"{name}: entry {i}: response body is not valid base64") from None
        else:
            body = text.encode("utf-8", "surrogatepass")
        tools = body_json.get("tools") or None  # an empty list registers nothing: no registry
        tools = tools if isinstance(tools, list) else None
        method = request.get("method")
        method = method[:MAX_METHOD] if isinstance(method, str) and method else "?"
        url = scrub_url(request.get("url"), limit=MAX_URL_KEPT) or "?"
        status = response.get("status") if isinstance(response.get("status"), int) else 0
        times = _chunk_times(content.get("_chunks"), body, f"{name}: entry {i}")
        wait = entry["timings"].get("wait") if isinstance(entry.get("timings"), dict) else None
        if times is not None and isinstance(wait, (int, float)) and not isinstance(wait, bool) and 0 <= wait < 1e12:
            times.first_byte_s = wait / 1000  # HAR timings are in ms; -1 means not known
        streams.append(HarStream(f"{name}#entry{i}", method, url, status, body, tools, times))
    return streams


def _chunk_times(chunks: Any, body: bytes, where: str) -> ChunkTimes | None:
    """The ``_chunks`` extension of one entry, checked against its body; None without it."""
    if chunks is None:
        return None
    if not isinstance(chunks, list):
        raise CaptureError(f"{where}: response.content._chunks is not a list")
    pieces: list[tuple[float, bytes]] = []
    for k, chunk in enumerate(chunks):
        t = chunk.get("t") if isinstance(chunk, dict) else None
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not 0 <= t < 1e9:
            raise CaptureError(f"{where}: response.content._chunks[{k}].t is not a number of seconds")
        if isinstance(chunk.get("text"), str):
            data = chunk["text"].encode("utf-8", "surrogatepass")
        elif isinstance(chunk.get("base64"), str):
            try:
                data = base64.b64decode(chunk["base64"], validate=True)
            except (binascii.Error, ValueError):
                raise CaptureError(f"{where}: response.content._chunks[{k}].base64 is not valid base64") from None
        else:
            raise CaptureError(f"{where}: response.content._chunks[{k}] has neither text nor base64")
        pieces.append((float(t), data))
    times = ChunkTimes.from_chunks(pieces)
    if times.size != len(body) or b"".join(p for _, p in pieces) != body:
        raise CaptureError(f"{where}: response.content._chunks do not join to the response body")
    return times


def write_har(
    body: bytes,
    times: ChunkTimes | None,
    *,
    url: str,
    method: str = "POST",
    status: int = 200,
    mime: str = "text/event-stream",
    request: Any = None,
    started: float | None = None,
    comment: str | None = None,
) -> bytes:
    """One HAR 1.2 document with one entry: ``body`` as ``response.content.text`` (base64
    when not UTF-8) and, with ``times``, each chunk in ``response.content._chunks``.
    ``request``: the request body (JSON), as ``request.postData``; no header is written.
    ``started``: unix seconds of the request."""
    pieces: Iterable[tuple[float, bytes]] = times.split(body) if times is not None else ()
    content: dict[str, Any] = {"size": len(body), "mimeType": mime, **_text_field(body)}
    if times is not None:
        content["_chunks"] = [_timed_chunk(t, p) for t, p in pieces]
    when = datetime.fromtimestamp(started or 0, timezone.utc).isoformat().replace("+00:00", "Z")
    total_ms = round(1000 * ((times.first_byte_s or 0) + times.duration_s), 3) if times is not None else -1
    post = {"mimeType": "application/json", "text": json.dumps(request)} if request is not None else None
    entry: dict[str, Any] = {
        "startedDateTime": when,
        "time": max(total_ms, 0),
        "request": {"method": method, "url": url, "httpVersion": "HTTP/1.1", "cookies": [], "headers": [], "queryString": [],
                    **({"postData": post} if post else {}), "headersSize": -1, "bodySize": len(post["text"]) if post else 0},
        "response": {"status": status, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": [], "headers": [], "content": content,
                     "redirectURL": "", "headersSize": -1, "bodySize": len(body)},
        "cache": {},
        "timings": {"send": 0, "wait": round(1000 * (times.first_byte_s or 0), 3) if times is not None else -1,
                    "receive": round(1000 * times.duration_s, 3) if times is not None else -1},
    }
    if comment:
        entry["comment"] = comment
    doc = {"log": {"version": "1.2", "creator": {"name": "toollatch", "version": "1"}, "entries": [entry]}}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _timed_chunk(t: float, data: bytes) -> dict[str, Any]:
    """One ``_chunks`` item: ``text`` when the chunk is whole UTF-8, else ``base64``."""
    if _is_text(data):
        return {"t": round(t, 6), "text": data.decode("utf-8")}
    return {"t": round(t, 6), "base64": base64.b64encode(data).decode("ascii")}


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _text_field(data: bytes) -> dict[str, str]:
    if _is_text(data):
        return {"text": data.decode("utf-8")}
    return {"text": base64.b64encode(data).decode("ascii"), "encoding": "base64"}


def _request_json(request: dict[str, Any]) -> dict[str, Any]:
    post = request.get("postData") if isinstance(request.get("postData"), dict) else {}
    body, problem = parse_json(post.get("text") or "{}")  # a request body that is not JSON has no tools
    return body if problem is None and isinstance(body, dict) else {}

