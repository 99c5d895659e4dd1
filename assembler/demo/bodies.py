"""Non-streaming response bodies: what a provider answers a ``"stream": false`` request.

The same :class:`~toollatch.demo.mockwire.Script` that the mock streams is written as one
JSON body: a ``chat.completion`` (OpenAI API reference, "Chat Completions → The chat
completion object"), an Anthropic ``message`` (Messages API, non-streaming response) or a
Responses ``response`` object. The reverse direction, a body read back into a script, is
:mod:`toollatch.wire.retell`.

Pure: no I/O, no web imports.
"""

from __future__ import annotations

from typing import Any

from toollatch.demo.demos import _token
from toollatch.demo.mockwire import (
    _ANTHROPIC_MODEL,
    _CREATED,
    _RESPONSES_MODEL,
    MockDialect,
    Script,
    _function_item,
    _message_item,
    _response_doc,
    _usage,
)
from toollatch.wire.untrusted import parse_json


def final_response(script: Script, dialect: MockDialect) -> dict[str, Any]:
    """The non-streaming response body of ``script`` in ``dialect``.

    An incomplete script answers as the provider does when output is cut:
    ``finish_reason: "length"``, ``stop_reason: "max_tokens"``, ``status: "incomplete"``;
    a script's own ``stop_reason`` is written where it has one.
    """
    text = "".join(script.text)
    if dialect == "openai-chat":
        tool_calls = [{"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in script.calls]
        message = {"role": "assistant", "content": text or None, "refusal": None, "annotations": [], "tool_calls": tool_calls or None}
        finish = ("tool_calls" if script.calls else "stop") if script.complete else "length"
        finish = script.stop_reason if script.complete and script.stop_reason is not None else finish
        usage = _usage(script)
        return {
            "id": f"chatcmpl-{_token(script.name, 29)}",
            "object": "chat.completion",
            "created": _CREATED,
            "model": _RESPONSES_MODEL,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": {"prompt_tokens": 612, "completion_tokens": usage["output_tokens"], "total_tokens": usage["total_tokens"]},
            "service_tier": "default",
            "system_fingerprint": "fp_" + _token(script.name + "fp", 10).lower(),
        }
    if dialect == "anthropic":
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for n, call in enumerate(script.calls):
            parsed, problem = parse_json(call.arguments) if call.arguments else ({}, None)
            if problem is not None or not isinstance(parsed, dict):
                parsed = {}  # a non-streaming Messages body always carries an object
            call_id = call.call_id if call.call_id.startswith("toolu_") else "toolu_01" + _token(f"{script.name}/{n}", 22)
            content.append({"type": "tool_use", "id": call_id, "name": call.name, "input": parsed})
        stop = ("tool_use" if script.calls else "end_turn") if script.complete else "max_tokens"
        stop = script.stop_reason if script.complete and script.stop_reason is not None else stop
        return {
            "id": "msg_01" + _token(script.name, 22),
            "type": "message",
            "role": "assistant",
            "model": _ANTHROPIC_MODEL,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 612, "output_tokens": _usage(script)["output_tokens"]},
        }
    output = ([_message_item(script, "completed")] if text else []) + [
        _function_item(script, n, "completed", c.arguments) for n, c in enumerate(script.calls)
    ]
    cut = not script.complete or script.stop_reason is not None
    doc = _response_doc(script, "incomplete" if cut else "completed", output, _usage(script))
    if cut:
        doc["incomplete_details"] = {"reason": "max_output_tokens" if not script.complete else script.stop_reason}
    return doc


__all__ = ["final_response"]
