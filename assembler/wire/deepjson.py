"""``json.loads`` without recursion: one loop and a stack of open arrays and objects.

The standard library's pure-Python scanner (``json.scanner.py_make_scanner``, the
reference for ``json.loads``) calls itself once per array or object opened, three Python
frames a level, so it stops with :class:`RecursionError` some 300 levels down, where
``json.loads`` in C goes on to about 1,000. Parsing such a payload again in C holds the
GIL for the whole parse (a 10 MB payload: half a second, every other thread stopped).
:func:`loads` follows the pure-Python scanner step by step (``json.decoder.JSONObject``,
``JSONArray``, ``JSONDecoder.decode``), with the same values and the same errors, messages
and positions, but keeps its open arrays and objects in a list, so it is Python code from
start to end and gives the GIL up every few milliseconds however deep the text.
"""

from __future__ import annotations

import json.decoder
import re
from json import JSONDecodeError
from typing import Any

__all__ = ["MAX_DEPTH", "loads"]

#: Arrays and objects open at once beyond which :func:`loads` raises :class:`RecursionError`,
#: as ``json.loads`` does near Python's recursion limit (1,000: 994 levels from a shallow
#: stack, fewer from a deeper one). A fixed figure below that, so that every thread and
#: every caller gets the same verdict for one text, and a value it returns can still be
#: walked by recursive code (``json.dumps``) from a stack some frames deep.
MAX_DEPTH = 900

_w = json.decoder.WHITESPACE.match
_WS = json.decoder.WHITESPACE_STR
_scanstring = json.decoder.scanstring
#: ``json.scanner.NUMBER_RE`` but ASCII digits only: its ``\d`` also takes ``"١"`` (Arabic-Indic
#: one) and ``int()`` reads it, where ``json.loads`` in C refuses every digit but ``0``-``9``.
_number = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?").match
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _Open:
    """An array (``key`` None) or object (``key``: the key whose value comes next) being read: its items so far."""

    __slots__ = ("items", "key")

    def __init__(self, items: list[Any], key: str | None) -> None:
        self.items = items
        self.key = key


def _key(s: str, end: int, memo: dict[str, str]) -> tuple[str, int]:
    """The object key whose string starts at ``end`` (just past its quote) and the index
    just past its ``:`` and the whitespace after it (``JSONObject``'s steps)."""
    key, end = _scanstring(s, end, True)
    key = memo.setdefault(key, key)
    if s[end : end + 1] != ":":
        end = _w(s, end).end()
        if s[end : end + 1] != ":":
            raise JSONDecodeError("Expecting ':' delimiter", s, end)
    return key, _after_separator(s, end + 1)


def _after_separator(s: str, end: int) -> int:
    """The index past the whitespace at ``end``, just after a ``:`` or ``,`` (the decoder's
    own steps: one or two characters looked at before the pattern)."""
    try:
        if s[end] in _WS:
            end += 1
            if s[end] in _WS:
                end = _w(s, end + 1).end()
    except IndexError:
        pass
    return end


def _scalar(s: str, idx: int, nextchar: str) -> tuple[Any, int]:
    """A string, literal or number at ``idx`` (``py_make_scanner``'s ``_scan_once`` but for
    arrays and objects); ``Expecting value`` where there is none."""
    if nextchar == '"':
        return _scanstring(s, idx + 1, True)
    if nextchar == "n" and s[idx : idx + 4] == "null":
        return None, idx + 4
    if nextchar == "t" and s[idx : idx + 4] == "true":
        return True, idx + 4
    if nextchar == "f" and s[idx : idx + 5] == "false":
        return False, idx + 5
    m = _number(s, idx)
    if m is not None:
        integer, frac, exp = m.groups()
        if frac or exp:
            return float(integer + (frac or "") + (exp or "")), m.end()
        return int(integer), m.end()
    if nextchar == "N" and s[idx : idx + 3] == "NaN":
        return _CONSTANTS["NaN"], idx + 3
    if nextchar == "I" and s[idx : idx + 8] == "Infinity":
        return _CONSTANTS["Infinity"], idx + 8
    if nextchar == "-" and s[idx : idx + 9] == "-Infinity":
        return _CONSTANTS["-Infinity"], idx + 9
    raise JSONDecodeError("Expecting value", s, idx)


def loads(s: str) -> Any:
    """``json.loads(s)`` for a ``str`` (characters) with the default decoder: the same value,
    or the same :class:`json.JSONDecodeError` (message and position) or :class:`ValueError`
    (an integer over ``sys.get_int_max_str_digits()`` digits); :class:`RecursionError` for
    more than :data:`MAX_DEPTH` arrays and objects open at once (``json.loads``' message).
    A text starting with a BOM is refused as ``json.loads`` refuses it. Never recurses."""
    if s.startswith("\ufeff"):
        raise JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", s, 0)
    memo: dict[str, str] = {}
    stack: list[_Open] = []
    idx = _w(s, 0).end()
    while True:
        # scan one value at idx; value and end once it is whole
        try:
            nextchar = s[idx]
        except IndexError:
            raise JSONDecodeError("Expecting value", s, idx) from None
        if nextchar == "{" or nextchar == "[":
            if len(stack) >= MAX_DEPTH:
                kind = "object" if nextchar == "{" else "array"
                raise RecursionError(f"maximum recursion depth exceeded while decoding a JSON {kind} from a unicode string")
            end = idx + 1
            following = s[end : end + 1]
            if nextchar == "{":
                if following != '"':
                    if following in _WS:
                        end = _w(s, end).end()
                        following = s[end : end + 1]
                    if following == "}":
                        value: Any = {}
                        end += 1
                    elif following != '"':
                        raise JSONDecodeError("Expecting property name enclosed in double quotes", s, end)
                if following == '"':
                    key, idx = _key(s, end + 1, memo)
                    stack.append(_Open([], key))
                    continue
            else:
                if following in _WS:
                    end = _w(s, end + 1).end()
                    following = s[end : end + 1]
                if following != "]":
                    stack.append(_Open([], None))
                    idx = end
                    continue
                value = []
                end += 1
        else:
            value, end = _scalar(s, idx, nextchar)
        # the value is whole: hand it to the array or object it is in, closing those it ends
        while True:
            if not stack:
                end = _w(s, end).end()
                if end != len(s):
                    raise JSONDecodeError("Extra data", s, end)
                return value
            top = stack[-1]
            if top.key is not None:  # an object: JSONObject's steps after a value
                top.items.append((top.key, value))
                try:
                    nextchar = s[end]
                    if nextchar in _WS:
                        end = _w(s, end + 1).end()
                        nextchar = s[end]
                except IndexError:
                    nextchar = ""
                end += 1
                if nextchar == "}":
                    value = dict(top.items)
                    stack.pop()
                    continue
                if nextchar != ",":
                    raise JSONDecodeError("Expecting ',' delimiter", s, end - 1)
                end = _w(s, end).end()
                nextchar = s[end : end + 1]
                end += 1
                if nextchar != '"':
                    raise JSONDecodeError("Expecting property name enclosed in double quotes", s, end - 1)
                top.key, idx = _key(s, end, memo)
                break
            top.items.append(value)  # an array: JSONArray's steps after a value
            nextchar = s[end : end + 1]
            if nextchar in _WS:
                end = _w(s, end + 1).end()
                nextchar = s[end : end + 1]
            end += 1
            if nextchar == "]":
                value = top.items
                stack.pop()
                continue
            if nextchar != ",":
                raise JSONDecodeError("Expecting ',' delimiter", s, end - 1)
            idx = _after_separator(s, end)
            break
