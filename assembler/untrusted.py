"""JSON from outside: a value, or what is wrong with it, never an exception.

``json.loads`` refuses hostile input in four ways: ``JSONDecodeError`` for bad syntax, a
plain ``ValueError`` for an integer over Python's digit limit (4300 digits by default),
``RecursionError`` for deep nesting, and ``UnicodeDecodeError`` for bytes that are not
UTF-8. Every reader of a body, file or payload a user, an upstream or an SDK controls goes
through :func:`parse_json`, so none of them lets one of these escape as a 500 or a lost
stream. The problem strings name the fault and its place, never the text.
:func:`map_leaves` walks a decoded value of any depth the decoder accepts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


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


def map_leaves(value: Any, leaf: Callable[[Any], Any] | None = None, key: Callable[[str], str] | None = None) -> Any:
    """A copy of a tree of dicts and lists (a decoded JSON value) with ``leaf`` applied to
    every other value and ``key`` to every object key (None: kept as they are). With an explicit stack: a value nested as deep as the decoder
    allows is copied without recursion (``copy.deepcopy`` and recursive walks overflow
    Python's stack far sooner)."""
    if not isinstance(value, (dict, list)):
        return value if leaf is None else leaf(value)
    top: Any = [None] * len(value) if isinstance(value, list) else {}
    stack = [(value, top)]
    while stack:
        src, dst = stack.pop()
        for k, v in src.items() if isinstance(src, dict) else enumerate(src):
            if key is not None and isinstance(src, dict):
                k = key(k)
            if isinstance(v, (dict, list)):
                shell: Any = [None] * len(v) if isinstance(v, list) else {}
                stack.append((v, shell))
                dst[k] = shell
            else:
                dst[k] = v if leaf is None else leaf(v)
    return top


__all__ = ["json_problem", "map_leaves", "parse_json"]
