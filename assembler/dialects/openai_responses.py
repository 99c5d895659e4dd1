"""OpenAI Responses API streaming (and Responses-compatible gateways).

Provider document: OpenAI API reference, "Responses → Streaming events":
``response.created`` → per output item ``response.output_item.added`` →
``response.function_call_arguments.delta`` (``item_id``, ``output_index``, ``delta``) →
``response.function_call_arguments.done`` (``arguments``) → ``response.output_item.done``
(the whole item) → ``response.completed``. ``response.incomplete`` (e.g.
``max_output_tokens``) means the output was cut; ``response.failed`` and the ``error``
event mean the provider failed. Every event carries its own ``type``, so an event whose
``data:`` line precedes its ``event:`` line (Bedrock Mantle) reads the same.

Tool items: ``function_call`` (client; call id = the item's ``call_id``, *not* its
``id``), ``custom_tool_call`` (client; free-text ``input`` streamed by
``response.custom_tool_call_input.delta``/``.done``) and ``mcp_call`` (run by the
provider, ``executor: server``; arguments by ``response.mcp_call_arguments.delta``/
``.done``; it has no ``call_id``, its item ``id`` names it).

Keying: a call is ``(output_index,)``; ``item_id`` is mapped to that key when the item is
added and wins over a disagreeing ``output_index``. A further item at an ``output_index``
already used (quirk ``output_index_reused``) is keyed ``(output_index, n)``, so two items
never share a buffer: events naming an ``item_id`` go to that item, events without one go to
the index's single item that has not ended, and when several have not ended the stream
cannot be read (a stream error, every open call fails). ``output_item.done`` is the block
stop.

``.done`` texts: where no delta arrived (LM Studio) the ``.done`` (or
``output_item.done``) text *is* the arguments and is sent as one fragment. Where deltas
arrived they stay authoritative; a ``.done`` text that differs from their concatenation is
recorded as quirk ``done_arguments_differ``. The comparison keeps a running SHA-256 of
the deltas, not a second copy of the (possibly secret, possibly huge) text.

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

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from .. import jsontext
from ..capture import ProviderEvent
from ..model import (
    ArgsFragment,
    BlockStop,
    CallIdentity,
    CallKey,
    CallStart,
    Executor,
    Op,
    Quirk,
    StreamEnd,
    StreamError,
    StreamStart,
    StreamTruncated,
)
from .base import check_strict, provider_error

#: Output item types that are tool calls, and who runs them.
TOOL_ITEMS: dict[str, Executor] = {"function_call": "client", "custom_tool_call": "client", "mcp_call": "server"}

_DELTAS = {
    "response.function_call_arguments.delta": "function_call",
    "response.custom_tool_call_input.delta": "custom_tool_call",
    "response.mcp_call_arguments.delta": "mcp_call",
}
_DONES = {
    "response.function_call_arguments.done": ("function_call", "arguments"),
    "response.custom_tool_call_input.done": ("custom_tool_call", "input"),
    "response.mcp_call_arguments.done": ("mcp_call", "arguments"),
}
_WRAP_OPEN, _WRAP_CLOSE = '{"input":"', '"}'


@dataclass
class _Item:
    key: CallKey
    kind: str
    item_id: str | None
    call_id: str | None = None
    name: str | None = None
    digest: Any = field(default_factory=hashlib.sha256)
    deltas: int = 0
    settled: bool = False  # a .done text was compared (or used)
    wrap_open: bool = False  # custom tool: '{"input":"' sent, '"}' owed
    stopped: bool = False


class OpenAIResponsesAdapter:
    """Translates Responses API stream events into ops."""

    name = "openai-responses"

    def __init__(self) -> None:
        self._started = False
        self._ended = False
        self._items: dict[CallKey, _Item] = {}
        self._by_item_id: dict[str, CallKey] = {}
        self._at_index: dict[int, list[CallKey]] = {}  # output_index -> its items' keys, in order
        # output_index -> its items that have not ended, and those of them without an item_id
        # (ordered sets): an event is routed in O(1) however many items share an index
        self._live_at: dict[int, dict[CallKey, None]] = {}
        self._unnamed_at: dict[int, dict[CallKey, None]] = {}

    def feed(self, event: ProviderEvent) -> list[Op]:
        data = event.data
        if not isinstance(data, dict):
            return [Quirk("non_object_event")]
        kind = data.get("type") if isinstance(data.get("type"), str) else event.event or ""
        try:
            return self._event(kind, data, event)
        except _Unroutable as exc:
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
        if kind == "response.output_item.done":
            return self._item_done(data, event)
        if kind == "response.completed":
            return self._finish(StreamEnd("response.completed"))
        if kind == "response.incomplete":
            details = (data.get("response") or {}).get("incomplete_details") or {}
            reason = details.get("reason") if isinstance(details, dict) else None
            return self._finish(StreamTruncated(f"response.incomplete: {reason or 'no reason given'}"))
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
        self._items, self._by_item_id, self._at_index = {}, {}, {}
        self._live_at, self._unnamed_at = {}, {}
        response = data.get("response") if isinstance(data.get("response"), dict) else {}
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
        if isinstance(item_id, str) and item_id in self._by_item_id:
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
        if not isinstance(text, str):  # a JSON value where a text fragment belongs: judged as its JSON text
            ops.append(Quirk("arguments_as_json_value"))
            check_strict(item.key, event, ops)  # the event's parse may have hidden a duplicate key
            text = jsontext.dumps(text)  # any depth: the latch judges it
        if item.stopped:
            ops.append(ArgsFragment(item.key, text))  # the assembler fails the call: text after block stop
            return ops
        item.digest.update(text.encode("utf-8", "surrogatepass"))
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
            call_id, name = _identity(item_obj)
            new_id = call_id if call_id and not item.call_id else None
            new_name = name if name and not item.name else None
            if new_id or new_name:
                item.call_id, item.name = item.call_id or new_id, item.name or new_name
                ops.append(CallIdentity(item.key, new_id, new_name))
        field_name = "input" if item.kind == "custom_tool_call" else "arguments"
        if not item.settled:
            ops.extend(self._settle(item, item_obj.get(field_name), event))
        ops.extend(self._stop(item))
        return ops

    def _finish(self, op: Op) -> list[Op]:
        ops: list[Op] = []
        if isinstance(op, StreamEnd):  # close custom-tool wrappers whose item.done never came
            for item in self._items.values():
                if item.wrap_open:
                    item.wrap_open = False
                    ops.append(ArgsFragment(item.key, _WRAP_CLOSE))
        self._ended = True
        ops.append(op)
        return ops

    # ------------------------------------------------------------------ helpers

    def _start(self, item_obj: dict[str, Any], index: int, ops: list[Op], event: ProviderEvent | None = None) -> _Item:
        kind = item_obj["type"]
        call_id, name = _identity(item_obj)
        used = self._at_index.setdefault(index, [])
        if used:
            ops.append(Quirk("output_index_reused"))
        key: CallKey = (index, len(used)) if used else (index,)
        used.append(key)
        item_id = item_obj.get("id") if isinstance(item_obj.get("id"), str) and item_obj.get("id") else None
        item = _Item(key, kind, item_id, call_id, name)
        self._items[key] = item
        self._live_at.setdefault(index, {})[key] = None
        if item_id is not None:
            self._by_item_id[item_id] = key
        else:
            self._unnamed_at.setdefault(index, {})[key] = None
        value = item_obj.get("input" if kind == "custom_tool_call" else "arguments")
        whole = _whole_text(kind, value, ops)
        ops.append(CallStart(key, call_id, name, TOOL_ITEMS[kind], whole))
        if whole is not None and not isinstance(value, str) and event is not None:
            check_strict(key, event, ops)  # the event's parse may have hidden a duplicate key
        if kind == "custom_tool_call":
            ops.append(Quirk("custom_tool_input_wrapped"))
        return item

    def _find(self, data: dict[str, Any], kind: str, ops: list[Op], quiet: bool = False) -> _Item | None:
        """The item an event belongs to; ``quiet``: None instead of starting an unknown one.

        Raises :class:`_Unroutable` when the event names no ``item_id`` and several items
        at its ``output_index`` have not ended.
        """
        item_id, index = data.get("item_id"), data.get("output_index")
        item_id = item_id if isinstance(item_id, str) and item_id else None
        key = self._by_item_id.get(item_id) if item_id is not None else None
        if key is not None:
            if isinstance(index, int) and index != key[0]:
                ops.append(Quirk("output_index_mismatch"))
            return self._items[key]
        has_index = isinstance(index, int) and not isinstance(index, bool)
        if has_index and index in self._at_index:
            if item_id is None:
                live = self._live_at.get(index) or {}
                if len(live) > 1:
                    raise _Unroutable(f"{kind} event without item_id at output_index {index}, where {len(live)} items are open")
                # the one open item, else the newest (an ended item: its text after the stop fails it)
                return self._items[next(iter(live)) if live else self._at_index[index][-1]]
            unnamed = self._unnamed_at.get(index) or {}
            if len(unnamed) > 1:
                raise _Unroutable(f"{kind} event for a new item_id at output_index {index}, where {len(unnamed)} items have none")
            if unnamed:  # the item was added without its id
                item = self._items[unnamed.popitem()[0]]
                item.item_id = item_id
                self._by_item_id[item_id] = item.key
                return item
        if quiet:
            return None
        if not has_index:
            ops.append(StreamError(f"{kind} delta for an unknown item without output_index"))
            return None
        ops.append(Quirk("delta_before_output_item_added"))
        return self._start({"type": kind, "id": item_id}, index, ops)

    def _settle(self, item: _Item, text: Any, event: ProviderEvent) -> list[Op]:
        """Use or compare a ``.done`` text (see the module docstring)."""
        ops: list[Op] = []
        if item.settled or item.stopped:
            return ops
        item.settled = True
        json_value = text is not None and not isinstance(text, str)
        if json_value:
            ops.append(Quirk("arguments_as_json_value"))
            text = jsontext.dumps(text)  # any depth: the latch judges it
        if not isinstance(text, str):
            return ops
        if item.deltas == 0:
            if text:
                ops.append(Quirk("arguments_only_in_done"))
                wrapped = _WRAP_OPEN + _escape(text) + _WRAP_CLOSE if item.kind == "custom_tool_call" else text
                ops.append(ArgsFragment(item.key, wrapped))
                if json_value:
                    check_strict(item.key, event, ops)  # the event's parse may have hidden a duplicate key
        elif hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest() != item.digest.digest():
            ops.append(Quirk("done_arguments_differ"))
        return ops

    def _stop(self, item: _Item) -> list[Op]:
        ops: list[Op] = []
        if item.wrap_open:
            item.wrap_open = False
            ops.append(ArgsFragment(item.key, _WRAP_CLOSE))
        if not item.stopped:
            item.stopped = True
            self._live_at[item.key[0]].pop(item.key, None)
            self._unnamed_at.get(item.key[0], {}).pop(item.key, None)
            ops.append(BlockStop(item.key))
        return ops


class _Unroutable(Exception):
    """An event that could belong to more than one item: the stream cannot be read."""


def _identity(item: dict[str, Any]) -> tuple[str | None, str | None]:
    ref = item.get("id") if item.get("type") == "mcp_call" else item.get("call_id")
    name = item.get("name")
    return (ref if isinstance(ref, str) and ref else None, name if isinstance(name, str) and name else None)


def _whole_text(kind: str, value: Any, ops: list[Op]) -> str | None:
    """The argument text an item carries whole (None: none); a JSON value becomes its JSON
    text (a custom tool's input: that text, wrapped)."""
    if value is not None and not isinstance(value, str):
        ops.append(Quirk("arguments_as_json_value"))
        value = jsontext.dumps(value)
        if kind != "custom_tool_call":
            return value
    if not isinstance(value, str) or not value:
        return None
    return _WRAP_OPEN + _escape(value) + _WRAP_CLOSE if kind == "custom_tool_call" else value


def _escape(text: str) -> str:
    """``text`` as the inside of a JSON string literal (encoding only; nothing is parsed)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]
