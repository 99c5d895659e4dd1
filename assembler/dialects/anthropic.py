"""Anthropic Messages streaming.

Provider document: Anthropic API, "Streaming Messages": ``message_start`` →
per content block ``content_block_start`` / ``content_block_delta`` /
``content_block_stop`` → ``message_delta`` → ``message_stop``; tool input arrives as
``input_json_delta.partial_json`` fragments; an ``error`` event ends the stream.

Calls are keyed by content-block ``index``. ``tool_use`` blocks are client calls;
``server_tool_use`` and ``mcp_tool_use`` blocks run on the provider (``executor:
server``): assembled and shown, never executed by the client, no result owed. A block
whose ``input`` arrives whole (in ``content_block_start`` or in
``message_start.message.content``) with no deltas uses that input. Several consecutive
``message_start`` events in one input are several streams.
"""

from __future__ import annotations

from typing import Any

from .. import jsontext
from ..capture import ProviderEvent
from ..model import (
    ArgsFragment,
    BlockStop,
    CallStart,
    Executor,
    Op,
    Quirk,
    StreamEnd,
    StreamError,
    StreamStart,
    StreamTruncated,
)

TOOL_BLOCKS: dict[str, Executor] = {"tool_use": "client", "server_tool_use": "server", "mcp_tool_use": "server"}


class AnthropicAdapter:
    """Translates Anthropic Messages stream events into ops."""

    name = "anthropic"

    def __init__(self) -> None:
        self._started = False
        self._ended = False
        self._tool_blocks: set[int] = set()

    def feed(self, event: ProviderEvent) -> list[Op]:
        data = event.data
        if not isinstance(data, dict):
            return [Quirk("non_object_event")]
        kind = data.get("type") or event.event
        if kind == "content_block_delta":  # the hot path: one per fragment
            delta = data.get("delta")
            if delta.__class__ is dict and delta.get("type") == "input_json_delta":
                index = data.get("index")
                if type(index) is not int or index not in self._tool_blocks:
                    return [Quirk("input_json_delta_for_non_tool_block")]
                fragment = delta.get("partial_json")
                return [ArgsFragment((index,), fragment)] if fragment.__class__ is str and fragment else []
            return []
        if kind == "message_start":
            return self._message_start(data)
        if kind == "error":
            self._ended = True
            return [StreamError(_error_detail(data.get("error")))]
        if kind == "content_block_start":
            return self._block_start(data.get("index"), data.get("content_block"))
        index = data.get("index") if isinstance(data.get("index"), int) else None
        if kind == "content_block_stop":
            return [BlockStop((index,))] if index in self._tool_blocks else []
        if kind == "message_stop":
            if self._ended:
                return [Quirk("message_stop_repeated")]
            self._ended = True
            return [StreamEnd("message_stop")]
        return []  # ping, message_delta (stop_reason is not the end), unknown event types

    def close(self) -> list[Op]:
        if self._started and not self._ended:
            return [StreamTruncated("input ended before message_stop")]
        return []

    def _message_start(self, data: dict[str, Any]) -> list[Op]:
        ops: list[Op] = []
        if self._started and not self._ended:
            ops.append(StreamTruncated("a new message_start arrived before message_stop"))
        self._started, self._ended = True, False
        self._tool_blocks = set()
        message = data.get("message") if isinstance(data.get("message"), dict) else {}
        ops.append(StreamStart({"message_id": message.get("id"), "model": message.get("model")}))
        content = message.get("content")
        if isinstance(content, list):
            for index, block in enumerate(content):
                started = self._block_start(index, block)
                ops.extend(started)
                if started:
                    ops.append(BlockStop((index,)))
        return ops

    def _block_start(self, index: Any, block: Any) -> list[Op]:
        if not isinstance(index, int) or not isinstance(block, dict):
            return []
        executor = TOOL_BLOCKS.get(block.get("type", ""))
        if executor is None:
            return []
        self._tool_blocks.add(index)
        whole = block.get("input")
        whole_text = jsontext.dumps(whole) if whole not in (None, {}) else None  # any depth: the latch judges it
        call_id = block.get("id") if isinstance(block.get("id"), str) else None
        name = block.get("name") if isinstance(block.get("name"), str) else None
        return [CallStart((index,), call_id, name, executor, whole_text)]


def _error_detail(error: Any) -> str:
    if isinstance(error, dict):
        return ": ".join(str(error[k]) for k in ("type", "message") if error.get(k)) or "provider error"
    return "provider error"
