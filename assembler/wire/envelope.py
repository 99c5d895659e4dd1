"""Parsing one event payload (the provider's JSON envelope) as ``json.loads`` does, faster.

Every framing (SSE, JSON Lines) parses each event's payload text once; this is the parse.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["parse_envelope"]

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
    never parsed here: its adapters re-check the payload strictly.
    """
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
