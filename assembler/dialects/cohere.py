"""Cohere Chat API v2 streaming (``POST /v2/chat`` with ``stream: true``).

Provider document: Cohere API reference, "Chat (v2) → streaming": ``message-start`` →
``tool-plan-delta`` / ``content-*`` text events → per call ``tool-call-start``
(``index``, ``delta.message.tool_calls`` = ``{id, type, function: {name, arguments}}``) →
``tool-call-delta`` (``delta.message.tool_calls.function.arguments`` string fragments) →
``tool-call-end`` → ``message-end`` (``delta.finish_reason`` one of ``COMPLETE``,
``STOP_SEQUENCE``, ``MAX_TOKENS``, ``TOOL_CALL``, ``ERROR``; ``delta.error`` holds the
message of a generation error).

Calls are keyed by the event ``index`` (``(index,)``; see :mod:`.blocks` for an index
started twice: a later call there gets its own key). ``tool-call-end`` is the block
stop, ``message-end`` the normal end; ``finish_reason: ERROR`` (or a ``delta.error``) is
a provider error. Any other ``finish_reason`` decides the end by the rule of :mod:`.ends`:
``MAX_TOKENS`` is truncated, and then nothing commits. ``function.arguments`` given as a
JSON value instead of a string is judged as that JSON text (quirk
``arguments_as_json_value``), after a strict re-check of its event
(:func:`.base.check_strict`), never dropped.
"""

from __future__ import annotations

import json
from typing import Any

from toollatch.wire.capture import ProviderEvent
from toollatch.core.model import ArgsFragment, BlockStop, CallKey, CallStart, Op, Quirk, StreamError, StreamStart, StreamTruncated
from toollatch.dialects.base import check_strict, event_type, provider_error
from toollatch.dialects.ends import end_ops, shown_reason
from toollatch.dialects.blocks import BlockKeys


def is_error_event(event: ProviderEvent) -> bool:
    """Whether :meth:`CohereAdapter.feed` reads ``event`` as the provider's error: its ``type``
    (or where that is not a string its SSE event name) is ``error``, or it has none and
    carries a string ``message``."""
    data = event.data
    return isinstance(data, dict) and _is_error(event_type(data, event), data)


def _is_error(kind: str, data: dict[str, Any]) -> bool:
    """An event of type ``kind`` is the provider's error: typed so, or untyped with a string ``message``."""
    return kind == "error" or (isinstance(data.get("message"), str) and not kind)


class CohereAdapter:
    """Translates Cohere v2 chat stream events into ops."""

    __slots__ = ("_blocks", "_ended", "_open", "_started")

    name = "cohere"

    def __init__(self) -> None:
        self._started = False
        self._ended = False
        self._open: dict[CallKey, None] = {}  # started, no tool-call-end yet (an ordered set)
        self._blocks = BlockKeys()

    def feed(self, event: ProviderEvent) -> list[Op]:
        data = event.data
        if not isinstance(data, dict):
            return [Quirk("non_object_event")]
        kind = event_type(data, event)
        if kind == "message-start":
            ops: list[Op] = []
            if self._started and not self._ended:
                ops.append(StreamTruncated("a new message-start arrived before message-end"))
            self._started, self._ended, self._open, self._blocks = True, False, {}, BlockKeys()
            ops.append(StreamStart({"message_id": data.get("id")}))
            return ops
        if kind == "tool-call-start":
            return self._start(data, event)
        if kind == "tool-call-delta":
            key = self._key(data)
            if key is None:
                return [Quirk("tool_call_delta_without_call")]
            ops = []
            _arguments(key, _function(data).get("arguments"), event, ops)
            return ops
        if kind == "tool-call-end":
            key = self._key(data)
            if key is None:
                return [Quirk("tool_call_end_without_call")]
            self._blocks.stop(key[0])
            self._open.pop(key, None)
            return [BlockStop(key)]
        if kind == "message-end":
            return self._message_end(data)
        if _is_error(kind, data):
            self._ended = True
            return [provider_error(data.get("message"), (), prefix="error: ")]
        return []  # tool-plan-delta, content-*, citation-*, debug, unknown

    def close(self) -> list[Op]:
        if self._ended:
            return []
        return [StreamTruncated("input ended before message-end")]

    def _start(self, data: dict[str, Any], event: ProviderEvent) -> list[Op]:
        index = data.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = self._blocks.next_index  # no index: the next position
        entry = _tool_call(data)
        fn = _function(data)
        call_id = entry.get("id") if isinstance(entry.get("id"), str) and entry.get("id") else None
        name = fn.get("name") if isinstance(fn.get("name"), str) and fn.get("name") else None
        ops: list[Op] = []
        key, clash = self._blocks.start(index, call_id, ops)
        self._open[key] = None
        ops.append(CallStart(key, call_id, name))
        if clash:
            ops.append(StreamError(f"tool call {index} started again before its tool-call-end"))
            return ops
        _arguments(key, fn.get("arguments"), event, ops)
        return ops

    def _key(self, data: dict[str, Any]) -> CallKey | None:
        """The call a delta or end belongs to: the newest at its index, else the one open call."""
        index = data.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            return self._blocks.get(index) or (index,)  # never started: the assembler opens it
        return next(iter(self._open)) if len(self._open) == 1 else None

    def _message_end(self, data: dict[str, Any]) -> list[Op]:
        delta = data.get("delta") if isinstance(data.get("delta"), dict) else {}
        reason = delta.get("finish_reason")
        self._ended = True
        if reason == "ERROR" or delta.get("error"):
            return [provider_error(delta.get("error"), (), prefix=f"message-end {shown_reason(str(reason))}: " if reason else "message-end: ", words=(str(reason),) if reason else ())]
        reasons = [reason] if isinstance(reason, str) and reason else []
        return end_ops("finish_reason", reasons, f"message-end {shown_reason(reason)}" if reasons else "message-end")


def _arguments(key: CallKey, value: Any, event: ProviderEvent, ops: list[Op]) -> None:
    """``function.arguments`` of a start or delta: a string fragment, or a JSON value judged
    as its JSON text (after a strict re-check of the event that carried it)."""
    if isinstance(value, str):
        if value:
            ops.append(ArgsFragment(key, value))
    elif value is not None:
        ops.append(Quirk("arguments_as_json_value"))
        ops.append(ArgsFragment(key, json.dumps(value, ensure_ascii=False)))
        check_strict(key, event, ops)


def _tool_call(data: dict[str, Any]) -> dict[str, Any]:
    delta = data.get("delta") if isinstance(data.get("delta"), dict) else {}
    message = delta.get("message") if isinstance(delta.get("message"), dict) else {}
    entry = message.get("tool_calls")
    if isinstance(entry, list) and len(entry) == 1:  # some SDK dumps wrap the single call in a list
        entry = entry[0]
    return entry if isinstance(entry, dict) else {}


def _function(data: dict[str, Any]) -> dict[str, Any]:
    fn = _tool_call(data).get("function")
    return fn if isinstance(fn, dict) else {}
