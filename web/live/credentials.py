"""Credentials in requests: which headers and query values are secret, and scrubbing them.

The rule for URLs covers the kind, not a list of names: **every query value is a
credential** except those of a short allow-list of parameters known to carry none
(:data:`HARMLESS_QUERY`: ``api-version``, ``alt``, ``stream``, the built-in mock's
options, the dashboard's own filters). So Gemini's ``key``, Azure APIM's
``subscription-key``, ``x-goog-api-key``, OAuth's ``code`` and ``client_secret``, SAS
``sig`` and names nobody has thought of yet are all replaced. A URL's userinfo
(``https://user:password@host``) and fragment are replaced as well.

:func:`redact_url` applies that rule to any text (a URL, a request path, a log line, an
error message). :func:`secret_values` lists the exact credential values a request carried
(headers named like a credential, every non-harmless query value) with their obvious
encodings (after ``Bearer``/``Basic``, the user and password inside basic auth, percent-
and JSON-escaped forms), so that an upstream echoing one can be scrubbed from everything
a session shows, stores or logs (:func:`scrub_bytes`, :func:`scrub_text`, and
:func:`scrub_value` for assembled values such as committed arguments).
:func:`describe_error` turns an upstream's error body into a message with key-like
strings masked besides.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from contextvars import ContextVar
from typing import Any
from urllib.parse import quote, unquote, unquote_plus

import httpx

from toollatch.core import jsontext
from toollatch.core.model import escape_surrogates
from toollatch.wire.untrusted import parse_json

#: Credential headers: forwarded upstream, never stored, logged or shown.
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "set-cookie", "x-amz-security-token"}
)
_SECRET_NAME = re.compile(r"key|token|secret|auth|cookie|session|password|credential|signature", re.IGNORECASE)
#: Query parameters whose values are kept in logs and messages: known to carry no credential.
HARMLESS_QUERY = frozenset(
    {
        "api-version", "api_version", "alt", "stream", "beta",  # provider APIs
        "status", "delay", "chunk", "drop",  # the built-in mock's options
        "a", "b", "tool", "verdict", "quirk",  # the dashboard's own pages
    }
)
#: What a scrubbed value is replaced by.
REDACTED = "[redacted]"
#: Values shorter than this (bytes) are not scrubbed from bodies: too likely to be ordinary text.
MIN_SECRET_BYTES = 8

_QUERY_PAIR = re.compile(r"([?&;])([^=&;?#\s\"'<>]+)=([^&;#\s\"'<>)]*)")
#: A query pair written percent-encoded into a path (``/x%3Fkey%3Dvalue``): separator, name, value.
_ENCODED_PAIR = re.compile(
    r"(%3[Ff]|%26|%3[Bb])((?:[^%=&;?#\s\"'<>]|%(?!3[Dd])[0-9A-Fa-f]{2})+)%3[Dd]((?:[^%&;#\s\"'<>)]|%(?!26|3[Bb]|23)[0-9A-Fa-f]{2})*)"
)
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@?#\"'<>]+@")
_FRAGMENT = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s#\"'<>]*)#[^\s\"'<>]+")


def is_secret_header(name: str) -> bool:
    """True for a header that carries a credential (by name: a list plus a name pattern)."""
    return name.lower() in SECRET_HEADERS or bool(_SECRET_NAME.search(name))


def is_harmless_query(name: str) -> bool:
    """True for a query parameter whose value may be shown (see :data:`HARMLESS_QUERY`)."""
    return unquote_plus(name).strip().lower() in HARMLESS_QUERY


def redact_url(text: str) -> str:
    """``text`` with every query value but the harmless ones, URL userinfo and URL fragments
    replaced by ``[redacted]``; works on a whole URL, a path with a query, or free text. A
    query written percent-encoded into a path (``%3Fkey%3D...``, as an access log prints
    it) is a query too."""
    text = _USERINFO.sub(rf"\1{REDACTED}@", text)
    text = _FRAGMENT.sub(rf"\1#{REDACTED}", text)

    def value(match: re.Match[str]) -> str:
        sep, name, val = match.groups()
        return match.group(0) if is_harmless_query(name) or not val else f"{sep}{name}={REDACTED}"

    def encoded(match: re.Match[str]) -> str:
        sep, name, val = match.groups()
        return match.group(0) if is_harmless_query(unquote(name)) or not val else f"{sep}{name}%3D{REDACTED}"

    return _ENCODED_PAIR.sub(encoded, _QUERY_PAIR.sub(value, text))


def _encodings(value: str) -> list[str]:
    """``value`` and the forms an upstream might echo it in."""
    forms = [value]
    scheme, _, rest = value.partition(" ")
    if rest.strip():
        forms.append(rest.strip())  # after Bearer, Basic, token …
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(rest.strip(), validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                decoded = ""
            if decoded:
                forms += [decoded, *decoded.split(":", 1)]  # user:password, and each part
    return [v for form in forms for v in (form, quote(form, safe=""), json.dumps(form)[1:-1])]


def secret_values(headers: list[tuple[str, str]], query: list[tuple[str, str]] | None = None) -> list[str]:
    """Credential values a request carried, with their obvious encodings, to scrub.

    ``headers``: the request's header pairs (only credential headers are read);
    ``query``: its decoded query pairs (every value but those of :data:`HARMLESS_QUERY`).
    Values shorter than :data:`MIN_SECRET_BYTES` are left out (they would match ordinary text).
    """
    found: list[str] = []
    for name, value in headers:
        if not is_secret_header(name):
            continue
        found += _encodings(value)
        if name.lower() in ("cookie", "set-cookie"):
            found += [part.split("=", 1)[-1].strip() for part in value.split(";")]
    for name, value in query or []:
        if not is_harmless_query(name):
            found += _encodings(value)
    # Longest first: a value that contains another is replaced whole.
    kept = [v for v in dict.fromkeys(found) if len(v.encode("utf-8", "ignore")) >= MIN_SECRET_BYTES]
    return sorted(kept, key=len, reverse=True)


def scrub_bytes(body: bytes, secrets: list[str]) -> tuple[bytes, bool]:
    """``body`` with every value of ``secrets`` (see :func:`secret_values`) replaced by
    ``[redacted]``; also says whether anything was replaced."""
    hit = False
    for value in secrets:
        raw = value.encode("utf-8", "ignore")
        if len(raw) >= MIN_SECRET_BYTES and raw in body:
            body, hit = body.replace(raw, REDACTED.encode()), True
    return body, hit


def scrub_text(text: str, secrets: list[str]) -> str:
    """``text`` with every value of ``secrets`` replaced by ``[redacted]``."""
    for value in secrets:
        if len(value.encode("utf-8", "ignore")) >= MIN_SECRET_BYTES and value in text:
            text = text.replace(value, REDACTED)
    return text


def scrub_value(value: Any, secrets: list[str]) -> Any:
    """A copy of a JSON-like ``value`` (dicts, lists, strings, numbers; ``bytes`` too) with
    every value of ``secrets`` replaced by ``[redacted]`` in each string and object key, at
    any depth. Scrubbing the assembled value catches a credential the upstream echoed split
    over several fragments, which no single event's text holds whole."""
    if not secrets:
        return value
    if isinstance(value, bytes):
        return scrub_bytes(value, secrets)[0]
    return jsontext.rebuild(value, lambda v: scrub_text(v, secrets) if isinstance(v, str) else v, lambda k: scrub_text(k, secrets))


#: Key-like tokens: a known key prefix, or a 32+ character run of letters, digits, ``_`` and
#: ``-`` holding a digit (a name such as a scenario or model id made of words is left alone).
_TOKENISH = re.compile(r"\b(?:sk|pk|rk|key|AIza)[-_A-Za-z0-9]{6,}|(?=[A-Za-z_\-]*\d)[A-Za-z0-9_\-]{32,}")


def describe_error(status: int, body: bytes) -> str:
    """``Upstream answered 404: not_found_error: …`` from a provider error body (at most 300
    characters of detail); anything that looks like a key or token (providers echo masked
    keys) is replaced. The exact forwarded values are scrubbed from ``body`` beforehand, by
    the live source that holds it."""
    detail = ""
    doc, _ = parse_json(body)
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code") or ""
        detail = f"{kind}: {error.get('message') or ''}".strip(": ")
    elif isinstance(error, str):
        detail = error
    detail = _TOKENISH.sub("[redacted]", escape_surrogates(detail))  # shown and stored: valid Unicode
    detail = detail if len(detail) <= 300 else detail[:299] + "…"
    return f"Upstream answered {status}" + (f": {detail}" if detail else ".")


def _is_url(value: object) -> bool:
    """An ``httpx.URL``, or the ``URL`` of another httpx build (``httpx2``)."""
    return isinstance(value, httpx.URL) or (type(value).__name__ == "URL" and type(value).__module__.split(".")[0].startswith("httpx"))


#: The credential values (:func:`secret_values`) of the request being forwarded, set by the
#: proxy in that request's own context: every log line made while it is handled (httpx's
#: request line with the upstream's reason phrase, httpcore's response head) has them replaced.
FORWARDED: ContextVar[tuple[str, ...]] = ContextVar("toollatch_forwarded", default=())

_BYTES_REPR = r"b'(?:[^'\\]|\\.)*'|b\"(?:[^\"\\]|\\.)*\""
#: A header pair as httpcore logs a response head: ``(b'Name', b'value')``.
_HEADER_REPR = re.compile(rf"\(({_BYTES_REPR}), ({_BYTES_REPR})\)")


def mask_header_reprs(text: str) -> str:
    """``text`` with the value of every credential header (:func:`is_secret_header`) in a
    logged header list (``(b'Set-Cookie', b'...')``) replaced by ``[redacted]``."""

    def pair(match: re.Match[str]) -> str:
        name = match.group(1)[2:-1]
        return f"({match.group(1)}, b'{REDACTED}')" if is_secret_header(name) else match.group(0)

    return _HEADER_REPR.sub(pair, text) if "(b" in text else text


def _clean(text: str, forwarded: list[str]) -> str:
    return scrub_text(mask_header_reprs(redact_url(text)), forwarded)


class SecretQueryFilter(logging.Filter):
    """Cleans log records (uvicorn's access log, httpx's request log, httpcore's trace):
    query values by :func:`redact_url`, credential headers in a logged header list by
    :func:`mask_header_reprs`, and the values of :data:`FORWARDED`; the record's argument
    tuple stays in shape for its formatter."""

    def filter(self, record: logging.LogRecord) -> bool:
        forwarded = list(FORWARDED.get())
        if isinstance(record.msg, str):
            record.msg = _clean(record.msg, forwarded)
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(_clean(str(a), forwarded) if isinstance(a, str) or _is_url(a) else a for a in record.args)
        return True


#: Loggers that print request URLs, response heads or messages built from them. ``httpx2``
#: (the httpx the Anthropic SDK and Starlette's test client use) logs like httpx does: an
#: agent or a test client run in the dashboard's process logs no query credential either.
#: A filter applies to its own logger only, so httpcore's are named one by one.
FILTERED_LOGGERS = (
    "uvicorn.access", "uvicorn.error", "httpx", "httpx2", "toollatch.proxy", "toollatch.web",
    *(f"{core}.{part}" for core in ("httpcore", "httpcore2") for part in ("connection", "http11", "http2", "proxy", "socks")),
)


def install_log_filters() -> None:
    """Add :class:`SecretQueryFilter` to :data:`FILTERED_LOGGERS` (once each)."""
    for name in FILTERED_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, SecretQueryFilter) for f in logger.filters):
            logger.addFilter(SecretQueryFilter())
