"""JSON from outside: a value, or what is wrong with it, never an exception.

``json.loads`` refuses hostile input in four ways: ``JSONDecodeError`` for bad syntax, a
plain ``ValueError`` for an integer over Python's digit limit (4300 digits by default),
``RecursionError`` for deep nesting, and ``UnicodeDecodeError`` for bytes that are not
UTF-8. Every reader of a body, file or payload a user, an upstream or an SDK controls goes
through :func:`parse_json`, so none of them lets one of these escape as a 500 or a lost
stream. The problem strings name the fault and its place, never the text.
"""

from __future__ import annotations

import json
import reprlib
from typing import Any

_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlevel, _REPR.maxlist, _REPR.maxdict = 60, 60, 2, 4, 4


def short(value: Any, limit: int = 80) -> str:
    """``repr`` of a name or value read from an input file, cut to about ``limit``
    characters: an error message naming it stays one readable line however large the
    value (a YAML alias can expand a few lines into billions of items)."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_problem(exc: BaseException) -> str:
    """What is wrong with a payload ``json.loads`` refused, without quoting it: the
    decoder's message, or for the other errors it raises (an integer over Python's digit
    limit is a plain ValueError; deep nesting a RecursionError) a fixed description."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg.removesuffix(" at")
    if isinstance(exc, RecursionError):
        return "nesting too deep"
    return "a number too long to convert"


def parse_json(data: str | bytes | bytearray) -> tuple[Any, str | None]:
    """``(value, None)`` for one JSON document, else ``(None, problem)``.

    Bytes must be UTF-8 (a byte order mark is skipped). ``problem`` completes a sentence
    "X is …": ``not UTF-8 (byte 12)``, ``not JSON (Expecting value at line 1, column 5)``,
    ``not JSON (nesting too deep)``, ``not JSON (a number too long to convert)``. It never
    quotes the input. Anything but ``str``/``bytes`` gives ``not JSON text (got int)``.
    """
    if isinstance(data, (bytes, bytearray)):
        try:
            text = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            return None, f"not UTF-8 (byte {exc.start})"
    elif isinstance(data, str):
        text = data
    else:
        return None, f"not JSON text (got {type(data).__name__})"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({json_problem(exc)} at line {exc.lineno}, column {exc.colno})"
    except (ValueError, RecursionError) as exc:
        return None, f"not JSON ({json_problem(exc)})"


__all__ = ["json_problem", "parse_json"]
