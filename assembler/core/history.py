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
blocks with ``is_error``); OpenAI Responses (each call as the item it came as, with its
own output item: ``function_call`` + ``function_call_output``, ``custom_tool_call`` +
``custom_tool_call_output``, ``local_shell_call`` + ``local_shell_call_output`` (keyed by
``id``), ``shell_call`` + ``shell_call_output`` (an error result as ``stderr`` with exit code
1), ``apply_patch_call`` + ``apply_patch_call_output`` (``status: failed``), ``computer_call`` +
``computer_call_output``: an error result there holds no screenshot, which the caller must
add before sending, as the API accepts only a screenshot; ``tool_search_call`` +
``tool_search_output``, whose ``tools`` are the executor's result read as a JSON array, and
none for an error result); Bedrock Converse (``toolUse`` + ``toolResult`` with ``status``); Gemini
(``functionCall`` + ``functionResponse`` parts); Cohere v2 (OpenAI-like ``tool_calls``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from toollatch.core import jsontext
from toollatch.core.model import CallOutcome, CallState, StreamResult, ToolResult
from toollatch.wire.untrusted import parse_json

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
    return [_responses_call(c) for c in calls] + [_responses_output(c, r) for c, r in results]


def _responses_call(c: CallOutcome) -> Message:
    """The call as the output item it came as (:attr:`CallOutcome.item`)."""
    args, kind = _args(c), c.item or "function_call"
    if kind == "custom_tool_call":
        text = args.get("input", "") if isinstance(args, dict) else ""
        return {"type": kind, "call_id": c.call_id, "name": c.name, "input": text}
    if kind == "tool_search_call":
        return {"type": kind, "call_id": c.call_id, "execution": "client", "arguments": args, "status": "completed"}
    if kind in ("local_shell_call", "shell_call", "apply_patch_call", "computer_call"):
        field = "operation" if kind == "apply_patch_call" else "action"
        if kind == "computer_call" and isinstance(args, dict) and set(args) == {"actions"}:
            field, args = "actions", args["actions"]  # a batch of actions
        item: Message = {"type": kind, "call_id": c.call_id, field: args, "status": "completed"}
        if kind == "computer_call":
            item["pending_safety_checks"] = []
        return item
    return {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": jsontext.dumps(args)}


def _responses_output(c: CallOutcome, r: ToolResult) -> Message:
    """The result item for the call's kind; an error result carries the reason where the
    kind carries text (see the module docstring for shell and computer calls)."""
    kind = c.item or "function_call"
    if kind == "local_shell_call":
        return {"type": "local_shell_call_output", "id": r.tool_call_id, "output": r.content}
    if kind == "shell_call":
        run = {"stdout": "", "stderr": r.content, "outcome": {"type": "exit", "exit_code": 1}} if r.is_error else {
            "stdout": r.content, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
        return {"type": "shell_call_output", "call_id": r.tool_call_id, "output": [run]}
    if kind == "apply_patch_call":
        return {"type": "apply_patch_call_output", "call_id": r.tool_call_id, "status": "failed" if r.is_error else "completed", "output": r.content}
    if kind == "tool_search_call":
        tools, problem = (None, "error") if r.is_error else parse_json(r.content.encode("utf-8", "surrogatepass"))
        return {"type": "tool_search_output", "call_id": r.tool_call_id, "execution": "client", "tools": tools if problem is None and isinstance(tools, list) else []}
    if kind == "computer_call":
        screenshot = {"type": "computer_screenshot"} if r.is_error else {"type": "computer_screenshot", "image_url": r.content}
        return {"type": "computer_call_output", "call_id": r.tool_call_id, "output": screenshot}
    output_type = "custom_tool_call_output" if kind == "custom_tool_call" else "function_call_output"
    return {"type": output_type, "call_id": r.tool_call_id, "output": r.content}


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


_RESPONSES_CALLS = frozenset(
    ("function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call", "computer_call", "tool_search_call")
)


def _pairs(messages: list[Message]) -> tuple[list[Any], list[Any]]:
    """(call ids, result ids) found in ``messages`` of any supported shape."""
    calls: list[Any] = []
    results: list[Any] = []
    for m in messages:
        for tc in m.get("tool_calls") or []:
            calls.append(tc.get("id"))
        if m.get("role") == "tool":
            results.append(m.get("tool_call_id"))
        kind = m.get("type")
        if kind in _RESPONSES_CALLS:
            calls.append(m.get("call_id"))
        elif kind == "local_shell_call_output":
            results.append(m.get("id"))
        elif kind == "tool_search_output" or (isinstance(kind, str) and kind.removesuffix("_output") in _RESPONSES_CALLS):
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
