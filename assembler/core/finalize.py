"""The latch's content checks: strict JSON, the object rule, the registry and the schema.

Strict JSON follows RFC 8259 on the *whole* joined text: no NaN/Infinity, no trailing
data, no comment or trailing-comma repair, duplicate object keys rejected. Nothing here
ever parses a fragment on its own.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NamedTuple

from toollatch.core.jsontext import text_depth
from toollatch.core.model import Reason
from toollatch.core.registry import SchemaUnusable, ToolRegistry
from toollatch.core.schemacheck import CheckBudget, SchemaCheckTimeout, time_limit


class StrictJSONError(ValueError):
    """Text is not one strict JSON value.

    ``byte_offset`` is the offset in the UTF-8 encoded text where parsing stopped;
    ``problem`` names the kind of fault without quoting the text.
    """

    def __init__(self, problem: str, byte_offset: int | None) -> None:
        where = f" at byte {byte_offset}" if byte_offset is not None else ""
        super().__init__(problem + where)
        self.problem = problem
        self.byte_offset = byte_offset


class _DuplicateKey(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard constant {name}")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):  # 1e999 would otherwise become Infinity
        raise ValueError("number out of range")
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_lone_surrogate(value: Any) -> bool:
    """True if any string (key or value) holds a lone UTF-16 surrogate (I-JSON, RFC 7493 2.1)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # a key given twice: fewer entries than pairs
        raise _DuplicateKey("duplicate object key")
    return obj


#: Built once: a decoder with hooks costs more to make than a small call costs to parse.
_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_reject_constant, parse_float=_finite_float)
#: The decoder's scanner: ``(value, end)`` of the value at an index, StopIteration where none
#: begins (what ``raw_decode`` calls, without its Python frame).
_SCAN = _DECODER.scan_once


def join_surrogate_pairs(text: str) -> str:
    """``text`` with each UTF-16 surrogate pair (a high surrogate followed by a low one)
    written as the one character it encodes; a surrogate without its partner is kept.

    Fragments are pieces of one string: a provider that cuts its argument text between the
    two halves of a pair (``"\\ud83d"`` ending one fragment, ``"\\ude00"`` starting the next,
    each a lone surrogate once its event is decoded) sent one character, U+1F600. Only the
    joined text can say so; a surrogate still unpaired here stays invalid (the latch's
    strict parse refuses it). O(n), and a no-op for text without surrogates.
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def strict_loads(text: str, *, string_pieces: bool = False) -> Any:
    """Parse ``text`` as exactly one RFC 8259 JSON value; raise :class:`StrictJSONError`.

    Beyond the grammar, values that cannot round-trip are refused: numbers that overflow
    to infinity, and strings holding a lone surrogate (I-JSON, RFC 7493). With
    ``string_pieces`` the strings are pieces of longer strings (Gemini ``stringValue``
    parts), judged once joined: a lone surrogate is not refused here.
    """
    try:
        try:  # the common text: one value, nothing around it
            value, end = _SCAN(text, 0)
        except (StopIteration, json.JSONDecodeError):
            end = -1
        if end != len(text):  # whitespace around it, trailing data or an error: the full parse says which
            value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        # exc.msg is the decoder's description ("Expecting ',' delimiter"); it never
        # contains the document. exc.pos counts characters: report UTF-8 bytes.
        problem = exc.msg.removesuffix(" at")  # "Unterminated string starting at" + our " at byte N"
        return _raise(problem, len(text[: exc.pos].encode("utf-8", "surrogatepass")))
    except _DuplicateKey:
        return _raise("duplicate object key", None)
    except ValueError as exc:  # NaN, Infinity, -Infinity, overflowing numbers, > 4300-digit integers
        return _raise(str(exc), None)
    except RecursionError:
        return _raise("nesting too deep", None)
    if not string_pieces and not (text.isascii() and "\\u" not in text) and _has_lone_surrogate(value):  # ASCII without \u: none
        return _raise("string holds a lone surrogate", None)
    return value


def _raise(problem: str, offset: int | None) -> Any:
    raise StrictJSONError(problem, offset)


class Verdict(NamedTuple):
    """Outcome of the content checks: ``arguments`` when they pass, else ``reason``."""

    arguments: Any
    reason: str | None
    diagnosis: dict[str, Any] | None = None


def check_arguments(
    text: str,
    name: str,
    *,
    registry: ToolRegistry | None,
    must_be_object: bool = True,
    reveal: bool = False,
    max_depth: int | None = None,
    schema_budget: CheckBudget | None = None,
) -> Verdict:
    """Apply latch conditions 2-4 (registry, strict JSON, object, schema) to joined text.

    Never raises for a schema it cannot apply: the call fails ``schema_invalid`` naming
    why (a ``$ref`` that does not resolve; any other fault of the schema check by its
    exception's type only), so one tool's schema cannot stop the other calls' verdicts.

    ``text`` is the call's joined fragments: a UTF-16 surrogate pair split across two of
    them is one character (:func:`join_surrogate_pairs`). Empty text means "no arguments"
    and finalizes as ``{}``. Text nested deeper than
    ``max_depth`` levels of arrays and objects fails ``arguments_too_deep`` before it is
    parsed (:func:`~toollatch.core.jsontext.text_depth`). Reasons never quote the argument text
    unless ``reveal`` is true.

    The schema check is bounded (:mod:`toollatch.core.schemacheck`): 50 ms of CPU time per call,
    less when ``schema_budget`` (shared by the calls finalized together) has less left. A
    check that cannot finish in its limit fails the call ``schema_check_timeout``.
    """
    if registry is not None and name not in registry:
        return Verdict(None, Reason.UNKNOWN_TOOL.with_detail(f"{name} is not registered for this turn"))
    verdict = check_json(text, must_be_object, max_depth)
    if verdict.reason is not None:
        return verdict
    value = verdict.arguments
    if registry is not None:
        budget = schema_budget or CheckBudget()
        try:
            with budget.allowance() as seconds, time_limit(seconds):
                issues = registry.validate(name, value)
        except SchemaCheckTimeout as exc:
            return Verdict(None, Reason.SCHEMA_CHECK_TIMEOUT.with_detail(f"{exc}; the call is not run"))
        except RecursionError:
            return Verdict(None, Reason.SCHEMA_INVALID.with_detail("arguments nested too deep for the schema check"))
        except SchemaUnusable as exc:
            if exc.timed_out:
                return Verdict(None, Reason.SCHEMA_CHECK_TIMEOUT.with_detail(exc.problem))
            return Verdict(None, Reason.SCHEMA_INVALID.with_detail(f"the tool's JSON Schema cannot be applied: {exc.problem}"))
        except Exception as exc:  # noqa: BLE001 - the latch fails closed: the call fails, never the stream
            # The validator's own text could quote the schema or the arguments: only its type.
            return Verdict(None, Reason.SCHEMA_INVALID.with_detail(f"the schema check failed ({type(exc).__name__})"))
        if issues:
            first = issues[0]
            detail = f"{first.pointer}: {first.message}" if reveal else f"{first.pointer}: {first.keyword} {first.expected}"
            more = f" (+{len(issues) - 1} more)" if len(issues) > 1 else ""
            errors = [{"pointer": i.pointer, "keyword": i.keyword} for i in issues]
            return Verdict(None, Reason.SCHEMA_INVALID.with_detail(detail.rstrip() + more), {"kind": "schema", "errors": errors})
    return verdict


def check_json(text: str, must_be_object: bool = True, max_depth: int | None = None) -> Verdict:
    """Latch conditions 2-3 without a registry: ``text`` (the joined fragments, a split
    surrogate pair joined) is strict JSON, nested at most ``max_depth`` levels, and an
    object when ``must_be_object``; ``""`` is ``{}``. What :func:`check_arguments` checks
    before the schema, for a call whose tool has none."""
    if not text.isascii():  # ASCII text holds no surrogate
        text = join_surrogate_pairs(text)
    if max_depth is not None and text.count("[") + text.count("{") > max_depth and (depth := text_depth(text)) > max_depth:
        return Verdict(None, Reason.ARGUMENTS_TOO_DEEP.with_detail(f"nested {depth} levels deep; the limit is {max_depth}"))
    if text == "":
        value: Any = {}
    else:
        try:
            value = strict_loads(text)
        except StrictJSONError as exc:
            return Verdict(None, Reason.INVALID_JSON.with_detail(str(exc)))
    if must_be_object and not isinstance(value, dict):
        return Verdict(None, Reason.ARGUMENTS_NOT_OBJECT.with_detail(f"got a JSON {_json_type(value)}"))
    return _verdict(Verdict, (value, None, None))


#: Builds a :class:`Verdict` from a tuple of its three fields without the Python-level
#: ``__new__`` of a named tuple: the verdict of every call that passes.
_verdict = tuple.__new__


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return {int: "number", float: "number", str: "string", list: "array"}.get(type(value), type(value).__name__)
