"""AWS Bedrock streaming: ConverseStream, and InvokeModelWithResponseStream for Claude.

Provider documents: Amazon Bedrock API reference, ``ConverseStream`` (events
``messageStart``, ``contentBlockStart.start.toolUse`` {``toolUseId``, ``name``, ``type``},
``contentBlockDelta.delta.toolUse.input`` string fragments, ``contentBlockStop``,
``messageStop``, ``metadata``, and the ``*Exception`` error events) and
``InvokeModelWithResponseStream`` (``chunk.bytes``: base64 of an Anthropic Messages event).

Input is one event ``{"<event type>": <payload>}``: a JSON Lines capture as the AWS SDKs
yield decoded event-stream frames, or a raw ``application/vnd.amazon.eventstream`` body,
whose frames :mod:`assembler.capture` turns into the same shape (an ``exception`` frame
becomes ``{"<exception type>": <payload>}``, e.g. ``throttlingException``). A data-less
event that only carries a framing note (``truncated_frame``) makes no ops here; the
missing ``messageStop`` / ``message_stop`` then makes the stream truncated. Calls are keyed
by ``contentBlockIndex`` (see :mod:`.blocks` for an index started twice).
"""

from __future__ import annotations

import base64
import binascii
import json

from ..capture import ProviderEvent
from ..model import ArgsFragment, BlockStop, CallStart, Op, Quirk, StreamEnd, StreamError, StreamStart, StreamTruncated
from .anthropic import AnthropicAdapter
from .blocks import BlockKeys


class BedrockConverseAdapter:
    """Translates ConverseStream events into ops."""

    name = "bedrock-converse"

    def __init__(self) -> None:
        self._started = False
        self._ended = False
        self._blocks = BlockKeys()

    def feed(self, event: ProviderEvent) -> list[Op]:
        data = event.data
        if data is None and event.framing:
            return []  # a framing note only (truncated_frame); the pipeline records it
        if not isinstance(data, dict) or len(data) != 1:
            return [Quirk("non_event_line")]
        ((kind, body),) = data.items()
        body = body if isinstance(body, dict) else {}
        index = body.get("contentBlockIndex") if isinstance(body.get("contentBlockIndex"), int) else None
        if kind == "messageStart":
            ops: list[Op] = []
            if self._started and not self._ended:
                ops.append(StreamTruncated("a new messageStart arrived before messageStop"))
            self._started, self._ended, self._blocks = True, False, BlockKeys()
            ops.append(StreamStart({}))
            return ops
        if kind == "contentBlockStart":
            tool = (body.get("start") or {}).get("toolUse")
            if not isinstance(index, int):
                return []
            if not isinstance(tool, dict):
                self._blocks.release(index)
                return []
            executor = "server" if tool.get("type") == "server_tool_use" else "client"
            call_id = tool.get("toolUseId") if isinstance(tool.get("toolUseId"), str) and tool.get("toolUseId") else None
            ops = []
            key, clash = self._blocks.start(index, call_id, ops)
            ops.append(CallStart(key, call_id, tool.get("name") or None, executor))
            if clash:
                ops.append(StreamError(f"content block {index} started again before its contentBlockStop"))
            return ops
        if kind == "contentBlockDelta":
            tool = (body.get("delta") or {}).get("toolUse")
            key = self._blocks.get(index)
            if isinstance(tool, dict) and key is not None:
                text = tool.get("input")
                return [ArgsFragment(key, text)] if isinstance(text, str) and text else []
            return []
        if kind == "contentBlockStop":
            key = self._blocks.stop(index)
            return [BlockStop(key)] if key is not None else []
        if kind == "messageStop":
            self._ended = True
            return [StreamEnd(f"messageStop {body.get('stopReason', '')}".strip())]
        if kind.endswith("Exception"):
            self._ended = True
            return [StreamError(f"{kind}: {body.get('message', '')}".rstrip(": "))]
        return []  # metadata and unknown events

    def close(self) -> list[Op]:
        if self._started and not self._ended:
            return [StreamTruncated("input ended before messageStop")]
        return []


class BedrockInvokeAdapter:
    """Unwraps ``chunk.bytes`` (base64 Anthropic events) and reuses the Anthropic adapter."""

    name = "bedrock-invoke"

    def __init__(self) -> None:
        self._inner = AnthropicAdapter()

    def feed(self, event: ProviderEvent) -> list[Op]:
        data = event.data
        if data is None and event.framing:
            return []  # a framing note only (truncated_frame); the pipeline records it
        chunk = data.get("chunk") if isinstance(data, dict) else None
        if not isinstance(chunk, dict) or not isinstance(chunk.get("bytes"), str):
            if isinstance(data, dict) and len(data) == 1 and next(iter(data)).endswith("Exception"):
                ((kind, body),) = data.items()
                return [StreamError(f"{kind}: {(body or {}).get('message', '')}".rstrip(": "))]
            return [Quirk("non_chunk_line")]
        try:
            inner = json.loads(base64.b64decode(chunk["bytes"], validate=True))
        except (binascii.Error, ValueError):
            return [StreamError(f"line {event.line}: chunk.bytes is not base64 JSON")]
        return self._inner.feed(ProviderEvent(None, inner, event.line, event.offset))

    def close(self) -> list[Op]:
        return self._inner.close()
