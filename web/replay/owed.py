"""The error results a session owes so far, kept up to date one call verdict at a time.

Rebuilding every stream's results (:meth:`toollatch.core.pipeline.Pipeline.results`) and matching
every owed result against every card on each verdict would cost the square of the calls per
verdict, on the event loop. :class:`OwedResults` keeps the same answer incrementally, at
constant cost per verdict for calls with distinct ``tool_call_id`` values (plus a log-time
insertion into the ordered list of results). Which single call owes a result is still the
assembler's rule (:func:`toollatch.core.calls.owed_results` applied to that call alone); what is
kept here is how calls combine, as ``owed_results`` combines them within one stream:

* per ``(stream, tool_call_id)``: no result once a client call with that id COMMITTED
  (its execution answers the id); otherwise one, that of the first call in finalize order
  (provider key order, or arrival with ``finalize_order: arrival``) that owes one;
* a call without an id owes its own result (shown in the results list, on no card).

A card shows the result owed for its ``tool_call_id`` (:attr:`toollatch.web.pages.cards.Card.result`), as
every card with that id in its stream does.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toollatch.core.calls import owed_results
from toollatch.core.model import CallOutcome, CallState, ToolResult

from toollatch.web.pages.cards import Card


def _verdict_of(outcome: CallOutcome) -> _Verdict:
    owes = owed_results([outcome], set())  # the assembler's rule, for this call alone
    return _Verdict(outcome.executor == "client" and outcome.state is CallState.COMMITTED, owes[0] if owes else None)


def _position(entry: tuple[tuple[int, Any], str, ToolResult]) -> tuple[int, Any]:
    return entry[0]


@dataclass
class _Verdict:
    """What one call with its verdict contributes: a client commit, or a result it owes alone."""

    committed: bool
    owes: ToolResult | None


@dataclass
class _Group:
    """The calls of one stream that carry one ``tool_call_id`` (the stream and the id key it
    in :class:`OwedResults`)."""

    cards: list[Card] = field(default_factory=list)
    committed: bool = False
    owner: Card | None = None  # the first call in finalize order that owes a result
    owes: ToolResult | None = None  # the owner's result
    shown: ToolResult | None = None  # what the group's cards show

    @property
    def result(self) -> ToolResult | None:
        return None if self.committed else self.owes


class OwedResults:
    """Owed error results of one session; ``arrival``: ``finalize_order`` is ``arrival``."""

    def __init__(self, arrival: bool) -> None:
        self._arrival = arrival
        self._index: dict[str, int] = {}  # card id -> creation order
        self._verdicts: dict[str, _Verdict] = {}  # card id -> its verdict's contribution
        self._groups: dict[tuple[int, str], _Group] = {}
        self._shared: dict[int, set[str]] = {}  # stream -> ids more than one of its calls carries
        # The owed results, kept in provider order: (stream, order) -> owning card id, result.
        self._entries: list[tuple[tuple[int, Any], str, ToolResult]] = []
        self._owed: dict[str, tuple[tuple[int, Any], ToolResult]] = {}  # owning card id -> its entry
        self._added: list[str] = []  # owning card ids whose result was added since take_news()
        self._rewritten = False  # a result was removed or replaced since take_news()

    def results(self) -> list[tuple[int, ToolResult]]:
        """Results owed so far, as ``(stream, result)``, in provider order."""
        return [(where[0], result) for where, _, result in self._entries]

    def __len__(self) -> int:
        """The number of results owed so far."""
        return len(self._entries)

    def last(self, count: int) -> list[tuple[str, int, ToolResult]]:
        """The last ``count`` results owed, in provider order, as ``(owning card id, stream,
        result)``."""
        return [(owner, where[0], result) for where, owner, result in self._entries[-count:]] if count > 0 else []

    def take_news(self) -> tuple[list[str], bool]:
        """``(added, rewritten)`` since the last call: the owning card ids of results added,
        and whether any result was removed or replaced (then the list must be redone)."""
        news = (self._added, self._rewritten)
        self._added, self._rewritten = [], False
        return news

    def recount_shared(self, stream: int, outcome_of: Callable[[Card], CallOutcome | None]) -> set[str]:
        """At the end of ``stream``: read again the records of the calls that share a
        ``tool_call_id`` with another call of it (the assembler may then keep one record per
        id and mark the others repaired, owing nothing) and count their ids again. Returns
        the ids of the cards whose result changed."""
        changed: set[str] = set()
        for call_id in self._shared.pop(stream, ()):
            group = self._groups[(stream, call_id)]
            for member in group.cards:
                if member.id in self._verdicts and (outcome := outcome_of(member)) is not None:
                    self._verdicts[member.id] = _verdict_of(outcome)
            changed |= self._recount(group)
        return changed

    def update(self, card: Card, *, created: bool, old_id: str | None, outcome: CallOutcome | None) -> set[str]:
        """Account for a change of ``card``: it was ``created``, its ``tool_call_id`` changed
        from ``old_id``, and/or it has its verdict (``outcome``: its record, once terminal).
        Returns the ids of the cards whose :attr:`~toollatch.web.pages.cards.Card.result` changed."""
        changed: set[str] = set()
        new_id = card.view.call_id
        moved = not created and old_id != new_id
        if created:
            self._index[card.id] = len(self._index)
        elif moved:
            changed |= self._leave(card, old_id)
        if (created or moved) and new_id is not None:
            group = self._groups.get((card.stream, new_id))
            if group is None:
                group = self._groups[(card.stream, new_id)] = _Group()
            group.cards.append(card)
            if len(group.cards) == 2:
                self._shared.setdefault(card.stream, set()).add(new_id)
            if card.result != group.shown:
                card.result = group.shown
                changed.add(card.id)
        if outcome is not None:
            verdict = self._verdicts[card.id] = _verdict_of(outcome)
            changed |= self._count(card, verdict)
        return changed

    # ------------------------------------------------------------------ internals

    def _order(self, card: Card) -> Any:
        return self._index[card.id] if self._arrival else card.view.key

    def _count(self, card: Card, verdict: _Verdict) -> set[str]:
        call_id = card.view.call_id
        if call_id is None:
            if verdict.owes is not None:
                self._owe(card, verdict.owes)
            return set()
        group = self._groups[(card.stream, call_id)]
        previous = group.owner
        self._count_quietly(group, card, verdict)
        if previous is not None and group.owner is not previous:
            self._forget(previous)
        return self._publish(group)

    def _leave(self, card: Card, old_id: str | None) -> set[str]:
        """``card`` no longer carries ``old_id``: its group is counted again without it."""
        self._forget(card)
        if old_id is None:
            return set()
        group = self._groups[(card.stream, old_id)]
        group.cards.remove(card)
        return self._recount(group)

    def _recount(self, group: _Group) -> set[str]:
        """Count ``group`` again from its members' verdicts."""
        if group.owner is not None:
            self._forget(group.owner)
        group.committed, group.owner, group.owes = False, None, None
        for member in group.cards:
            verdict = self._verdicts.get(member.id)
            if verdict is not None:
                self._count_quietly(group, member, verdict)
        return self._publish(group)

    def _count_quietly(self, group: _Group, card: Card, verdict: _Verdict) -> None:
        """Fold one member's verdict into ``group`` (a client commit, or an earlier owner)."""
        if verdict.committed:
            group.committed = True
        elif verdict.owes is not None and (group.owner is None or self._order(card) < self._order(group.owner)):
            group.owner, group.owes = card, verdict.owes

    def _owe(self, card: Card, result: ToolResult) -> None:
        """``card``'s call owes ``result`` (in place of any result it owed before)."""
        known = self._owed.get(card.id)
        if known is not None and known[1] == result:
            return
        self._forget(card)
        where = (card.stream, self._order(card))
        self._owed[card.id] = (where, result)
        bisect.insort(self._entries, (where, card.id, result), key=_position)
        self._added.append(card.id)

    def _forget(self, card: Card) -> None:
        known = self._owed.pop(card.id, None)
        if known is not None:
            del self._entries[bisect.bisect_left(self._entries, known[0], key=_position)]
            self._rewritten = True

    def _publish(self, group: _Group) -> set[str]:
        """Bring the owed list and the group's cards up to date with its result."""
        result = group.result
        if group.owner is not None:
            if result is None:
                self._forget(group.owner)
            else:
                self._owe(group.owner, result)
        if result == group.shown:
            return set()
        group.shown = result
        changed = set()
        for member in group.cards:
            if member.result != result:
                member.result = result
                changed.add(member.id)
        return changed


__all__ = ["OwedResults"]
