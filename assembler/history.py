"""The finalized turn for the next request, in the dialect's own message shape.

What is stored for the next turn is never the delta list: it is one assistant message
with every client tool call that was finalized, and exactly one result per call. Calls
that did not commit carry an error result (``is_error``); calls removed by
``drop_with_protocol_repair`` appear in neither. Where two calls carried one
``tool_call_id``, the message lists that id once: the assembler keeps one record (the
committed one, else the first) and marks the others ``repaired``, so they appear in
neither either. Failed calls are listed with empty arguments (``{}``): their text was
not valid, and is never repeated.

Provider documents: OpenAI Chat "function calling" (assistant ``tool_calls`` + ``tool``
messages); Anthropic "tool use" (``tool_use`` blocks + a user message of ``tool_result``
blocks with ``is_error``); OpenAI Responses (``function_call`` + ``function_call_output``
items); Bedrock Converse (``toolUse`` + ``toolResult`` with ``status``); Gemini
(``functionCall`` + ``functionResponse`` parts); Cohere v2 (OpenAI-like ``tool_calls``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from . import jsontext
from .model import CallOutcome, CallState, StreamResult, ToolResult

Message = dict[str, Any]

_SHAPE = {
    "openai-chat": "openai",
    "cohere": "openai",
    "anthropic": "anthropic",
    "bedrock-invoke": "anthropic",
    "openai-responses": "responses",
    "bedrock-converse": "converse",
    "gemini": "gemini",
}


def _finalized(result: StreamResult) -> list[CallOutcome]:
    return [c for c in result.calls if c.executor == "client" and not c.repaired and c.state.terminal]


def build_history(result: StreamResult, executed: Mapping[str, ToolResult] | None = None) -> list[Message]:
    """Messages for the next turn: the assistant's tool calls, then their results.

    ``executed`` maps ``tool_call_id`` to the result an executor produced for a committed
    call; committed calls without one are listed without a result (still to run).
    """
    calls = _finalized(result)
    if not calls:
        return []
    errors = {r.tool_call_id: r for r in result.results}
    results: list[tuple[CallOutcome, ToolResult]] = []
    for call in calls:
        got = errors.get(call.call_id) if call.state is not CallState.COMMITTED else (executed or {}).get(call.call_id or "")
        if got is not None:
            results.append((call, got))
    shape = _SHAPE.get(result.dialect, "openai")
    return _BUILDERS[shape](calls, results)


def _args(call: CallOutcome) -> Any:
    return call.arguments if call.state is CallState.COMMITTED else {}


def _openai(calls: list[CallOutcome], results: list[tuple[CallOutcome, ToolResult]]) -> list[Message]:
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": jsontext.dumps(_args(c), separators=(",", ":"))},
            }
            for c in calls
        ],
    }
    return [assistant] + [{"role": "tool", "tool_call_id": r.tool_call_id, "content": r.content} for _, r in results]


def _anthropic(calls: list[CallOutcome], results: list[tuple[CallOutcome, ToolResult]]) -> list[Message]:
    out: list[Message] = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": c.call_id, "name": c.name, "input": _args(c)} for c in calls],
        }
    ]
    if results:
        blocks = [
            {"type": "tool_result", "tool_use_id": r.tool_call_id, "content": r.content, "is_error": r.is_error}
            for _, r in results
        ]
        out.append({"role": "user", "content": blocks})
    return out


def _responses(calls: list[CallOutcome], results: list[tuple[CallOutcome, ToolResult]]) -> list[Message]:
    items: list[Message] = [
        {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": jsontext.dumps(_args(c))}
        for c in calls
    ]
    items += [{"type": "function_call_output", "call_id": r.tool_call_id, "output": r.content} for _, r in results]
    return items


def _converse(calls: list[CallOutcome], results: list[tuple[CallOutcome, ToolResult]]) -> list[Message]:
    out: list[Message] = [
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": c.call_id, "name": c.name, "input": _args(c)}} for c in calls]}
    ]
    if results:
        blocks = [
            {
                "toolResult": {
                    "toolUseId": r.tool_call_id,
                    "content": [{"text": r.content}],
                    "status": "error" if r.is_error else "success",
                }
            }
            for _, r in results
        ]
        out.append({"role": "user", "content": blocks})
    return out


def _gemini(calls: list[CallOutcome], results: list[tuple[CallOutcome, ToolResult]]) -> list[Message]:
    out: list[Message] = [
        {"role": "model", "parts": [{"functionCall": {"id": c.call_id, "name": c.name, "args": _args(c)}} for c in calls]}
    ]
    if results:
        parts = [
            {
                "functionResponse": {
                    "id": r.tool_call_id,
                    "name": c.name,
                    "response": {"error": r.content} if r.is_error else {"output": r.content},
                }
            }
            for c, r in results
        ]
        out.append({"role": "user", "parts": parts})
    return out


_BUILDERS = {"openai": _openai, "anthropic": _anthropic, "responses": _responses, "converse": _converse, "gemini": _gemini}


def _pairs(messages: list[Message]) -> tuple[list[Any], list[Any]]:
    """(call ids, result ids) found in ``messages`` of any supported shape."""
    calls: list[Any] = []
    results: list[Any] = []
    for m in messages:
        for tc in m.get("tool_calls") or []:
            calls.append(tc.get("id"))
        if m.get("role") == "tool":
            results.append(m.get("tool_call_id"))
        if m.get("type") == "function_call":
            calls.append(m.get("call_id"))
        if m.get("type") == "function_call_output":
            results.append(m.get("call_id"))
        content = m.get("content") if isinstance(m.get("content"), list) else m.get("parts") or []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                calls.append(block.get("id"))
            elif block.get("type") == "tool_result":
                results.append(block.get("tool_use_id"))
            elif "toolUse" in block:
                calls.append(block["toolUse"].get("toolUseId"))
            elif "toolResult" in block:
                results.append(block["toolResult"].get("toolUseId"))
            elif "functionCall" in block:
                calls.append(block["functionCall"].get("id"))
            elif "functionResponse" in block:
                results.append(block["functionResponse"].get("id"))
    return calls, results


def check_protocol(messages: list[Message]) -> list[str]:
    """Problems with the pairing of calls and results; empty when protocol-valid.

    Every tool call id must appear once and have exactly one result; no result may name
    an id that no call has (an orphan).
    """
    calls, results = _pairs(messages)
    problems = [f"call id {cid!r} appears {n} times" for cid, n in Counter(calls).items() if n > 1]
    counted = Counter(results)
    for cid in dict.fromkeys(calls):
        if counted.get(cid, 0) != 1:
            problems.append(f"call {cid!r} has {counted.get(cid, 0)} results")
    problems += [f"result for unknown call {rid!r}" for rid in counted if rid not in set(calls)]
    return problems
