"""Parsing one event payload (the provider's JSON envelope) as ``json.loads`` does, faster.

Every framing (SSE, JSON Lines) parses each event's payload text once; this is the parse.
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Callable
from typing import Any

import orjson

from toollatch.wire import deepjson
from toollatch.wire.collector import collector_paused

__all__ = ["LARGE_PAYLOAD_CHARS", "collector_paused", "parse_envelope", "parse_plain", "read_is_plain"]

#: ``json.loads`` without its per-call checks.
_raw_decode = json.JSONDecoder().raw_decode
#: What JSON allows around a value (RFC 8259 ``ws``); ``str.isspace`` allows more.
_JSON_WS = " \t\n\r"
_orjson_loads = orjson.loads
#: Digits mapped to ``0`` so that a run of 19 (an integer orjson may not keep exact) is one
#: ``in`` test, and ``{`` mapped to ``[`` so that the arrays and objects opened are one count.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789{", b"000000000[")
_LONG_DIGITS = b"0" * 19
#: Arrays and objects opened in a payload at or above which the standard library parses it:
#: its nesting limit is Python's recursion limit (less the stack in use), orjson's 1024,
#: so only a payload well under both may take orjson's result.
_NESTING_GUARD = 200


def _stdlib_parse(text: str) -> Any:
    """``json.loads(text)``, skipping its checks for the common payload."""
    try:  # the common payload: one JSON value, JSON whitespace at most after it
        value, end = _raw_decode(text)
    except json.JSONDecodeError:
        end = -1
    if end != len(text) and (end < 0 or text[end:].strip(_JSON_WS)):
        value = json.loads(text)  # whitespace in front, or an error to report: the full parse
    return value


#: Payload characters above which the pure-Python scanner parses (:func:`_parse_large`).
LARGE_PAYLOAD_CHARS = 512 * 1024


def _parse_large(text: str) -> Any:
    """``json.loads(text)`` by the standard library's pure-Python scanner (``json.loads``'
    reference implementation: the same values), for a payload of megabytes: ``json.loads``
    in C is one call that holds the GIL for the whole parse (a quarter of a second for
    10 MB of small objects), which freezes every other thread of the process, an event
    loop too, while this one gives the GIL up every few milliseconds. Its errors are
    ``json.loads``' own (the same messages and positions); only nesting deeper than Python
    code recurses (some 300 levels) is parsed again, by :func:`toollatch.wire.deepjson.loads`:
    Python code too, without recursion, which raises :class:`RecursionError` only beyond
    :data:`~toollatch.wire.deepjson.MAX_DEPTH` levels (where ``json.loads`` in C goes on to
    about 1,000 from a shallow stack). A text with any non-ASCII character is parsed by
    :func:`~toollatch.wire.deepjson.loads` from the start: the pure-Python scanner's number
    pattern takes any Unicode digit (``[1١]`` would be ``[11]``), where ``json.loads`` in C
    takes ``0``-``9`` only. The garbage collector is paused meanwhile
    (:func:`collector_paused`)."""
    if not text.isascii():  # a BOM, or non-ASCII digits the scanner's pattern would read
        with collector_paused():
            return deepjson.loads(text)
    decoder = json.JSONDecoder()  # one per call: the pure-Python scanner keeps a memo
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    with collector_paused():
        try:
            return decoder.decode(text)  # json.loads(text) but for the scanner: its errors too
        except RecursionError:  # nested deeper than Python code recurses
            return deepjson.loads(text)


def parse_envelope(text: str) -> Any:
    """The JSON value of one event payload (``text``: the whole payload, characters), as
    ``json.loads(text)`` gives it, raising what it raises (:class:`json.JSONDecodeError`,
    :class:`RecursionError`) with the same messages.

    orjson parses where its result is ``json.loads``'s; the standard library parses
    wherever orjson refuses the text (lone surrogates, ``NaN``/``Infinity``, numbers beyond
    a double, nesting beyond orjson's limit, every malformed payload, so errors are always
    the standard library's), wherever the text holds a run of 19 or more digits (orjson
    turns an integer beyond 64 bits into a float; a long digit run inside a string only
    costs the slower parse) and wherever it opens 200 or more arrays and objects (the two
    nesting limits differ: ``json.loads`` raises :class:`RecursionError` near Python's
    recursion limit, orjson only beyond 1024 levels). Duplicate keys keep the last value in both. Argument text is
    never parsed here: its adapters re-check the payload strictly. A payload over
    :data:`LARGE_PAYLOAD_CHARS` characters is parsed by the pure-Python scanner
    (:func:`_parse_large`), which lets other threads run meanwhile; nested deeper than
    :data:`~toollatch.wire.deepjson.MAX_DEPTH` (900) levels, it raises :class:`RecursionError`.
    """
    if len(text) > LARGE_PAYLOAD_CHARS:
        return _parse_large(text)
    raw = text.encode("utf-8", "surrogatepass")
    marked = raw.translate(_DIGITS_AS_ZERO)
    # a valid text nested n levels deep holds n openers and n closers: under twice the guard
    # in bytes, it cannot reach the guard (an invalid one is refused by orjson, then parsed below)
    if _LONG_DIGITS not in marked and (len(raw) < 2 * _NESTING_GUARD or marked.count(b"[") < _NESTING_GUARD):
        try:  # the bytes, not the text: orjson reads them without encoding again
            return _orjson_loads(raw)  # a lone surrogate is not UTF-8 there either: refused alike
        except orjson.JSONDecodeError:
            pass
    return _stdlib_parse(text)


def read_is_plain(raw: bytes) -> bool:
    """True when every payload cut whole from ``raw`` (one read of the input, bytes) may
    take orjson's result without :func:`parse_envelope`'s checks: ``raw`` opens fewer
    than 200 arrays and objects (or is under 400 bytes: a valid payload opening 200 needs
    200 closers too, an invalid one orjson refuses), holds no run of 19 digits, and is at most
    :data:`LARGE_PAYLOAD_CHARS` bytes long, so no part of it does otherwise or is longer.
    One scan per read instead of one per payload; a read of many events usually opens
    more and then each payload is checked on its own."""
    if len(raw) > LARGE_PAYLOAD_CHARS:
        return False
    marked = raw.translate(_DIGITS_AS_ZERO)  # one pass: digits as 0, each opener as "["
    return _LONG_DIGITS not in marked and (len(raw) < 2 * _NESTING_GUARD or marked.count(b"[") < _NESTING_GUARD)


#: :func:`parse_envelope` of a payload cut whole from a read that :func:`read_is_plain`
#: accepted: orjson's result (it reads the text without encoding it again), or
#: :class:`orjson.JSONDecodeError` (a :class:`ValueError`) where orjson refuses the text;
#: :func:`parse_envelope` then gives the value or the error. ``(text: str) -> Any``.
parse_plain: Callable[[str], Any] = _orjson_loads
