"""Dialect adapters, one module per provider, and detection from the first events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toollatch.wire.capture import DONE, ERROR_FRAME, ProviderEvent
from toollatch.dialects.anthropic import AnthropicAdapter
from toollatch.dialects.base import DialectAdapter, event_type
from toollatch.dialects.bedrock import BedrockConverseAdapter, BedrockInvokeAdapter
from toollatch.dialects.cohere import CohereAdapter
from toollatch.dialects.gemini import GeminiAdapter
from toollatch.dialects.openai_chat import OpenAIChatAdapter
from toollatch.dialects.openai_responses import OpenAIResponsesAdapter

ADAPTERS: dict[str, Callable[[], DialectAdapter]] = {
    "openai-chat": OpenAIChatAdapter,
    "openai-responses": OpenAIResponsesAdapter,
    "anthropic": AnthropicAdapter,
    "bedrock-converse": BedrockConverseAdapter,
    "bedrock-invoke": BedrockInvokeAdapter,
    "gemini": GeminiAdapter,
    "cohere": CohereAdapter,
}

#: Dialects recognised by detection; those not in ADAPTERS are named in the error.
KNOWN_DIALECTS = ("openai-chat", "openai-responses", "anthropic", "bedrock-converse", "bedrock-invoke", "gemini", "cohere")

_ANTHROPIC = {"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
_BEDROCK = {"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop"}
_COHERE = {"message-start", "content-start", "content-delta", "tool-plan-delta", "tool-call-start", "tool-call-delta", "tool-call-end", "message-end"}


def detect(event: ProviderEvent) -> str | None:
    """The dialect this event belongs to, or None when it does not tell (e.g. ``ping``)."""
    data: Any = event.data
    if data == DONE or not isinstance(data, dict):
        return None
    kind = event_type(data, event)
    if "choices" in data or data.get("object") == "chat.completion.chunk":
        return "openai-chat"
    if kind in _ANTHROPIC:
        return "anthropic"
    if kind.startswith("response."):
        return "openai-responses"
    if kind in _COHERE:
        return "cohere"
    if "candidates" in data:
        return "gemini"
    if len(data) == 1:
        (only,) = data
        if only in _BEDROCK or only == ERROR_FRAME:  # an event-stream error frame (Bedrock's framing) first
            return "bedrock-converse"
        if only == "chunk" and isinstance(data["chunk"], dict) and "bytes" in data["chunk"]:
            return "bedrock-invoke"
    return None


def make_adapter(dialect: str) -> DialectAdapter:
    """A new adapter for ``dialect``; raises KeyError naming supported dialects."""
    try:
        return ADAPTERS[dialect]()
    except KeyError:
        raise KeyError(f"dialect {dialect!r} is not supported; supported: {', '.join(ADAPTERS)}") from None


__all__ = ["ADAPTERS", "KNOWN_DIALECTS", "DialectAdapter", "detect", "make_adapter"]
