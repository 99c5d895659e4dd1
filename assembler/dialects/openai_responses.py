"""OpenAI Responses API streaming (and Responses-compatible gateways).

Provider document: OpenAI API reference, "Responses → Streaming events":
``response.created`` → per output item ``response.output_item.added`` →
``response.function_call_arguments.delta`` (``item_id``, ``output_index``, ``delta``) →
``response.function_call_arguments.done`` (``arguments``) → ``response.output_item.done``
(the whole item) → ``response.completed`` (the whole response, its ``output`` items
included). ``response.incomplete`` (e.g. ``max_output_tokens``) means the output was cut;
``response.failed`` and the ``error`` event mean the provider failed. Every event carries
its own ``type``, so an event whose ``data:`` line precedes its ``event:`` line (Bedrock
Mantle) reads the same.

Tool items, who runs each and where its argument text is: :mod:`.responses_items`
(``function_call``, ``custom_tool_call``, ``local_shell_call``, ``shell_call``,
``apply_patch_call``, ``computer_call`` are run by the client and each owes one result;
``mcp_call``, a hosted ``shell_call`` and xAI's own search sub-tools by the provider).

Keying (:mod:`.responses_routing`): a call is ``(output_index,)``; ``item_id`` is mapped to
that key when the item is added and wins over a disagreeing ``output_index``. A further item
at an ``output_index`` already used (quirk ``output_index_reused``) is keyed
``(output_index, n)``, so two items never share a buffer: events naming an ``item_id`` go to
that item, events without one go to the index's single item that has not ended, and when
several have not ended the stream cannot be read (a stream error, every open call fails).
``output_item.done`` is the block stop.

**The finalized arguments are authoritative; deltas are a preview.** The first finalized
text of an item (``.done``, else ``output_item.done``, else the item in
``response.completed``'s ``output``) is compared with its joined deltas by a running SHA-256
(of UTF-16 code units, so a surrogate pair split across deltas is the one character it is;
never a second copy of the possibly secret, possibly huge text): where no delta arrived (LM
Studio) the text is sent as the one fragment (quirk ``arguments_only_in_done``); where it
differs (a gateway that dropped deltas) it *replaces* them (:class:`~..model.ArgsFinal`,
quirk ``done_arguments_differ``), so the final text is what the latch checks and commits.
A later finalized text that differs from the first is quirk ``final_arguments_differ`` (the
first stays); a delta after the final text is ignored (quirk ``delta_after_done``); an empty
final text is no text. The action or operation of a ``local_shell_call``, ``shell_call``,
``apply_patch_call``, ``computer_call`` or ``tool_search_call`` is a placeholder in
``output_item.added`` and final only in ``output_item.done`` (or ``response.completed``): an
item never finalized fails ``stream_truncated`` at the end; a shell call's command deltas
only route to their item. A
tool item found only in ``response.completed`` is a call (quirk
``item_only_in_response_completed``): it owes its result like any other.

``arguments`` (or a custom tool's ``input``) given as a JSON value instead of a string (in
``output_item.added``/``.done``, ``.done`` or a ``.delta``) is judged as its JSON text (quirk
``arguments_as_json_value``), after a strict re-check of the event that carried it
(:func:`.base.check_strict`); for a custom tool that JSON text is the free-text input, and
is wrapped like any other.

Custom tools: the latch accepts only a JSON object, so free-text input is carried as
``{"input": <text>}``: the adapter sends ``{"input":"`` then each delta JSON-*escaped*
(encoding, never parsing) and ``"}`` when the item ends. Quirk ``custom_tool_input_wrapped``
marks such calls; a registered custom tool has no ``parameters`` schema, so only the
name is checked.
"""

from __future__ import annotations

from typing import Any

from toollatch.core import jsontext
from toollatch.wire.capture import ProviderEvent
from toollatch.core.model import (
    ArgsFinal,
    ArgsFragment,
    BlockStop,
    CallIdentity,
    CallStart,
    CallTruncated,
    Op,
    Quirk,
    StreamEnd,
    StreamError,
    StreamStart,
    StreamTruncated,
)
from toollatch.dialects import responses_items as items
from toollatch.dialects.base import check_strict, event_type, provider_error
from toollatch.dialects.ends import end_ops
from toollatch.dialects.responses_routing import Item, ItemRouter, Unroutable
from toollatch.dialects.responses_items import _DELTAS, _DONES, _PREVIEWS, _WRAP_CLOSE, _WRAP_OPEN, KINDS, TOOL_ITEMS, digest as _digest, escape as _escape

def is_error_event(event: ProviderEvent) -> bool:
    """Whether :meth:`OpenAIResponsesAdapter.feed` reads ``event`` as an ``error`` event: its
    ``type``, or where that is not a string its SSE event name, is ``error``."""
    data = event.data
    return isinstance(data, dict) and event_type(data, event) == "error"


class OpenAIResponsesAdapter:
    """Translates Responses API stream events into ops."""

    __slots__ = ("_ended", "_items", "_response_id", "_started")

    name = "openai-responses"

    def __init__(self) -> None:
        self._started = False
        self._ended = False
        self._response_id: str | None = None
        self._items = ItemRouter()  # the response's tool items, by key, item id, call id and output_index

    def feed(self, event: ProviderEvent) -> list[Op]:
        data = event.data
        if not isinstance(data, dict):
            return [Quirk("non_object_event")]
        kind = event_type(data, event)
        try:
            return self._event(kind, data, event)
        except Unroutable as exc:
            self._ended = True
            return [StreamError(str(exc))]

    def _event(self, kind: str, data: dict[str, Any], event: ProviderEvent) -> list[Op]:
        if kind == "response.created":
            return self._response_created(data)
        if kind == "response.output_item.added":
            return self._item_added(data, event)
        if kind in _DELTAS:
            return self._delta(data, _DELTAS[kind], event)
        if kind in _DONES:
            item_kind, field_name = _DONES[kind]
            ops: list[Op] = []
            item = self._find(data, item_kind, ops, quiet=True)
            return ops + self._settle(item, data.get(field_name), event) if item is not None else [Quirk("done_for_unknown_item")]
        if kind in _PREVIEWS:
            ops = []
            self._find(data, _PREVIEWS[kind], ops)
            return ops
        if kind == "response.output_item.done":
            return self._item_done(data, event)
        if kind == "response.completed":
            response = data.get("response")
            ops = self._completed_items(response.get("output") if isinstance(response, dict) else None, event)
            return ops + self._finish(StreamEnd("response.completed"))
        if kind == "response.incomplete":
            details = (data.get("response") or {}).get("incomplete_details") or {}
            reason = details.get("reason") if isinstance(details, dict) else None
            # max_output_tokens: truncated; content_filter: the provider stopped it (:mod:`.ends`)
            (end,) = end_ops("response.incomplete:", [reason] if isinstance(reason, str) and reason else [], None, floor="truncated")
            return self._finish(end)
        if kind == "response.failed":
            return self._finish(provider_error((data.get("response") or {}).get("error"), prefix="response.failed: "))
        if kind == "error":
            error = data.get("error") if isinstance(data.get("error"), dict) else {k: data.get(k) for k in ("code", "message")}
            return self._finish(provider_error(error, prefix="error: "))
        return []  # in_progress, text, reasoning, content parts, server tool progress, unknown

    def close(self) -> list[Op]:
        if self._ended:
            return []
        return [StreamTruncated("input ended before response.completed")]

    # ------------------------------------------------------------------ events

    def _response_created(self, data: dict[str, Any]) -> list[Op]:
        ops: list[Op] = []
        if self._started and not self._ended:
            ops.append(StreamTruncated("a new response.created arrived before response.completed"))
        self._started, self._ended = True, False
        self._items = ItemRouter()
        response = data.get("response") if isinstance(data.get("response"), dict) else {}
        self._response_id = response.get("id") if isinstance(response.get("id"), str) else None
        ops.append(StreamStart({"response_id": response.get("id"), "model": response.get("model")}))
        return ops

    def _item_added(self, data: dict[str, Any], event: ProviderEvent) -> list[Op]:
        item, index = data.get("item"), data.get("output_index")
        if not isinstance(item, dict) or item.get("type") not in TOOL_ITEMS:
            return []
        if not isinstance(index, int) or isinstance(index, bool):
            return [StreamError(f"{item.get('type')} item added without an integer output_index")]
        ops: list[Op] = []
        item_id = item.get("id")
        if isinstance(item_id, str) and self._items.has_item_id(item_id):
            ops.append(Quirk("output_item_added_repeated"))  # the same item again: not a new call
            return ops
        self._start(item, index, ops, event)
        return ops

    def _delta(self, data: dict[str, Any], kind: str, event: ProviderEvent) -> list[Op]:
        ops: list[Op] = []
        item = self._find(data, kind, ops)
        text = data.get("delta")
        if item is None or text is None or text == "":
            return ops
        if item.final is not None and not item.stopped:
            ops.append(Quirk("delta_after_done"))  # the final text is authoritative
            return ops
        if not isinstance(text, str):  # a JSON value where a text fragment belongs: judged as its JSON text
            ops.append(Quirk("arguments_as_json_value"))
            check_strict(item.key, event, ops)  # the event's parse may have hidden a duplicate key
            text = jsontext.dumps(text)  # any depth: the latch judges it
        if item.stopped:
            ops.append(ArgsFragment(item.key, text))  # the assembler fails the call: text after block stop
            return ops
        item.digest.update(text.encode("utf-16-le", "surrogatepass"))  # UTF-16: a pair split across deltas hashes as one character
        item.deltas += 1
        if item.kind == "custom_tool_call":
            prefix = "" if item.wrap_open else _WRAP_OPEN
            item.wrap_open = True
            ops.append(ArgsFragment(item.key, prefix + _escape(text)))
        else:
            ops.append(ArgsFragment(item.key, text))
        return ops

    def _item_done(self, data: dict[str, Any], event: ProviderEvent) -> list[Op]:
        item_obj, index = data.get("item"), data.get("output_index")
        if not isinstance(item_obj, dict) or item_obj.get("type") not in TOOL_ITEMS:
            return []
        ops: list[Op] = []
        item = self._find({"item_id": item_obj.get("id"), "output_index": index}, item_obj["type"], ops, quiet=True)
        if item is None:
            if not isinstance(index, int) or isinstance(index, bool):
                return [StreamError(f"{item_obj['type']} item done without an integer output_index")]
            ops.append(Quirk("output_item_done_without_added"))
            item = self._start(item_obj, index, ops, event)
        else:
            self._identify(item, item_obj, ops)
        ops.extend(self._settle(item, items.argument_value(item_obj), event))
        ops.extend(self._stop(item))
        return ops

    def _completed_items(self, output: Any, event: ProviderEvent) -> list[Op]:
        """The tool items of ``response.completed``'s ``output``: final texts, and calls that
        no other event announced."""
        ops: list[Op] = []
        if not isinstance(output, list):
            return ops
        for index, item_obj in enumerate(output):
            if not isinstance(item_obj, dict) or item_obj.get("type") not in TOOL_ITEMS:
                continue
            item = self._items.known(item_obj.get("id"), items.identity(item_obj)[0])
            if item is None:
                if item_obj.get("id") is None and items.identity(item_obj)[0] is None:
                    continue  # nothing names it: it cannot be told from the items streamed
                ops.append(Quirk("item_only_in_response_completed"))
                item = self._start(item_obj, self._items.free_index(index), ops, event)
                value = items.argument_value(item_obj)
                item.final = _digest(value if isinstance(value, str) else jsontext.dumps(value))  # final, whole with its start
                continue
            self._identify(item, item_obj, ops)
            ops.extend(self._settle(item, items.argument_value(item_obj), event))
        return ops

    def _finish(self, op: Op) -> list[Op]:
        ops: list[Op] = []
        if isinstance(op, StreamEnd):
            for item in self._items.all():
                if item.wrap_open:  # close custom-tool wrappers whose item.done never came
                    item.wrap_open = False
                    ops.append(ArgsFragment(item.key, _WRAP_CLOSE))
                elif item.final is None and not KINDS[item.kind].streams:  # an action never final: the added one is a placeholder
                    ops.append(CallTruncated(item.key, f"{item.kind} never finalized: no output_item.done gave its {KINDS[item.kind].field}"))
        self._ended = True
        ops.append(op)
        return ops

    # ------------------------------------------------------------------ helpers

    def _start(self, item_obj: dict[str, Any], index: int, ops: list[Op], event: ProviderEvent | None = None) -> Item:
        kind = item_obj["type"]
        call_id, name = items.identity(item_obj)
        item_id = item_obj.get("id") if isinstance(item_obj.get("id"), str) and item_obj.get("id") else None
        item = self._items.add(kind, index, item_id, call_id, name, ops)
        key = item.key
        value = items.argument_value(item_obj)
        whole = items.as_text(kind, value, ops)
        ops.append(CallStart(key, call_id, name, items.executor(item_obj, self._response_id), whole, item=kind))
        if whole is not None and not isinstance(value, str) and event is not None:
            check_strict(key, event, ops)  # the event's parse may have hidden a duplicate key
        if kind == "custom_tool_call":
            ops.append(Quirk("custom_tool_input_wrapped"))
        return item

    def _identify(self, item: Item, item_obj: dict[str, Any], ops: list[Op]) -> None:
        """Set the call id and name a finalized item gives, where the call has none yet; a
        call id unlike the provisional one replaces it (the final item is authoritative):
        the first finalized item only (``output_item.done``), not ``response.completed``
        restating an item already done with another id (an ``id_conflict``: the call may
        have committed under the first)."""
        call_id, name = items.identity(item_obj)
        new_id = call_id if call_id and call_id != item.call_id else None
        new_name = name if name and name != item.name else None  # a different one: the assembler's name_conflict
        if new_id or new_name:
            final = bool(new_id and item.call_id) and not item.stopped
            item.call_id, item.name = new_id or item.call_id, item.name or new_name
            if new_id:
                self._items.call_id(new_id, item)
            ops.append(CallIdentity(item.key, new_id, new_name, final=final))

    def _find(self, data: dict[str, Any], kind: str, ops: list[Op], quiet: bool = False) -> Item | None:
        """The item an event belongs to (:meth:`ItemRouter.find`); unless ``quiet``, an
        unknown one at an ``output_index`` is started (quirk ``delta_before_output_item_added``).

        Raises :class:`Unroutable` when the event names no ``item_id`` and several items
        at its ``output_index`` have not ended.
        """
        item = self._items.find(data, kind, ops)
        if item is not None or quiet:
            return item
        item_id, index = data.get("item_id"), data.get("output_index")
        if not isinstance(index, int) or isinstance(index, bool):
            ops.append(StreamError(f"{kind} delta for an unknown item without output_index"))
            return None
        ops.append(Quirk("delta_before_output_item_added"))
        return self._start({"type": kind, "id": item_id if isinstance(item_id, str) and item_id else None}, index, ops)

    def _settle(self, item: Item, value: Any, event: ProviderEvent) -> list[Op]:
        """Use or compare a finalized text (see the module docstring)."""
        ops: list[Op] = []
        json_value = value is not None and not isinstance(value, str)
        if json_value and KINDS[item.kind].streams:
            ops.append(Quirk("arguments_as_json_value"))
        raw = jsontext.dumps(value) if json_value else value  # any depth: the latch judges it
        if not isinstance(raw, str) or raw == "":
            return ops  # no final text here
        final = _digest(raw)
        if item.final is not None or item.stopped:  # a text is already final: compare only
            settled = item.final if item.final is not None else item.digest.digest()
            if final != settled:
                ops.append(Quirk("final_arguments_differ"))
            return ops
        item.final = final
        text = items.wrap(raw) if item.kind == "custom_tool_call" else raw
        if item.deltas == 0:
            if KINDS[item.kind].streams:
                ops.append(Quirk("arguments_only_in_done"))
            ops.append(ArgsFragment(item.key, text))
        elif final != item.digest.digest():
            ops.append(Quirk("done_arguments_differ"))
            ops.append(ArgsFinal(item.key, text))  # the final text replaces the deltas
            item.wrap_open = False  # the replacement is the whole wrapped text
        else:
            return ops
        if json_value:
            check_strict(item.key, event, ops)  # the event's parse may have hidden a duplicate key
        return ops

    def _stop(self, item: Item) -> list[Op]:
        ops: list[Op] = []
        if item.wrap_open:
            item.wrap_open = False
            ops.append(ArgsFragment(item.key, _WRAP_CLOSE))
        if not item.stopped:
            self._items.stopped(item)
            ops.append(BlockStop(item.key))
        return ops


__all__ = ["TOOL_ITEMS", "OpenAIResponsesAdapter", "is_error_event"]
