"""How a stream ends: one rule for every dialect (DESIGN.md, "How a stream ends").

Every provider states why its output stopped: OpenAI Chat ``finish_reason``, Responses
``incomplete_details.reason``, Anthropic and Bedrock Invoke ``stop_reason``, Bedrock
Converse ``stopReason``, Gemini ``finishReason``, Cohere ``finish_reason``. Each adapter
records that reason and, at the stream's end sentinel (or the end of the body, for Gemini),
asks :func:`end_ops` for the op that ends the stream. The rule:

========================================  ===========  ======================================
the provider says                         ``end``      calls
========================================  ===========  ======================================
a normal end (:data:`COMPLETE`)           complete     may commit
cut for length (:data:`TRUNCATED`)        truncated    none commits: ``stream_truncated: …``
stopped by the provider (:data:`ERROR`)   error        none commits: ``stream_error: …``
========================================  ===========  ======================================

Reasons are matched without regard to case (Gemini and Cohere spell them in capitals, some
OpenAI-compatible gateways pass them through as they are). A reason in none of the tables
is taken as a normal end and recorded as quirk ``unknown_finish_reason``: gateways invent
spellings of "stop" (``eos``, ``end``); the latch still checks every call. Where a stream has
several choices or candidates, the worst of their reasons decides (error over truncated over
complete).

Sources: OpenAI API reference (chat completion chunk ``finish_reason``: ``stop``,
``length``, ``tool_calls``, ``content_filter``, ``function_call``; Responses
``incomplete_details.reason``: ``max_output_tokens``, ``content_filter``); Anthropic
"Handling stop reasons" (``end_turn``, ``max_tokens``, ``stop_sequence``, ``tool_use``,
``pause_turn``, ``refusal``, ``model_context_window_exceeded``); Amazon Bedrock
``ConverseStream`` ``messageStop.stopReason`` (``end_turn``, ``tool_use``, ``max_tokens``,
``stop_sequence``, ``guardrail_intervened``, ``content_filtered``,
``malformed_model_output``, ``malformed_tool_use``, ``model_context_window_exceeded``);
Gemini API ``Candidate.FinishReason`` (``STOP``, ``MAX_TOKENS``, ``SAFETY``, ``RECITATION``,
``LANGUAGE``, ``OTHER``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII``,
``MALFORMED_FUNCTION_CALL``, ``IMAGE_*``, ``UNEXPECTED_TOOL_CALL``, ``TOO_MANY_TOOL_CALLS``,
…); Cohere Chat v2 ``finish_reason`` (``COMPLETE``, ``STOP_SEQUENCE``, ``MAX_TOKENS``,
``TOOL_CALL``, ``ERROR``, ``TIMEOUT``; v1 also ``ERROR_TOXIC``, ``ERROR_LIMIT``,
``USER_CANCEL``); OpenAI-compatible servers' own values: Mistral ``model_length``, vLLM
``abort``, DeepSeek ``insufficient_system_resource``, OpenRouter ``error``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from toollatch.core.model import Op, Quirk, StreamEnd, StreamError, StreamTruncated
from toollatch.dialects.words import is_word, shown_word

EndKind = Literal["complete", "truncated", "error"]

#: A normal end: calls may commit.
COMPLETE = frozenset(
    {
        "stop", "tool_calls", "function_call",  # OpenAI Chat
        "completed",  # OpenAI Responses (response.completed)
        "end_turn", "tool_use", "stop_sequence", "pause_turn",  # Anthropic, Bedrock
        "tool_call", "complete",  # Cohere (TOOL_CALL, COMPLETE; STOP_SEQUENCE above)
    }
)
#: The output was cut for length: the stream is truncated, nothing commits.
TRUNCATED = frozenset(
    {
        "length",  # OpenAI Chat
        "max_output_tokens",  # OpenAI Responses incomplete_details.reason
        "max_tokens",  # Anthropic, Bedrock, Gemini MAX_TOKENS, Cohere MAX_TOKENS
        "model_context_window_exceeded",  # Anthropic, Bedrock
        "model_length",  # Mistral (the context length was reached)
    }
)
#: The provider stopped the output itself (policy, refusal, malformed call, guardrail,
#: error): the stream ends in error, nothing commits, so a caller can retry.
ERROR = frozenset(
    {
        "content_filter",  # OpenAI Chat, Responses incomplete_details.reason
        "error",  # OpenRouter and other gateways (finish_reason "error"), Cohere ERROR
        "refusal",  # Anthropic
        "guardrail_intervened", "content_filtered",  # Bedrock
        "malformed_model_output", "malformed_tool_use",  # Bedrock
        "safety", "recitation", "language", "other", "blocklist", "prohibited_content", "spii",
        "malformed_function_call", "unexpected_tool_call", "too_many_tool_calls",
        "malformed_response", "missing_thought_signature", "finish_reason_unspecified",
        "image_safety", "image_prohibited_content", "image_recitation", "image_other",
        "no_image",  # Gemini
        "error_toxic", "error_limit", "timeout", "user_cancel",  # Cohere
        "abort",  # vLLM (the request was aborted)
        "insufficient_system_resource",  # DeepSeek (the generation was interrupted)
    }
)

_RANK: dict[EndKind, int] = {"complete": 0, "truncated": 1, "error": 2}


def kind_of(reason: str) -> EndKind | None:
    """The end a provider's stop reason means (``"complete"``, ``"truncated"``, ``"error"``),
    or None for a reason in none of the tables. Case is ignored."""
    folded = reason.strip().lower()
    if folded in COMPLETE:
        return "complete"
    if folded in TRUNCATED:
        return "truncated"
    if folded in ERROR:
        return "error"
    return None


def shown_reason(reason: str) -> str:
    """``reason`` as it may be shown (:func:`toollatch.dialects.words.shown_word`): a known
    stop reason or an identifier shape as it is, else ``"(hidden reason, N characters)"``."""
    return shown_word(reason, "reason")


#: One op per normal end detail, shared by every stream that ends so (ops are never changed).
_NORMAL_ENDS: dict[str | None, StreamEnd] = {}


def end_ops(field: str, reasons: Iterable[str], normal: str | None, *, floor: EndKind = "complete") -> list[Op]:
    """The ops that end a stream whose provider gave ``reasons`` in ``field``.

    ``reasons``: the stop reason of each choice / candidate (empty when the provider gave
    none: a normal end). ``normal``: the end detail when the stream ends normally (e.g.
    ``"[DONE]"``, ``"message_stop"``). ``floor``: the least severe end the event itself
    means whatever the reason says (Responses ``response.incomplete`` is at least
    ``"truncated"``); a reason in none of the tables means ``floor``, recorded as quirk
    ``unknown_finish_reason`` when that is ``"complete"``. Returns ``[StreamEnd(normal)]``,
    ``[StreamTruncated("<field> <reason>")]`` or ``[StreamError("<field> <reason>")]`` (the
    reasons that decided, comma-separated), after any quirk.
    """
    if floor == "complete" and type(reasons) is list and COMPLETE.issuperset(reasons):
        # the common end: every reason a normal one, nothing to record
        end = _NORMAL_ENDS.get(normal)
        if end is None:
            end = StreamEnd(normal)
            if len(_NORMAL_ENDS) < 16:  # an adapter's own few details ("[DONE]", "message_stop"...)
                _NORMAL_ENDS[normal] = end
        return [end]
    ops: list[Op] = []
    worst: EndKind = floor
    named: dict[EndKind, list[str]] = {"complete": [], "truncated": [], "error": []}
    reasons = list(reasons)
    for reason in reasons:
        kind = kind_of(reason)
        if kind is None:
            if floor == "complete":
                ops.append(Quirk("unknown_finish_reason"))
        reason = shown_reason(reason)
        kind = kind if kind is not None and _RANK[kind] > _RANK[floor] else floor
        if reason not in named[kind]:
            named[kind].append(reason)
        if _RANK[kind] > _RANK[worst]:
            worst = kind
    unshown = [r for r in reasons if not is_word(r)]
    message = f"{field.rstrip(':')}: {', '.join(unshown)}" if unshown else None  # the hidden reasons, for Reveal only
    words = tuple(r for r in reasons if is_word(r))
    if worst == "complete":
        ops.append(StreamEnd(normal, message, words))
        return ops
    detail = f"{field} {','.join(named[worst]) or 'no reason given'}"
    ops.append(StreamTruncated(detail, message, words) if worst == "truncated" else StreamError(detail, message, words))
    return ops


__all__ = ["COMPLETE", "ERROR", "TRUNCATED", "EndKind", "end_ops", "kind_of", "shown_reason"]
