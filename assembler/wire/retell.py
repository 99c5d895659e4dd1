"""Non-streaming response bodies, re-told as the stream that would have carried them.

A client that sends ``"stream": false`` gets one JSON body: a ``chat.completion``, an
Anthropic ``message`` or a Responses ``response``. To judge its calls the way a stream's
are judged, the body is read into a :class:`~toollatch.demo.mockwire.Script` (each call's
arguments as one fragment) and written back out as that dialect's SSE events
(:func:`~toollatch.demo.mockwire.stream_events`). The body is untrusted: :func:`retell_body`
never raises for a bad one, it says what is wrong.

Pure: no I/O, no web imports.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from toollatch.dialects.responses_items import TOOL_ITEMS, argument_value, executor, identity
from toollatch.core.finalize import StrictJSONError, strict_loads
from toollatch.demo.mockwire import MOCK_DIALECTS, MockDialect, Script, WireCall, stream_events
from toollatch.wire.untrusted import parse_json


def script_from_response(dialect: MockDialect, doc: dict[str, Any], name: str = "response") -> Script:
    """A :class:`Script` from a *non-streaming* response body (each call's arguments as
    one fragment), so it can be assembled like a stream. Arguments given as a JSON value
    (Anthropic's ``input``; a non-string ``arguments``) become that value's JSON text.
    Raises ``ValueError`` when the body is not a response of ``dialect`` (and
    ``RecursionError`` for a value nested too deep to write out); members of the wrong
    JSON type are skipped."""
    return _read(dialect, doc, name)[0]


def _read(dialect: MockDialect, doc: dict[str, Any], name: str) -> tuple[Script, bool]:
    """The script, and whether any call's arguments were given as a JSON value."""
    text: list[str] = []
    calls: list[WireCall] = []
    valued: list[bool] = []
    if dialect == "openai-chat":
        choices = _objects(doc.get("choices"))
        if not choices:
            raise ValueError("not a chat.completion body")
        message = _object(choices[0].get("message"))
        text.append(_str(message.get("content")))
        for tc in _objects(message.get("tool_calls")):
            function = _object(tc.get("function"))
            calls.append(WireCall(_str(tc.get("id")), _str(function.get("name")), _args(function.get("arguments"), valued)))
        reason = _str(choices[0].get("finish_reason")) or None
    elif dialect == "anthropic":
        if doc.get("type") != "message":
            raise ValueError("not an Anthropic message body")
        for block in _objects(doc.get("content")):
            if block.get("type") == "text":
                text.append(_str(block.get("text")))
            elif block.get("type") == "tool_use":
                calls.append(WireCall(_str(block.get("id")), _str(block.get("name")), _args(block.get("input", {}), valued)))
        reason = _str(doc.get("stop_reason")) or None
    else:
        if doc.get("object") != "response":
            raise ValueError("not a Responses body")
        for item in _objects(doc.get("output")):
            if item.get("type") == "message":
                text.extend(_str(p.get("text")) for p in _objects(item.get("content")) if p.get("type") == "output_text")
            elif _retold(item, doc):
                kind = item["type"]
                call_id, name = identity(item)
                calls.append(WireCall(call_id or "", name or "", _args(argument_value(item), valued), kind))
        details = _object(doc.get("incomplete_details"))
        if doc.get("status") == "completed":
            reason = None
        elif doc.get("status") == "incomplete":
            reason = _str(details.get("reason"))  # empty: "no reason given"
        else:  # failed, cancelled, in progress: no end the re-told stream could state
            return Script(name, tuple(t for t in text if t), tuple(calls), False), bool(valued)
        return Script(name, tuple(t for t in text if t), tuple(calls), True, reason), bool(valued)
    # the body's own stop reason ends the re-told stream, judged by the one rule for every
    # dialect (toollatch.dialects.ends); a body that gives none is told as cut off
    return Script(name, tuple(t for t in text if t), tuple(calls), reason is not None, reason), bool(valued)


def _retold(item: dict[str, Any], doc: dict[str, Any]) -> bool:
    """A Responses output item the re-told stream carries: a tool item its client runs."""
    if item.get("type") not in TOOL_ITEMS or item.get("type") == "mcp_call":
        return False
    response_id = doc.get("id") if isinstance(doc.get("id"), str) else None
    return executor(item, response_id) == "client"


def _objects(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _args(arguments: Any, valued: list[bool]) -> tuple[str, ...]:
    """A call's argument fragments: its string, or the JSON text of a value (noted in ``valued``)."""
    if arguments is None or isinstance(arguments, str):
        return (arguments,) if arguments else ()
    valued.append(True)
    return (json.dumps(arguments, ensure_ascii=False),)


def untold_arguments(dialect: str | None, body: bytes) -> list[str]:
    """Where a non-streaming ``body`` holds argument text that its re-told stream leaves out,
    so that no call takes it: a further choice's calls or a legacy ``function_call``
    (OpenAI Chat), the ``input`` of a block other than ``tool_use`` (Anthropic), the
    arguments of an item no client runs (Responses: ``mcp_call``, a hosted shell call, xAI's
    own sub-tools). Names the
    place, never the text; empty for a body that cannot be read (nothing is re-told then)."""
    doc, problem = parse_json(body)
    if problem is not None or not isinstance(doc, dict):
        return []
    found: list[str] = []
    if dialect == "openai-chat":
        for i, choice in enumerate(_objects(doc.get("choices"))):
            message = _object(choice.get("message"))
            if message.get("function_call"):
                found.append(f"choices[{i}].message.function_call")
            if i > 0 and message.get("tool_calls"):
                found.append(f"choices[{i}].message.tool_calls")
    elif dialect == "anthropic":
        for i, block in enumerate(_objects(doc.get("content"))):
            if block.get("type") != "tool_use" and block.get("input") not in (None, {}, ""):
                found.append(f"content[{i}].input")
    elif dialect == "openai-responses":
        for i, item in enumerate(_objects(doc.get("output"))):
            fields = ("arguments", "input", "action", "actions", "operation")
            if not _retold(item, doc) and any(item.get(k) not in (None, {}, "") for k in fields):
                found.append(f"output[{i}]")
    return found


def synthesize_stream(dialect: MockDialect, doc: dict[str, Any], name: str = "response") -> bytes:
    """A non-streaming response body re-told as the stream that would have carried it.

    Raises ``ValueError`` when ``doc`` is not a response of ``dialect`` (and
    ``RecursionError`` for an Anthropic ``input`` nested too deep to write out).
    """
    return b"".join(stream_events(script_from_response(dialect, doc, name), dialect))


def retell_body(dialect: str | None, body: bytes, name: str = "response") -> tuple[bytes | None, str | None]:
    """``(stream bytes, None)`` for a readable non-streaming ``body`` of ``dialect``, else
    ``(None, why)``: ``why`` names the fault (not JSON and where, not an object, not a
    response of that dialect, nested too deep) and never quotes the body."""
    wire, problem, _ = retell_capped(dialect, body, name)
    return wire, problem


def _capped(calls: tuple[WireCall, ...], max_calls: int) -> tuple[WireCall, ...]:
    """The first ``max_calls`` of ``calls``, then the first call left out for each
    tool_call_id those carry (at most ``max_calls`` more): two calls with one id both fail
    (``call id used by more than one call``), and a call kept owes that verdict to a call
    left out, so the one that shows it is told too."""
    kept = list(calls[:max_calls])
    ids = {call.call_id for call in kept if call.call_id}
    for call in calls[max_calls:]:
        if call.call_id in ids:
            ids.discard(call.call_id)
            kept.append(call)
    return tuple(kept)


def retell_capped(
    dialect: str | None, body: bytes, name: str = "response", max_calls: int | None = None
) -> tuple[bytes | None, str | None, int]:
    """:func:`retell_body` re-telling at most ``max_calls`` of the body's tool calls (the
    first ones; ``None``: all; and, after them, the first call past them with the
    tool_call_id of one of them, so a call told fails as it would among them all):
    ``(stream bytes, None, untold)`` where ``untold`` counts the
    calls left out (0 when the body holds at most ``max_calls``), or ``(None, why, 0)``.
    The stream, and the work of assembling it, are bounded by ``2 * max_calls`` however many
    calls the body holds; reading the body itself is linear in its size. Pure (no shared
    state), so it may run in a worker thread."""
    if dialect not in MOCK_DIALECTS:
        return None, "no known response format for this endpoint", 0
    doc, problem = parse_json(body)
    if problem is not None:
        return None, f"the body is {problem}", 0
    if not isinstance(doc, dict):
        return None, "the body is not a JSON object", 0
    untold = 0
    try:
        script, valued = _read(dialect, doc, name)  # type: ignore[arg-type]
        if max_calls is not None and len(script.calls) > max_calls:
            calls = _capped(script.calls, max_calls)
            untold = len(script.calls) - len(calls)
            script = dataclasses.replace(script, calls=calls)
        if valued:  # the lenient parse keeps the last of duplicate keys: re-read the body strictly
            strict_loads(bytes(body).decode("utf-8-sig"))
        wire = b"".join(stream_events(script, dialect))  # type: ignore[arg-type]
    except StrictJSONError as exc:
        return None, f"the body is not strict JSON ({exc.problem}), so arguments it gives as JSON values cannot be judged", 0
    except UnicodeEncodeError:  # a lone surrogate in a string cannot be written out
        return None, "the body holds a string with a lone surrogate", 0
    except ValueError as exc:  # _read's own fixed descriptions
        return None, f"the body is {exc}", 0
    except RecursionError:
        return None, "the body's arguments are nested too deep", 0
    return wire, None, untold


__all__ = ["retell_body", "retell_capped", "script_from_response", "synthesize_stream", "untold_arguments"]
