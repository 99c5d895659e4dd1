"""Anthropic Messages streaming.

Provider document: Anthropic API, "Streaming Messages": ``message_start`` →
per content block ``content_block_start`` / ``content_block_delta`` /
``content_block_stop`` → ``message_delta`` → ``message_stop``; tool input arrives as
``input_json_delta.partial_json`` fragments; an ``error`` event ends the stream. The
``message_delta.delta.stop_reason`` decides how ``message_stop`` ends it (:mod:`.ends`):
``max_tokens`` is truncated, ``refusal`` an error, and then nothing commits.

Calls are keyed by content-block ``index`` (see :mod:`.blocks` for an index started
twice: a later call there gets its own key, never the earlier call's buffer). ``tool_use`` blocks are client calls;
``server_tool_use`` and ``mcp_tool_use`` blocks run on the provider (``executor:
server``): assembled and shown, never executed by the client, no result owed. A block
whose ``input`` arrives whole (in ``content_block_start`` or in
``message_start.message.content``) with no deltas uses that input. Several consecutive
``message_start`` events in one input are several streams.

Argument text that arrives as a JSON value (a whole ``input``, or a ``partial_json`` that
is not a string) is judged as its JSON text; the envelope parse keeps the last of duplicate
keys, so the event's own text is re-checked strictly (:func:`.base.check_strict`).
"""

from __future__ import annotations

from typing import Any

from toollatch.core import jsontext
from toollatch.wire.capture import ProviderEvent
from toollatch.core.model import (
    ArgsFragment,
    BlockStop,
    CallKey,
    CallStart,
    Executor,
    Op,
    Quirk,
    StreamError,
    StreamStart,
    StreamTruncated,
)
from toollatch.dialects.base import check_strict, provider_error
from toollatch.dialects.ends import end_ops
from toollatch.dialects.blocks import BlockKeys

TOOL_BLOCKS: dict[str, Executor] = {"tool_use": "client", "server_tool_use": "server", "mcp_tool_use": "server"}


def is_error_event(event: ProviderEvent) -> bool:
    """Whether :meth:`AnthropicAdapter.feed` reads ``event`` as the provider's error: its
    ``type``, or where it has none its SSE event name, is ``error``."""
    data = event.data
    return isinstance(data, dict) and (data.get("type") or event.event) == "error"


class AnthropicAdapter:
    """Translates Anthropic Messages stream events into ops."""

    __slots__ = ("_blocks", "_ended", "_started", "_stop_reason")

    name = "anthropic"

    def __init__(self) -> None:
        self._started = False
        self._ended = False
        self._stop_reason: str | None = None
        self._blocks = BlockKeys()

    def feed(self, event: ProviderEvent) -> list[Op]:
        data = event.data
        if not isinstance(data, dict):
            return [Quirk("non_object_event")]
        kind = data.get("type") or event.event
        if kind == "content_block_delta":  # the hot path: one per fragment
            delta = data.get("delta")
            if delta.__class__ is dict and delta.get("type") == "input_json_delta":
                index = data.get("index")
                key = self._blocks.current.get(index) if type(index) is int else None
                if key is None:
                    return [Quirk("input_json_delta_for_non_tool_block")]
                fragment = delta.get("partial_json")
                if fragment.__class__ is str:
                    return [ArgsFragment(key, fragment)] if fragment else []
                return _json_valued_fragment(key, fragment, event)
            return []
        if kind == "message_start":
            return self._message_start(data, event)
        if kind == "error":
            self._ended = True
            return [provider_error(data.get("error"), ("type",))]
        if kind == "content_block_start":
            return self._block_start(data.get("index"), data.get("content_block"), event)
        if kind == "content_block_stop":
            key = self._blocks.stop(data.get("index"))
            return [BlockStop(key)] if key is not None else []
        if kind == "message_stop":
            if self._ended:
                return [Quirk("message_stop_repeated")]
            self._ended = True
            return end_ops("stop_reason", [self._stop_reason] if self._stop_reason else [], "message_stop")
        if kind == "message_delta":  # stop_reason is not the end: message_stop is
            delta = data.get("delta")
            reason = delta.get("stop_reason") if isinstance(delta, dict) else None
            if isinstance(reason, str) and reason:
                self._stop_reason = reason
        return []  # ping, unknown event types

    def close(self) -> list[Op]:
        if self._started and not self._ended:
            return [StreamTruncated("input ended before message_stop")]
        return []

    def _message_start(self, data: dict[str, Any], event: ProviderEvent) -> list[Op]:
        ops: list[Op] = []
        if self._started and not self._ended:
            ops.append(StreamTruncated("a new message_start arrived before message_stop"))
        self._started, self._ended = True, False
        self._blocks = BlockKeys()
        message = data.get("message") if isinstance(data.get("message"), dict) else {}
        reason = message.get("stop_reason")
        self._stop_reason = reason if isinstance(reason, str) and reason else None
        ops.append(StreamStart({"message_id": message.get("id"), "model": message.get("model")}))
        content = message.get("content")
        if isinstance(content, list):
            for index, block in enumerate(content):
                started = self._block_start(index, block, event)
                ops.extend(started)
                key = self._blocks.stop(index) if started else None
                if key is not None:
                    ops.append(BlockStop(key))
        return ops

    def _block_start(self, index: Any, block: Any, event: ProviderEvent) -> list[Op]:
        if not isinstance(index, int) or not isinstance(block, dict):
            return []
        executor = TOOL_BLOCKS.get(block.get("type", ""))
        if executor is None:
            self._blocks.release(index)
            return []
        whole = block.get("input")
        whole_text = jsontext.dumps(whole) if whole not in (None, {}) else None  # any depth: the latch judges it
        call_id = block.get("id") if isinstance(block.get("id"), str) else None
        name = block.get("name") if isinstance(block.get("name"), str) else None
        ops: list[Op] = []
        key, clash = self._blocks.start(index, call_id, ops)
        ops.append(CallStart(key, call_id, name, executor, whole_text))
        if whole_text is not None:  # the event's parse may have hidden a duplicate key in ``input``
            check_strict(key, event, ops)
        if clash:
            ops.append(StreamError(f"content block {index} started again before its content_block_stop"))
        return ops


def _json_valued_fragment(key: CallKey, value: Any, event: ProviderEvent) -> list[Op]:
    """``partial_json`` given as a JSON value, not a string: judged as that JSON text."""
    if value is None:
        return []
    ops: list[Op] = [Quirk("arguments_as_json_value"), ArgsFragment(key, jsontext.dumps(value))]
    check_strict(key, event, ops)
    return ops
