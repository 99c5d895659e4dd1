"""Masking one dialect's provider events for the redacted reproducer (see :mod:`.redactor`).

:class:`DialectMasker` masks, on a decoded copy of each event, every place the dialect's
adapter reads argument text, whether it arrives as a string or as a JSON value:

* OpenAI Chat: ``choices[].delta.tool_calls[].function.arguments`` (what the adapter reads),
  and, unread, a chunk's ``message``, ``function_call.arguments`` and a custom tool's ``input``;
* Anthropic (and Bedrock InvokeModel's ``chunk.bytes``): ``input_json_delta.partial_json``,
  ``content_block.input`` in ``content_block_start`` and ``message_start``;
* Bedrock ConverseStream: ``contentBlockDelta.delta.toolUse.input`` and
  ``contentBlockStart.start.toolUse.input``;
* OpenAI Responses: argument and custom tool input ``.delta``/``.done`` events, and the
  ``arguments``/``input``/``action``/``operation`` of every output item (``output_item.added``/``.done``, the
  ``response`` of ``response.created``/``.completed``...);
* Gemini (:mod:`.gemini_mask`): ``functionCall.args`` and ``partialArgs[].stringValue`` (``jsonPath``, numbers,
  booleans kept); a candidate's ``finishMessage`` (it can quote a malformed call);
* Cohere: ``delta.message.tool_calls.function.arguments`` of ``tool-call-start``/``-delta``.

Each fragment is matched to the adapter's op for it (by its text, in order), so it is
masked with its own call's scanner, and its use is recorded in the :class:`~.redactor.Ledger`.
A committed call's strings that its tool's schema publishes (``enum``, ``const``) are kept,
as the :class:`~.scalarmask.MaskPlan` says (:mod:`.published`).
Text fields (assistant text, reasoning, signatures, citations, Anthropic's
``stop_sequence``) become placeholders of the same byte length; a stop reason
(``finish_reason``, ``stop_reason``, ``stopReason``, ``finishReason``), error type or code
that is no word from the provider's list becomes one that still is no word. A shape the dialect never has is masked whole.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from toollatch.core import jsontext
from toollatch.dialects import anthropic, cohere, openai_responses
from toollatch.dialects.base import event_type
from toollatch.dialects.responses_items import KINDS
from toollatch.redaction.gemini_mask import GeminiMasker
from toollatch.redaction.places import mask_reason, mask_text as _text
from toollatch.redaction.redactor import mask_arguments, mask_value, placeholder
from toollatch.redaction.scalarmask import MaskPlan
from toollatch.wire.untrusted import parse_json


#: Responses items whose argument text is an action or operation object.
_ACTION_ITEMS = frozenset(kind for kind, k in KINDS.items() if not k.streams)

#: What the OpenAI Chat adapter reads of a choice (and what the masker handles itself).
_CHOICE_READ = frozenset({"index", "delta", "message", "finish_reason", "logprobs", "content_filter_results", "content_filter_offsets"})


#: The dialects whose adapters read an event as a whole as the provider's error, and how.
_ERROR_EVENTS = {
    "anthropic": anthropic.is_error_event,
    "openai-responses": openai_responses.is_error_event,
    "cohere": cohere.is_error_event,
}


class DialectMasker(GeminiMasker):
    """Masks one dialect's events; :attr:`ledger` records which argument text calls took."""

    METHODS = {
        "openai-chat": "openai_chat",
        "anthropic": "anthropic",
        "bedrock-converse": "bedrock_converse",
        "bedrock-invoke": "bedrock_invoke",
        "openai-responses": "openai_responses",
        "gemini": "gemini",
        "cohere": "cohere",
    }

    def __init__(self, dialect: str, plan: MaskPlan | None = None, *, record: bool = False, values: bool = True) -> None:
        super().__init__(plan, record=record, values=values)
        self._method = getattr(self, self.METHODS[dialect])
        self._error_event = _ERROR_EVENTS.get(dialect)
        self._first_names: dict[tuple[str, str], str] = {}  # OpenAI Chat: each call's first tool name

    # ------------------------------------------------------------------ OpenAI Chat

    def openai_chat(self, data: dict[str, Any]) -> None:
        for choice in self.objects(data, "choices"):
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._chat_delta(delta)
                self._chat_names(choice.get("index"), delta)
            elif delta is not None:  # a shape the adapter never reads: whatever it holds, no call took it
                choice["delta"] = self.unread(delta, "delta")
            message = choice.get("message")
            if message is not None:  # a whole message in a chunk: no adapter reads it
                if isinstance(message, dict) and (message.get("tool_calls") or message.get("function_call")):
                    self.ledger.ignored(f"{self._where} (message tool_calls)")
                choice["message"] = mask_value(message)
            if "finish_reason" in choice:
                choice["finish_reason"] = mask_reason(choice["finish_reason"])
            if choice.get("logprobs") is not None:  # tokens (and their bytes) of the text
                choice["logprobs"] = None
            for field in list(choice):
                if field not in _CHOICE_READ:
                    choice[field] = _text(choice[field])

    def _chat_names(self, choice: Any, delta: dict[str, Any]) -> None:
        """A tool name on a later chunk of a call that differs from the call's first one (the
        call fails ``name_conflict``): provider text that could be argument text, kept as a
        placeholder of its byte length that still differs, so the replay fails it the same way."""
        for entry in self.objects(delta, "tool_calls"):
            fn = entry.get("function")
            name = fn.get("name") if isinstance(fn, dict) else None
            if not isinstance(name, str) or not name:
                continue
            key = (str(choice), str(entry.get("index")))
            if entry.get("id"):
                self._first_names.pop(key, None)  # another call at that index
            fn["name"] = self._later_name(key, name)

    def _later_name(self, key: tuple[str, str], name: str) -> str:
        """``name`` as kept for the call at ``key``: its first name as is; a later, different
        one (the call fails ``name_conflict``) as a placeholder of its byte length that
        still differs from the first."""
        first = self._first_names.setdefault(key, name)
        if name == first:
            return name
        stand_in = placeholder(name)
        return stand_in if stand_in != first else "y" * len(stand_in)

    def _chat_delta(self, delta: dict[str, Any]) -> None:
        for field in list(delta):  # content, reasoning, refusal, audio, annotations...
            if field not in ("role", "tool_calls", "function_call"):
                delta[field] = _text(delta[field])
        legacy = delta.get("function_call")
        if isinstance(legacy, dict):
            legacy["arguments"] = self.unread(legacy.get("arguments"), "function_call arguments")
        elif legacy is not None:
            delta["function_call"] = self.unread(legacy, "function_call")
        for entry in self.objects(delta, "tool_calls"):
            fn = entry.get("function")
            if isinstance(fn, dict):
                for field in list(fn):
                    if field == "arguments":
                        fn[field] = self.args(fn[field], "tool_calls arguments")
                    elif field != "name":
                        fn[field] = mask_value(fn[field])
            elif fn is not None:
                entry["function"] = self.unread(fn, "tool_calls function")
            for field in list(entry):
                if field == "custom":  # a custom tool's input: no adapter reads it
                    entry[field] = self.unread(entry[field], "tool_calls custom")
                elif field not in ("index", "id", "type", "function"):
                    entry[field] = _text(entry[field])

    # ------------------------------------------------------------------ Anthropic

    def anthropic(self, data: dict[str, Any]) -> None:
        kind = data.get("type") or self._event.event  # as the adapter reads it
        if kind == "message_start":
            message = data.get("message")
            if not isinstance(message, dict):
                if message is not None:
                    data["message"] = mask_value(message)
            elif isinstance(message.get("content"), list):
                message["content"] = [self._block(b) for b in message["content"]]
        elif kind == "message_delta" and isinstance(data.get("delta"), dict):
            delta = data["delta"]
            for field in list(delta):
                if field == "stop_reason":
                    delta[field] = mask_reason(delta[field])
                elif field != "type":
                    delta[field] = _text(delta[field])  # stop_sequence: the text that stopped it
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            data["content_block"] = self._block(data["content_block"])
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            delta = data["delta"]
            for field in list(delta):
                if field == "partial_json":
                    reads = delta.get("type") == "input_json_delta"
                    delta[field] = self.args(delta[field], "partial_json") if reads else self.unread(delta[field], "partial_json")
                elif field != "type":
                    delta[field] = _text(delta[field])

    def _block(self, block: Any) -> Any:
        if not isinstance(block, dict):
            return mask_value(block)
        out = dict(block)
        for field in out:
            if field == "input":
                out[field] = self.args(out[field], "content_block input", whole=True)
            elif field not in ("type", "id", "name"):
                out[field] = _text(out[field])
        return out

    # ------------------------------------------------------------------ Bedrock

    def bedrock_converse(self, data: dict[str, Any]) -> None:
        for kind, body in data.items():
            if not isinstance(body, dict):
                continue
            if kind == "messageStop" and "stopReason" in body:
                body["stopReason"] = mask_reason(body["stopReason"])
            if kind == "contentBlockStart" and isinstance(body.get("start"), dict):
                tool = body["start"].get("toolUse")
                if isinstance(tool, dict):
                    for field in tool:
                        if field == "input":
                            tool[field] = self.args(tool[field], "toolUse input", whole=True)
                        elif field not in ("toolUseId", "name", "type"):
                            tool[field] = _text(tool[field])
                for field in body["start"]:
                    if field != "toolUse":
                        body["start"][field] = _text(body["start"][field])
            delta = body.get("delta")
            if kind == "contentBlockDelta" and isinstance(delta, dict):
                for field in delta:
                    tool = delta[field]
                    if field == "toolUse" and isinstance(tool, dict):
                        for name in tool:
                            tool[name] = self.args(tool[name], "toolUse input") if name == "input" else _text(tool[name])
                    else:
                        delta[field] = _text(tool)

    def bedrock_invoke(self, data: dict[str, Any]) -> None:
        chunk = data.get("chunk")
        if not isinstance(chunk, dict) or not isinstance(chunk.get("bytes"), str):
            return
        try:
            payload = base64.b64decode(chunk["bytes"], validate=True)
        except (binascii.Error, ValueError):
            chunk["bytes"] = "*" * len(chunk["bytes"])  # still not base64; nothing of it kept
            return
        inner, problem = parse_json(payload)
        if problem is not None:  # still not JSON (the same fault on re-import); nothing of it kept
            chunk["bytes"] = base64.b64encode(b"x" * len(payload)).decode()
            return
        if isinstance(inner, dict):
            self.anthropic(inner)
        else:
            inner = mask_value(inner)
        # ASCII: a string the reading keeps (or a piece of a pair split across chunks) may hold a lone surrogate
        chunk["bytes"] = base64.b64encode(jsontext.dumps(inner, ensure_ascii=True).encode()).decode()

    # ------------------------------------------------------------------ OpenAI Responses

    _KEEP = frozenset({"type", "item_id", "output_index", "content_index", "summary_index", "sequence_number", "annotation_index"})
    _ARG_DELTAS = ("response.function_call_arguments.delta", "response.mcp_call_arguments.delta")
    _ARG_DONES = ("response.function_call_arguments.done", "response.mcp_call_arguments.done")

    def openai_responses(self, data: dict[str, Any]) -> None:
        kind = event_type(data, self._event)  # as the adapter reads it
        for field in list(data):
            value = data[field]
            if field in self._KEEP or value is None or (kind == "error" and field in ("error", "code", "message", "param")):
                continue
            if field == "delta" and kind in self._ARG_DELTAS:
                data[field] = self.args(value, "arguments delta")
            elif field == "delta" and kind == "response.custom_tool_call_input.delta":
                data[field] = self.free(value, "custom tool input delta")
            elif field == "arguments" and kind in self._ARG_DONES:
                data[field] = self.args(value, "arguments done", repeat=True)
            elif field == "input" and kind == "response.custom_tool_call_input.done":
                data[field] = self.free(value, "custom tool input done")
            elif field in ("item", "part") and isinstance(value, dict):
                data[field] = self._item(value, repeat=kind != "response.output_item.added")
            elif field == "response" and isinstance(value, dict):
                self._response(value)
            elif field == "logprobs":
                data[field] = None  # tokens (and their bytes) of the text
            else:
                data[field] = _text(value)

    def _response(self, response: dict[str, Any]) -> None:
        if response.get("instructions") is not None:
            response["instructions"] = _text(response["instructions"])
        response.pop("input", None)  # the request's messages are not kept
        details = response.get("incomplete_details")
        if isinstance(details, dict) and "reason" in details:  # a stop reason: a word, or a stand-in
            details["reason"] = mask_reason(details["reason"])
        output = response.get("output")
        if isinstance(output, list):
            response["output"] = [self._item(i, repeat=True) if isinstance(i, dict) else mask_value(i) for i in output]
        elif output is not None:
            response["output"] = mask_value(output)

    def _item(self, item: dict[str, Any], *, repeat: bool) -> dict[str, Any]:
        """An output item; ``repeat``: an item the adapter compares or ignores (``.done``, a
        whole response) rather than one that starts a call."""
        out = dict(item)
        kind = out.get("type")
        name, ident = out.get("name"), out.get("id") or out.get("call_id")
        if isinstance(name, str) and name and isinstance(ident, str) and ident:
            out["name"] = self._later_name(("item", ident), name)
        for field in out:
            value = out[field]
            if field in ("type", "id", "call_id", "name", "status", "role", "server_label", "execution") or value is None:
                continue
            if field == "arguments" and kind in ("function_call", "mcp_call"):
                out[field] = self.args(value, "item arguments", whole=True, repeat=repeat)
            elif field == "input" and kind == "custom_tool_call":
                out[field] = self.free(value, "item input")
            elif kind in _ACTION_ITEMS and field == KINDS[kind].field:  # an action or operation: its JSON text
                out[field] = self.args(value, f"item {field}", whole=True, repeat=repeat)
            elif kind == "computer_call" and field == "actions" and out.get("action") is None:
                wrapped = self.args({"actions": value}, "item actions", whole=True, repeat=repeat)
                out[field] = wrapped.get("actions") if isinstance(wrapped, dict) else mask_value(value)
            elif field == "environment" and isinstance(value, dict):  # its type says who runs a shell call
                out[field] = {k: v if k == "type" else _text(v) for k, v in value.items()}
            elif field in ("arguments", "input"):
                out[field] = self.unread(value, f"item {field}")
            else:
                out[field] = _text(value)
        return out

    # ------------------------------------------------------------------ Cohere

    def cohere(self, data: dict[str, Any]) -> None:
        delta = data.get("delta")
        if isinstance(delta, dict) and "finish_reason" in delta:
            delta["finish_reason"] = mask_reason(delta["finish_reason"])
        message = delta.get("message") if isinstance(delta, dict) else None
        if not isinstance(message, dict):
            if message is not None:
                delta["message"] = self.unread(message, "message")  # type: ignore[index]
            return
        for field in list(message):
            if field == "tool_calls":
                self._cohere_calls(message)
            elif field == "content" and isinstance(message[field], dict):
                content = message[field]
                for name in content:
                    if name != "type":
                        content[name] = _text(content[name])
            elif field != "role":
                message[field] = _text(message[field])  # tool_plan, citations

    def _cohere_calls(self, message: dict[str, Any]) -> None:
        calls = message["tool_calls"]
        read = isinstance(calls, dict) or (isinstance(calls, list) and len(calls) == 1)  # what the adapter reads
        for call in calls if isinstance(calls, list) else [calls]:
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict):
                continue
            for name in fn:
                if name == "arguments":
                    fn[name] = self.args(fn[name], "tool_calls arguments") if read else self.unread(fn[name], "tool_calls arguments")
                elif name != "name":
                    fn[name] = _text(fn[name])
        if isinstance(calls, list):
            message["tool_calls"] = [c if isinstance(c, dict) else mask_value(c) for c in calls]
        elif not isinstance(calls, dict) and calls is not None:
            message["tool_calls"] = self.unread(calls, "tool_calls")


__all__ = ["DialectMasker"]
