"""Redacted reproducers: the same stream, with every secret-bearing string replaced.

:func:`redact_capture` rewrites a capture event by event. The event structure, the event
types, the order, ids and tool names stay; so do the *argument fragments' boundaries and
UTF-8 byte lengths*: inside argument text every string value is replaced by ``x``
characters of the same byte length (object keys, numbers and literals are kept, so the
text stays exactly as valid or invalid as it was). Text deltas (assistant text, reasoning,
signatures) become ``x`` runs of the same byte length. A re-import therefore gives the same
verdicts, ``bytes`` and ``fragments`` per call. HTTP heads (``curl -i``) and comment lines
are dropped. SSE input is written back as SSE; JSON Lines and binary event streams as JSON
Lines.

Limits: a tool registry whose schema constrains string values (``enum``, ``pattern``) may
judge the placeholders differently; such verdicts can differ after redaction.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .capture import DONE, ProviderEvent, iter_capture
from .dialects import ADAPTERS, detect, make_adapter
from .model import ArgsFragment, CallStart
from .jsonprefix import JSONPrefixScanner
from . import jsontext
from .pipeline import ADAPTER_FAULTS
from .untrusted import parse_json

Json = Any


def placeholder(text: str) -> str:
    """``x`` repeated to the UTF-8 byte length of ``text``."""
    return "x" * len(text.encode("utf-8", "surrogatepass"))


def mask_json_text(text: str) -> str:
    """Mask the string values of a whole JSON text (same byte length)."""
    return JSONPrefixScanner(mask=True).feed(text)


def mask_value(value: Json) -> Json:
    """Replace every string value (not key) in a decoded JSON value by a placeholder."""
    return jsontext.rebuild(value, lambda v: placeholder(v) if isinstance(v, str) else v)


class _Fragments:
    """One masking scanner per call, so string state carries across its fragments."""

    def __init__(self) -> None:
        self._scanners: dict[Any, JSONPrefixScanner] = {}

    def mask(self, key: Any, text: str) -> str:
        scanner = self._scanners.get(key)
        if scanner is None:
            scanner = self._scanners[key] = JSONPrefixScanner(mask=True)
        return scanner.feed(text)

    def reset(self, key: Any = None) -> None:
        if key is None:
            self._scanners.clear()
        else:
            self._scanners.pop(key, None)


def _set(obj: dict[str, Any], key: str, fn: Callable[[Any], Any]) -> None:
    if key in obj and obj[key] is not None:
        obj[key] = fn(obj[key])


def _objects(obj: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The objects of the array ``obj[key]`` (choices, tool calls, candidates, parts). A
    member or an entry of another type is a shape the dialect never has: it is masked
    whole, so nothing of it is kept."""
    value = obj.get(key)
    if not isinstance(value, list):
        if value is not None:
            obj[key] = mask_value(value)
        return []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            value[i] = mask_value(entry)
    return [entry for entry in value if isinstance(entry, dict)]


def _text(value: Any) -> Any:
    return placeholder(value) if isinstance(value, str) else mask_value(value)


class _Redactor:
    """Masks one dialect's events in place (on a decoded copy)."""

    def __init__(self) -> None:
        self.fragments = _Fragments()
        #: the keys the dialect adapter gave this event's argument fragments, in order: the
        #: masker tracks calls exactly as the assembler does (same keying, same quirks)
        self.keys: Iterator[Any] = iter(())

    def _key(self, fallback: Any) -> Any:
        return next(self.keys, fallback)

    def openai_chat(self, data: dict[str, Any]) -> None:
        for choice in _objects(data, "choices"):
            ci = choice.get("index", 0)
            for part in (choice.get("delta"), choice.get("message")):
                if not isinstance(part, dict):
                    continue
                for field in ("content", "reasoning_content", "reasoning", "refusal", "reasoning_details"):
                    _set(part, field, _text)
                for entry in _objects(part, "tool_calls"):
                    fn = entry.get("function")
                    if not isinstance(fn, dict):
                        continue
                    index = entry.get("index")
                    args = fn.get("arguments")
                    if isinstance(args, str) and args:
                        fn["arguments"] = self.fragments.mask(self._key((ci, index, entry.get("id"))), args)
                    elif args is not None:
                        fn["arguments"] = mask_value(args)

    def anthropic(self, data: dict[str, Any]) -> None:
        kind = data.get("type")
        if kind == "message_start":
            self.fragments.reset()
            message = data.get("message")
            if not isinstance(message, dict):
                _set(data, "message", mask_value)
            elif isinstance(message.get("content"), list):
                message["content"] = [self._block(b) for b in message["content"]]
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            data["content_block"] = self._block(data["content_block"])
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            delta = data["delta"]
            if delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                delta["partial_json"] = self.fragments.mask(self._key((data.get("index"),)), delta["partial_json"])
            for field in ("text", "thinking", "signature", "citation"):
                _set(delta, field, _text)

    def _block(self, block: Any) -> Any:
        if not isinstance(block, dict):
            return block
        out = dict(block)
        for field in ("text", "thinking", "signature", "data", "content"):
            _set(out, field, _text)
        _set(out, "input", mask_value)
        return out

    def bedrock_converse(self, data: dict[str, Any]) -> None:
        for kind, body in data.items():
            if not isinstance(body, dict):
                continue
            if kind == "messageStart":
                self.fragments.reset()
            delta = body.get("delta")
            if kind == "contentBlockDelta" and isinstance(delta, dict):
                tool = delta.get("toolUse")
                if isinstance(tool, dict) and isinstance(tool.get("input"), str):
                    tool["input"] = self.fragments.mask(self._key((body.get("contentBlockIndex"),)), tool["input"])
                _set(delta, "text", _text)
                _set(delta, "reasoningContent", mask_value)

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
        chunk["bytes"] = base64.b64encode(jsontext.dumps(inner).encode()).decode()

    def openai_responses(self, data: dict[str, Any]) -> None:
        kind = data.get("type") if isinstance(data.get("type"), str) else ""
        if kind == "response.function_call_arguments.delta" and isinstance(data.get("delta"), str):
            data["delta"] = self.fragments.mask(self._key(data.get("item_id") or data.get("output_index")), data["delta"])
        elif kind.endswith(".delta") or kind.endswith(".done"):
            _set(data, "delta", _text)
            _set(data, "text", _text)
            if isinstance(data.get("arguments"), str):
                data["arguments"] = mask_json_text(data["arguments"])
            _set(data, "input", _text)
        for field in ("item", "part"):
            if isinstance(data.get(field), dict):
                data[field] = self._item(data[field])
        response = data.get("response")
        if isinstance(response, dict):
            _set(response, "instructions", _text)
            response.pop("input", None)  # the request's messages are not kept
            if isinstance(response.get("output"), list):
                response["output"] = [self._item(i) if isinstance(i, dict) else mask_value(i) for i in response["output"]]

    def _item(self, item: dict[str, Any]) -> dict[str, Any]:
        out = dict(item)
        if isinstance(out.get("arguments"), str):
            out["arguments"] = mask_json_text(out["arguments"])
        for field in ("input", "text", "output", "summary", "content", "encrypted_content"):
            _set(out, field, _text)
        return out

    def gemini(self, data: dict[str, Any]) -> None:
        for candidate in _objects(data, "candidates"):
            if not isinstance(candidate.get("content"), dict):
                _set(candidate, "content", mask_value)
                continue
            for part in _objects(candidate["content"], "parts"):
                _set(part, "text", _text)
                _set(part, "thoughtSignature", _text)
                call = part.get("functionCall")
                if isinstance(call, dict):
                    _set(call, "args", mask_value)
                    for partial in _objects(call, "partialArgs"):
                        _set(partial, "stringValue", _text)

    def cohere(self, data: dict[str, Any]) -> None:
        message = ((data.get("delta") or {}).get("message")) if isinstance(data.get("delta"), dict) else None
        if not isinstance(message, dict):
            return
        _set(message, "tool_plan", _text)
        content = message.get("content")
        if isinstance(content, dict):
            _set(content, "text", _text)
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else [calls]:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str) and fn["arguments"]:
                fn["arguments"] = self.fragments.mask(self._key((data.get("index"),)), fn["arguments"])


_DIALECT_METHOD = {
    "openai-chat": "openai_chat",
    "anthropic": "anthropic",
    "bedrock-converse": "bedrock_converse",
    "bedrock-invoke": "bedrock_invoke",
    "openai-responses": "openai_responses",
    "gemini": "gemini",
    "cohere": "cohere",
}


def redact_events(events: Iterable[ProviderEvent], dialect: str | None = None) -> list[ProviderEvent]:
    """Masked copies of ``events`` (unparseable events are dropped)."""
    redactor = _Redactor()
    adapter = None
    out: list[ProviderEvent] = []
    for event in events:
        if event.error is not None:
            continue
        if dialect is None:
            dialect = detect(event)
        if adapter is None and dialect in ADAPTERS:
            adapter = make_adapter(dialect)
        ops: list[Any] = []
        if adapter is not None:
            try:
                ops = adapter.feed(event)
            except ADAPTER_FAULTS:
                ops = []
        for op in ops:
            if type(op) is CallStart:
                redactor.fragments.reset(op.key)  # a new call: its own string state
        redactor.keys = iter([op.key for op in ops if type(op) is ArgsFragment])
        data = event.data
        if data != DONE and isinstance(data, dict) and dialect in _DIALECT_METHOD:
            data = jsontext.rebuild(data)  # a private copy to rewrite
            try:
                getattr(redactor, _DIALECT_METHOD[dialect])(data)
            except ADAPTER_FAULTS:  # a shape the dialect never has
                data = mask_value(event.data)  # every string masked: nothing of it is kept
        out.append(event._replace(data=data, raw=None))  # the original text is not redacted
    return out


def redact_capture(data: bytes, name: str = "<input>", dialect: str | None = None) -> bytes:
    """A redacted reproducer of a capture: SSE stays SSE, anything else becomes JSON Lines.

    Raises ``ValueError`` when an event cannot be redacted (e.g. a Bedrock ``chunk.bytes``
    that is not JSON), naming ``name``; events of any nesting depth the capture reader
    accepts are redacted.
    """
    try:
        return _redact_capture(data, name, dialect)
    except RecursionError:  # a path not made iterative yet: a clear error, never a traceback
        raise ValueError(f"{name}: an event nests too deep to redact") from None


def _redact_capture(data: bytes, name: str, dialect: str | None) -> bytes:
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    as_sse = not head.startswith(b"{") and not _is_binary(head)
    events = redact_events(iter_capture([data], name), dialect)
    lines: list[str] = []
    for event in events:
        payload = DONE if event.data == DONE else jsontext.dumps(event.data, separators=(",", ":"))
        if as_sse:
            lines.append(_sse_event(event, payload))
        else:
            lines.append(payload + "\n")
    return "".join(lines).encode("utf-8", "surrogatepass")


def _sse_event(event: ProviderEvent, payload: str) -> str:
    """One SSE event, keeping the framing deviations the original had (so a reproducer of a
    framing bug still reproduces it): CRLF line ends, a comment line, ``data`` before
    ``event``, and ``[DONE]`` with extra whitespace."""
    eol = "\r\n" if "crlf_line_ends" in event.framing else "\n"
    if payload == DONE and "done_variant" in event.framing:
        payload = DONE + " "
    data = f"data: {payload}{eol}"
    kind = f"event: {event.event}{eol}" if event.event else ""
    fields = data + kind if "data_before_event" in event.framing else kind + data
    comment = f": comment{eol}" if "comment_line" in event.framing else ""
    return comment + fields + eol


def _is_binary(head: bytes) -> bool:
    """An AWS event stream starts with a 4-byte big-endian length: a NUL byte first."""
    return head[:1] == b"\x00"
