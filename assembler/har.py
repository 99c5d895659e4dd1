"""HAR 1.2 exports (Chrome, Firefox, mitmproxy) → one capture per streaming entry.

Provider-independent: an entry is *streaming* when its response MIME type is an event
stream (``text/event-stream``, ``application/vnd.amazon.eventstream``) or JSON Lines, or
its request body asked for ``"stream": true``. The entry's response body becomes the
capture (``content.encoding: base64`` decoded); the ``tools`` array of its request body
becomes the registry. Headers and cookies are never read, so nothing of them is kept; of
the request URL only scheme, host, port and path are kept or quoted (:func:`~assembler.urls.scrub_url`:
no userinfo, query or fragment, where credentials travel), in the entries and in every error.

HAR is one JSON document, so it is parsed whole (the file's size bounds memory).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from .capture import CaptureError
from .untrusted import json_problem, parse_json
from .urls import scrub_url

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
        streams.append(HarStream(f"{name}#entry{i}", method, url, status, body, tools))
    return streams


def _request_json(request: dict[str, Any]) -> dict[str, Any]:
    post = request.get("postData") if isinstance(request.get("postData"), dict) else {}
    body, problem = parse_json(post.get("text") or "{}")  # a request body that is not JSON has no tools
    return body if problem is None and isinstance(body, dict) else {}

