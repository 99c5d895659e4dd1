"""Which OpenAI Responses tool item an event belongs to (see :mod:`.openai_responses`).

:class:`ItemRouter` keeps the tool items of one response and routes events to them. A
call is keyed ``(output_index,)``; ``item_id`` is mapped to that key when the item is added
and wins over a disagreeing ``output_index`` (quirk ``output_index_mismatch``). A further
item at an ``output_index`` already used (quirk ``output_index_reused``) is keyed
``(output_index, n)``, so two items never share a buffer: events naming an ``item_id`` go to
that item, events without one go to the index's single item that has not ended, and when
several have not ended the event is :class:`Unroutable` (the stream cannot be read). Every
lookup is O(1) however many items share an index.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toollatch.core.model import CallKey, Op, Quirk


@dataclass
class Item:
    """One tool item of the response, as the adapter follows it."""

    key: CallKey
    kind: str
    item_id: str | None
    call_id: str | None = None
    name: str | None = None
    digest: Any = field(default_factory=hashlib.sha256)  # running SHA-256 of the deltas (UTF-16)
    deltas: int = 0
    final: bytes | None = None  # digest of the finalized text, once one was used
    wrap_open: bool = False  # custom tool: '{"input":"' sent, '"}' owed
    stopped: bool = False

    def __deepcopy__(self, memo: dict[int, Any]) -> Item:
        """A copy that goes on from here on its own (a running hash is copied by its ``copy``)."""
        return dataclasses.replace(self, digest=self.digest.copy())


class Unroutable(Exception):
    """An event that could belong to more than one item: the stream cannot be read."""


class ItemRouter:
    """The tool items of one response, by key, ``item_id``, call id and ``output_index``."""

    __slots__ = ("_at_index", "_by_call_id", "_by_item_id", "_items", "_live_at", "_unnamed_at")

    def __init__(self) -> None:
        self._items: dict[CallKey, Item] = {}
        self._by_item_id: dict[str, CallKey] = {}
        self._by_call_id: dict[str, CallKey] = {}
        self._at_index: dict[int, list[CallKey]] = {}  # output_index -> its items' keys, in order
        # output_index -> its items that have not ended, and those of them without an item_id
        # (ordered sets): an event is routed in O(1) however many items share an index
        self._live_at: dict[int, dict[CallKey, None]] = {}
        self._unnamed_at: dict[int, dict[CallKey, None]] = {}

    def all(self) -> Iterable[Item]:
        """Every item, in the order they were added."""
        return self._items.values()

    def has_item_id(self, item_id: str) -> bool:
        return item_id in self._by_item_id

    def free_index(self, index: int) -> int:
        """``index`` if no item used it, else one past the highest used."""
        return index if index not in self._at_index else max(self._at_index) + 1

    def add(self, kind: str, index: int, item_id: str | None, call_id: str | None, name: str | None, ops: list[Op]) -> Item:
        """A new item at ``output_index`` ``index`` (quirk ``output_index_reused`` into ``ops``
        when another item has it)."""
        used = self._at_index.setdefault(index, [])
        if used:
            ops.append(Quirk("output_index_reused"))
        key: CallKey = (index, len(used)) if used else (index,)
        used.append(key)
        item = Item(key, kind, item_id, call_id, name)
        self._items[key] = item
        self._live_at.setdefault(index, {})[key] = None
        if item_id is not None:
            self._by_item_id[item_id] = key
        else:
            self._unnamed_at.setdefault(index, {})[key] = None
        if call_id is not None:
            self._by_call_id.setdefault(call_id, key)
        return item

    def call_id(self, call_id: str, item: Item) -> None:
        """``item`` also answers to ``call_id`` (unless another item had it first)."""
        self._by_call_id.setdefault(call_id, item.key)

    def stopped(self, item: Item) -> None:
        """``item`` ended: events without an ``item_id`` no longer go to it while another is open."""
        item.stopped = True
        self._live_at[item.key[0]].pop(item.key, None)
        self._unnamed_at.get(item.key[0], {}).pop(item.key, None)

    def known(self, item_id: Any, call_id: str | None) -> Item | None:
        """The streamed item a whole item is, by its item id, else its call id."""
        key = self._by_item_id.get(item_id) if isinstance(item_id, str) else None
        if key is None and call_id is not None:
            key = self._by_call_id.get(call_id)
        return self._items[key] if key is not None else None

    def find(self, data: dict[str, Any], kind: str, ops: list[Op]) -> Item | None:
        """The item an event (its ``item_id`` and ``output_index``) belongs to; None when it
        names no item there. An item added without its id takes the event's ``item_id``.

        Raises :class:`Unroutable` when the event names no ``item_id`` and several items
        at its ``output_index`` have not ended, or a new ``item_id`` where several items have none.
        """
        item_id, index = data.get("item_id"), data.get("output_index")
        item_id = item_id if isinstance(item_id, str) and item_id else None
        key = self._by_item_id.get(item_id) if item_id is not None else None
        if key is not None:
            if isinstance(index, int) and index != key[0]:
                ops.append(Quirk("output_index_mismatch"))
            return self._items[key]
        if not (isinstance(index, int) and not isinstance(index, bool)) or index not in self._at_index:
            return None
        if item_id is None:
            live = self._live_at.get(index) or {}
            if len(live) > 1:
                raise Unroutable(f"{kind} event without item_id at output_index {index}, where {len(live)} items are open")
            # the one open item, else the newest (an ended item: its text after the stop fails it)
            return self._items[next(iter(live)) if live else self._at_index[index][-1]]
        unnamed = self._unnamed_at.get(index) or {}
        if len(unnamed) > 1:
            raise Unroutable(f"{kind} event for a new item_id at output_index {index}, where {len(unnamed)} items have none")
        if unnamed:  # the item was added without its id
            item = self._items[unnamed.popitem()[0]]
            item.item_id = item_id
            self._by_item_id[item_id] = item.key
            return item
        return None


__all__ = ["Item", "ItemRouter", "Unroutable"]
