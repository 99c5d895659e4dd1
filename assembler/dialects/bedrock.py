"""AWS Bedrock streaming: ConverseStream, and InvokeModelWithResponseStream for Claude.

Provider documents: Amazon Bedrock API reference, ``ConverseStream`` (events
``messageStart``, ``contentBlockStart.start.toolUse`` {``toolUseId``, ``name``, ``type``},
``contentBlockDelta.delta.toolUse.input`` string fragments, ``contentBlockStop``,
``messageStop``, ``metadata``, and the ``*Exception`` error events) and
``InvokeModelWithResponseStream`` (``chunk.bytes``: base64 of an Anthropic Messages event).
``messageStop.stopReason`` (Invoke: ``stop_reason``) decides how the stream ends
(:mod:`.ends`): ``max_tokens`` is truncated, ``guardrail_intervened`` and
``content_filtered`` are errors, and then nothing commits.

Input is one event ``{"<event type>": <payload>}``: a JSON Lines capture as the AWS SDKs
yield decoded event-stream frames, or a raw ``application/vnd.amazon.eventstream`` body,
whose frames :mod:`toollatch.wire.capture` turns into the same shape (an ``exception`` frame
becomes ``{"<exception type>": <payload>}``, e.g. ``throttlingException``). A data-less
event that only carries a framing note (``truncated_frame``) makes no ops here; the
missing ``messageStop`` / ``message_stop`` then makes the stream truncated. Calls are keyed
by ``contentBlockIndex`` (see :mod:`.blocks` for an index started twice). A ``toolUse.input``
given as a JSON value instead of a string (in ``contentBlockStart`` or
``contentBlockDelta``, as some SDK dumps have it) is judged as that JSON text, after a
strict re-check of its event (:func:`.base.check_strict`).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from toollatch.wire.capture import ERROR_FRAME, ProviderEvent
from toollatch.wire.untrusted import parse_json
from toollatch.core.model import (
    ArgsFragment,
    BlockStop,
    CallStart,
    Executor,
    Op,
    Quirk,
    StreamError,
    StreamStart,
    StreamTruncated,
)
from toollatch.dialects.anthropic import AnthropicAdapter
from toollatch.dialects.base import check_strict, provider_error
from toollatch.dialects.ends import end_ops, shown_reason
from toollatch.dialects.words import shown_word
from toollatch.dialects.blocks import BlockKeys


class BedrockConverseAdapter:
    """Translates ConverseStream events into ops."""

    __slots__ = ("_blocks", "_ended", "_started")

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
            return self._block_start(index, body, event)
        if kind == "contentBlockDelta":
            return self._block_delta(index, body, event)
        if kind == "contentBlockStop":
            key = self._blocks.stop(index)
            return [BlockStop(key)] if key is not None else []
        if kind == "messageStop":
            self._ended = True
            reason = body.get("stopReason")
            reasons = [reason] if isinstance(reason, str) and reason else []
            return end_ops("stopReason", reasons, f"messageStop {shown_reason(reason)}" if reasons else "messageStop")
        if kind.endswith("Exception"):
            self._ended = True
            return [provider_error(body, (), prefix=shown_word(kind, "exception"), words=(kind,))]
        if kind == ERROR_FRAME:
            self._ended = True
            return [frame_error(event, body)]
        return []  # metadata and unknown events

    def close(self) -> list[Op]:
        if self._started and not self._ended:
            return [StreamTruncated("input ended before messageStop")]
        return []

    def _block_start(self, index: int | None, body: dict[str, Any], event: ProviderEvent) -> list[Op]:
        tool = (body.get("start") or {}).get("toolUse")
        if not isinstance(index, int):
            return []
        if not isinstance(tool, dict):
            self._blocks.release(index)
            return []
        executor: Executor = "server" if tool.get("type") == "server_tool_use" else "client"
        call_id = tool.get("toolUseId") if isinstance(tool.get("toolUseId"), str) and tool.get("toolUseId") else None
        name = tool.get("name") if isinstance(tool.get("name"), str) and tool.get("name") else None
        ops: list[Op] = []
        key, clash = self._blocks.start(index, call_id, ops)
        whole = tool.get("input")  # not in the ConverseStream reference; some SDK dumps carry it
        whole_text = None
        if isinstance(whole, str):
            whole_text = whole or None
        elif whole not in (None, {}):
            ops.append(Quirk("arguments_as_json_value"))
            whole_text = json.dumps(whole, ensure_ascii=False)
        ops.append(CallStart(key, call_id, name, executor, whole_text))
        if whole_text is not None and not isinstance(whole, str):
            check_strict(key, event, ops)
        if clash:
            ops.append(StreamError(f"content block {index} started again before its contentBlockStop"))
        return ops

    def _block_delta(self, index: int | None, body: dict[str, Any], event: ProviderEvent) -> list[Op]:
        tool = (body.get("delta") or {}).get("toolUse")
        key = self._blocks.get(index)
        if not isinstance(tool, dict) or key is None:
            return []
        text = tool.get("input")
        if isinstance(text, str):
            return [ArgsFragment(key, text)] if text else []
        if text is None:
            return []
        # an object (or other JSON value) where a string fragment belongs: judged as that JSON text
        ops: list[Op] = [Quirk("arguments_as_json_value"), ArgsFragment(key, json.dumps(text, ensure_ascii=False))]
        check_strict(key, event, ops)
        return ops


class BedrockInvokeAdapter:
    """Unwraps ``chunk.bytes`` (base64 Anthropic events) and reuses the Anthropic adapter."""

    __slots__ = ("_inner",)

    name = "bedrock-invoke"

    def __init__(self) -> None:
        self._inner = AnthropicAdapter()

    def feed(self, event: ProviderEvent) -> list[Op]:
        data = event.data
        if data is None and event.framing:
            return []  # a framing note only (truncated_frame); the pipeline records it
        chunk = data.get("chunk") if isinstance(data, dict) else None
        if not isinstance(chunk, dict) or not isinstance(chunk.get("bytes"), str):
            if isinstance(data, dict) and len(data) == 1:
                ((kind, body),) = data.items()
                if kind.endswith("Exception"):
                    return [provider_error(body, (), prefix=shown_word(kind, "exception"), words=(kind,))]
                if kind == ERROR_FRAME and isinstance(body, dict):
                    return [frame_error(event, body)]
            return [Quirk("non_chunk_line")]
        try:
            payload = base64.b64decode(chunk["bytes"], validate=True)
        except (binascii.Error, ValueError):
            return [StreamError(f"line {event.line}: chunk.bytes is not base64")]
        try:  # decoded once: parsed, and kept as the inner event's text
            text: str | None = payload.decode("utf-8-sig")
        except UnicodeDecodeError:
            text = None  # parse_json names the byte
        inner, problem = parse_json(payload if text is None else text)
        if problem is not None:
            return [StreamError(f"line {event.line}: chunk.bytes decodes to a payload that is {problem}")]
        return self._inner.feed(ProviderEvent(None, inner, event.line, event.offset, raw=text))

    def close(self) -> list[Op]:
        return self._inner.close()


def frame_error(event: ProviderEvent, body: dict[str, Any]) -> StreamError:
    """The provider's error an event-stream ``error`` frame reports (:data:`~toollatch.wire.capture.ERROR_FRAME`):
    its ``:error-code`` shown as a provider word (:func:`~toollatch.dialects.base.provider_error`:
    hidden by its length unless a word, checked against the calls' text where the stream
    ends), its ``:error-message`` free text kept for *Reveal* only."""
    return provider_error(body, ("code",), prefix=f"error frame {event.line} (byte {event.offset}): ")
