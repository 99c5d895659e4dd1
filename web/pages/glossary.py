"""Plain words for the codes the assembler emits, shown beside each code on the pages.

Families: ``reason`` (why a call did not commit: :class:`~toollatch.core.model.Reason`), ``end``
(how a stream ended: ``StreamEndKind``), ``quirk`` (a tolerated deviation from the
provider's documented stream, counted), ``diagnosis`` (the ``kind`` of a failed call's
diagnosis, :attr:`~toollatch.core.model.CallOutcome.diagnosis`) and ``strategy`` (a naive
client's behaviour in the naive-client lane, :mod:`toollatch.redaction.naive`). ``tests/test_glossary.py``
reads every code from the assembler's source and checks each has an entry here.

:func:`plain` looks a code up; :func:`plain_reason` takes a whole reason string
(``"invalid_json: Expecting ',' at byte 90"``) by its code; :func:`short_reason` gives the
few words a one-line summary uses (``"invalid JSON at byte 90"``).
"""

from __future__ import annotations

import re

REASONS: dict[str, str] = {
    "invalid_json": "the arguments are not valid JSON",
    "arguments_not_object": "the arguments are valid JSON but not an object",
    "arguments_exceed_max_bytes": "the arguments are larger than the configured limit",
    "arguments_too_deep": "the arguments nest deeper than the configured limit",
    "too_many_tool_calls": "more tool calls in one turn than the configured limit",
    "missing_id_or_name": "the provider never sent the call's id or tool name",
    "unknown_tool": "the tool name is not among the request's tools",
    "schema_invalid": "the arguments do not match the tool's JSON Schema",
    "stream_truncated": "the stream stopped before the provider's normal end",
    "stream_error": "the provider reported an error mid-stream",
    "idle_timeout": "nothing arrived for this call for too long",
    "cancelled": "stopped before the stream ended: the client went away or Stop was pressed",
    "budget_exceeded": "the stream went over its overall size or time budget",
    "name_conflict": "a later chunk named a different tool for the same call",
    "schema_check_timeout": "the JSON Schema check could not finish within its time limit",
}

#: The few words a one-line summary uses for a reason code.
SHORT_REASONS: dict[str, str] = {
    "invalid_json": "invalid JSON",
    "arguments_not_object": "arguments not an object",
    "arguments_exceed_max_bytes": "arguments over the size limit",
    "arguments_too_deep": "arguments nested too deep",
    "too_many_tool_calls": "too many tool calls",
    "missing_id_or_name": "no id or tool name",
    "unknown_tool": "unknown tool",
    "schema_invalid": "arguments do not match the schema",
    "stream_truncated": "stream cut off",
    "stream_error": "provider error mid-stream",
    "idle_timeout": "idle timeout",
    "cancelled": "cancelled",
    "budget_exceeded": "budget exceeded",
    "name_conflict": "tool name changed mid-call",
    "schema_check_timeout": "schema check timed out",
}

ENDS: dict[str, str] = {
    "complete": "the provider ended the stream normally",
    "truncated": "the stream stopped before the provider's normal end",
    "error": "the provider sent an error instead of a normal end",
    "cancelled": "stopped by the client or the Stop button",
}

DIAGNOSES: dict[str, str] = {
    "invalid": "the JSON breaks at a byte where that token cannot come",
    "incomplete": "the JSON text stops before it is closed",
    "complete": "the JSON text so far is complete",
    "schema": "valid JSON that breaks the tool's schema",
    "semantic": "parses, but strict JSON refuses it (a duplicate key, a non-finite number...)",
    "cut_off": "the stream ended before the call's arguments did",
}

#: What each naive client strategy does (the naive-client lane).
STRATEGIES: dict[str, str] = {
    "execute_when_parses": "runs a call as soon as its buffer parses as JSON",
    "count_brackets": "runs a call when its brackets balance",
    "execute_at_block_end": "runs a call at its block's end, before the stream ended",
    "merge_by_position": "keys fragments by position in the tool_calls array, not by index",
    "concatenate_names": "appends function.name deltas like arguments",
}

QUIRKS: dict[str, str] = {
    # SSE framing
    "comment_line": "SSE comment lines (keep-alives) between events",
    "crlf_line_ends": "lines end in CR LF",
    "data_before_event": "a data line came before its event line",
    "done_variant": "the [DONE] marker with extra whitespace",
    "invalid_utf8": "bytes that are not UTF-8 (replaced)",
    "truncated_frame": "the last event was cut off mid-frame",
    "non_event_line": "a line that is not an SSE field",
    "non_chunk_line": "a line that is not a stream chunk",
    "non_object_chunk": "a chunk whose data is not a JSON object",
    "non_object_event": "an event whose data is not a JSON object",
    # stream structure
    "chunk_after_stream_end": "chunks kept coming after the stream's end",
    "op_after_stream_end": "more data after the stream had ended (ignored)",
    "message_stop_repeated": "message_stop sent more than once",
    "finish_reason_repeated": "finish_reason sent more than once",
    "finish_reason_stop_on_tool_turn": "finish_reason \"stop\" on a turn with tool calls",
    "tool_call_after_finish_reason": "a tool call delta after finish_reason",
    "usage_on_delta_chunk": "usage figures on a chunk that also carries a delta",
    "content_filter_chunk": "a content-filter chunk without a choice delta",
    "empty_choices": "a chunk with an empty choices array",
    "role_repeated": "the assistant role sent again on a later chunk",
    # call identity
    "missing_index": "a tool call delta without an index",
    "sparse_index": "tool call indexes skip numbers",
    "same_index_new_id": "a new call id reused an index already in use",
    "ids_interleaved_at_one_index": "two call ids alternate at one index",
    "two_entries_for_one_index_in_chunk": "one chunk has two entries for the same index",
    "empty_id_on_continuation": "an empty id on a continuing delta",
    "empty_name_on_continuation": "an empty name on a continuing delta",
    "synthesized_id": "the call had no id; one was made up",
    "id_repeated": "the call's id sent again (same value)",
    "id_conflict": "the call's id sent again with another value",
    "name_repeated": "the tool name sent again (same value)",
    "name_conflict": "the tool name sent again with another value",
    "call_start_repeated": "the call's start sent more than once",
    "call_started_at_a_used_key": "a call started where another call had been",
    "fragment_before_call_start": "argument text before the call started",
    "fragment_after_call_ended": "argument text after the call ended (ignored)",
    "tool_call_delta_without_call": "a tool call delta for no known call",
    "tool_call_end_without_call": "a tool call end for no known call",
    "whole_call_in_one_delta": "a whole call arrived in a single delta",
    # argument shapes
    "arguments_as_json_value": "arguments sent as a JSON value, not text (judged as that JSON)",
    "args_not_object": "a function call's args are not an object",
    "arguments_only_in_done": "arguments arrived only in the done event",
    "done_arguments_differ": "the done event's arguments differ from the deltas",
    "final_arguments_differ": "a later final text differs from the first (the first stays)",
    "delta_after_done": "an argument delta after the final text (ignored)",
    "item_only_in_response_completed": "a tool item seen only in response.completed",
    "call_id_replaced": "the finalized item gave another call id, which replaces the provisional one",
    "content_after_finish_reason": "content after a finishReason frame (kept; the last finishReason decides)",
    "unknown_finish_reason": "a finish reason the provider does not document (taken as a normal end)",
    "custom_tool_input_wrapped": "a custom tool's input came wrapped in an object",
    "input_json_delta_for_non_tool_block": "input_json_delta for a block that is not tool_use",
    "block_index_reused": "a content block index used twice",
    # OpenAI Responses output items
    "delta_before_output_item_added": "argument deltas before the output item was added",
    "output_item_added_repeated": "an output item added twice",
    "output_item_done_without_added": "an output item done that was never added",
    "output_index_mismatch": "an event's output_index differs from its item's",
    "output_index_reused": "an output_index used for two items",
    "done_for_unknown_item": "a done event for an unknown item",
    # Gemini function calls
    "function_call_without_name": "a function call part without a name",
    "function_call_part_without_call": "a function call part that carries nothing",
    "function_call_before_terminator": "a new function call before the last one was ended",
    "missing_function_call_terminator": "a streamed function call was never ended",
    "last_partial_args_without_terminator": "the last partial arguments were never ended",
}

FAMILIES: dict[str, dict[str, str]] = {
    "reason": REASONS,
    "end": ENDS,
    "quirk": QUIRKS,
    "diagnosis": DIAGNOSES,
    "strategy": STRATEGIES,
}

_AT_BYTE = re.compile(r"\bat byte (\d+)\b")


def plain(code: object, family: str | None = None) -> str:
    """Plain words for ``code`` in ``family`` (any family when None); ``""`` if unknown."""
    if not isinstance(code, str):
        return ""
    tables = [FAMILIES[family]] if family is not None else list(FAMILIES.values())
    for table in tables:
        if code in table:
            return table[code]
    return ""


def reason_code(reason: object) -> str:
    """The code a reason string starts with: ``"invalid_json: ..."`` → ``"invalid_json"``."""
    return reason.partition(":")[0].strip() if isinstance(reason, str) else ""


def plain_reason(reason: object) -> str:
    """Plain words for a reason string by its code (``""`` when the code is not known)."""
    return plain(reason_code(reason), "reason")


def short_reason(reason: object) -> str:
    """A few words for a summary: ``"invalid JSON at byte 90"``; the code itself if unknown."""
    code = reason_code(reason)
    words = SHORT_REASONS.get(code, code or "no reason given")
    at = _AT_BYTE.search(reason) if isinstance(reason, str) else None
    return f"{words} at byte {at.group(1)}" if at else words
