"""JSON of any nesting depth: measure it without recursion, and serialise it without failing.

Python's ``json`` module recurses once per nesting level, in C and in Python alike, so a
value nested a few hundred levels deep can raise :class:`RecursionError` when it is
serialised from a deep call stack (a web framework, a template engine) even though it was
parsed fine elsewhere. Everything here is iterative:

* :func:`text_depth` — the nesting depth of JSON *text*, from its brackets outside strings
  (the latch refuses text deeper than ``max_tool_argument_depth`` before parsing it);
* :func:`value_depth` — the nesting depth of a parsed value;
* :func:`rebuild` — a copy of a parsed value, with a function applied to every leaf (a deep
  copy, or a copy with strings masked);
* :func:`dumps` — ``json.dumps`` with the same output, which falls back to an iterative
  encoder when the recursive one runs out of stack.

Depth counts containers: ``1`` is ``{}`` or ``[1]``, ``2`` is ``{"a": [1]}``; a scalar is ``0``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import Any

#: A JSON string token (escapes included); one left open runs to the end of the text.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def text_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text``, counting brackets outside
    strings. Exact for valid JSON; for other text an estimate (a string left open hides the
    rest). Never raises; linear in ``len(text)``. It is never more than the number of ``[``
    and ``{`` in ``text``, a cheaper bound to test first."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(0, max(accumulate(_STEP[c] for c in brackets), default=0))


def value_depth(value: Any) -> int:
    """The deepest nesting of dicts and lists (or tuples) in ``value``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth + 1)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            deepest = max(deepest, depth + 1)
            stack.extend((v, depth + 1) for v in item)
    return deepest


def rebuild(value: Any, leaf: Callable[[Any], Any] | None = None, key: Callable[[str], str] | None = None) -> Any:
    """A copy of ``value``: dicts and lists rebuilt (a tuple becomes a list), key order kept,
    every object key replaced by ``key(k)`` and every other value by ``leaf(value)`` (both
    kept as they are when not given). Iterative: any nesting depth the decoder accepts."""
    fn = leaf or (lambda v: v)
    if not isinstance(value, (dict, list, tuple)):
        return fn(value)
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        for k, v in source.items() if isinstance(source, dict) else enumerate(source):
            if isinstance(v, dict):
                new: Any = {}
                stack.append((v, new))
            elif isinstance(v, (list, tuple)):
                new = []
                stack.append((v, new))
            else:
                new = fn(v)
            if isinstance(target, dict):
                target[k if key is None else key(k)] = new
            else:
                target.append(new)
    return root


def copy_json(value: Any) -> Any:
    """A copy of a JSON value (dicts and lists rebuilt, a tuple as a list; as
    :func:`rebuild` without functions), by recursion while the nesting lets it: several
    times faster than :func:`rebuild` for an event's few levels."""
    try:
        return _copy(value)
    except RecursionError:
        return rebuild(value)


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) if isinstance(v, _CONTAINERS) else v for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_copy(v) if isinstance(v, _CONTAINERS) else v for v in value]
    if isinstance(value, _CONTAINERS):  # a subclass: the general way
        return rebuild(value)
    return value


_CONTAINERS = (dict, list, tuple)  # subclasses too: every container is copied


def dumps(
    value: Any,
    *,
    indent: int | None = None,
    ensure_ascii: bool = False,
    allow_nan: bool = True,
    separators: tuple[str, str] | None = None,
) -> str:
    """``json.dumps(value, ...)`` at any nesting depth, with the same output.

    Raises what ``json.dumps`` raises for values it cannot encode (``TypeError`` for an
    unknown type, ``ValueError`` for NaN with ``allow_nan=False`` or a circular reference),
    never :class:`RecursionError`.
    """
    if separators is None:
        separators = (", ", ": ") if indent is None else (",", ": ")
    try:
        return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, allow_nan=allow_nan, separators=separators)
    except RecursionError:
        return "".join(_iterencode(value, indent, ensure_ascii, allow_nan, separators))


class _Open:
    """A container being written: its items, its closing bracket, whether any item was written."""

    __slots__ = ("items", "close", "is_dict", "started", "ident")

    def __init__(self, items: Iterator[Any], close: str, is_dict: bool, ident: int) -> None:
        self.items, self.close, self.is_dict, self.started, self.ident = items, close, is_dict, False, ident


def _iterencode(value: Any, indent: int | None, ensure_ascii: bool, allow_nan: bool, separators: tuple[str, str]) -> Iterator[str]:
    item_sep, key_sep = separators
    pad = " " * indent if indent is not None else None
    stack: list[_Open] = []
    seen: set[int] = set()

    def scalar(v: Any) -> str:
        return json.dumps(v, ensure_ascii=ensure_ascii, allow_nan=allow_nan)

    def key(k: Any) -> str:
        if isinstance(k, str):
            return scalar(k)
        if k is None or isinstance(k, (bool, int, float)):
            return scalar(scalar(k))  # json.dumps turns such keys into their JSON text
        raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")

    def start(v: Any) -> str:
        """The opening of ``v`` if it is a non-empty container (pushed), else its whole text."""
        if isinstance(v, dict) and v or isinstance(v, (list, tuple)) and v:
            if id(v) in seen:
                raise ValueError("Circular reference detected")
            seen.add(id(v))
            is_dict = isinstance(v, dict)
            stack.append(_Open(iter(v.items()) if is_dict else iter(v), "}" if is_dict else "]", is_dict, id(v)))
            return "{" if is_dict else "["
        if isinstance(v, dict):
            return "{}"
        if isinstance(v, (list, tuple)):
            return "[]"
        return scalar(v)

    def newline(depth: int) -> str:
        return "\n" + pad * depth if pad is not None else ""

    yield start(value)
    while stack:
        top = stack[-1]
        item = next(top.items, _END)
        if item is _END:
            stack.pop()
            seen.discard(top.ident)
            yield newline(len(stack)) + top.close
            continue
        yield (item_sep if top.started else "") + newline(len(stack))
        top.started = True
        if top.is_dict:
            k, item = item
            yield key(k) + key_sep
        yield start(item)


_END = object()


__all__ = ["dumps", "rebuild", "text_depth", "value_depth"]
