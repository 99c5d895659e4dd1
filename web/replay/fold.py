"""Folding assembly events into a session's redacted state.

Each :class:`~toollatch.redaction.redact.AssemblyEvent` a session's pipeline emits becomes
a change to its cards (one per call, kept in provider order), its stream ends, verdicts
and owed results, and is marked pending for the next render and WebSocket push
(:class:`~toollatch.web.pages.cards.Changes`). A call's arguments are fetched only once it
is COMMITTED (the latch held). Every function takes the
:class:`~toollatch.web.replay.session.Session` it updates.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from toollatch.core.model import CallState
from toollatch.redaction.redact import AssemblyEvent

from toollatch.web.pages.cards import Card, EndState, Verdict, card_id

if TYPE_CHECKING:
    from toollatch.web.replay.session import Session


def _provider_order(card: Card) -> tuple[int, tuple[int, ...]]:
    return card.stream, card.view.key


def fold_event(session: Session, event: AssemblyEvent) -> None:
    """Fold one assembly event into ``session``'s redacted state: its cards, stream ends,
    verdicts and owed results, and what is pending to send (``session.pending``)."""
    if event.kind == "stream_end" and event.end is not None:
        session.ends[event.stream] = EndState(event.end, event.detail)
        session.pending.status = True
        stream = session.pipeline.streams[event.stream]
        session.pending.cards |= session._owed.recount_shared(event.stream, lambda card: stream.outcome(card.view.key))
        take_owed_news(session)
        if not session._owed:  # the results panel says why there are none
            session.pending.results = True
        detail = f" ({event.detail})" if event.detail else ""
        session._announce(Verdict(f"Stream {event.stream} ended: {event.end}{detail}", "stream"))
        return
    if event.kind == "quirk":
        return  # counted by the assembler; read back with quirk_counts()
    if event.call is None:
        return
    view = session.shown(event.call)
    cid = card_id(event.stream, view.key)
    card = session.cards.get(cid)
    was: CallState | None = None
    old_id: str | None = None
    if card is None:
        card = session.cards[cid] = Card(event.stream, view)
        bisect.insort(session._ordered, card, key=_provider_order)
        session.pending.added.append(cid)
    else:
        if card.view == view:
            return  # e.g. a fragment while its counts are withheld: nothing to send
        was, old_id = card.view.state, card.view.call_id
    card.view = view
    if view.state is not was:
        session._states[view.state] += 1
        if was is not None:
            session._states[was] -= 1
    session.pending.cards.add(cid)
    if view.state is not was:
        session.pending.transitions.add(cid)
    if view.state is CallState.COMMITTED and card.arguments is None:
        # The latch held: only now may the arguments be fetched and shown.
        committed = session.pipeline.committed(event.stream, view.key)
        if committed is not None:
            card.arguments = session.scrubbed(committed.arguments)
    verdict = view.state.terminal and (was is None or not was.terminal)
    if verdict or was is None or old_id != view.call_id:
        settle_result(session, card, created=was is None, old_id=old_id)
    if verdict:
        name = view.name or "unnamed call"
        reason = f": {view.reason}" if view.reason else ""
        head = f"{name} ({view.call_id or 'no id'}) {view.state.name}"
        session._announce(Verdict(f"{head}{reason}", view.state.value, head, view.reason))

def settle_result(session: Session, card: Card, *, created: bool, old_id: str | None) -> None:
    """Bring the owed results and the cards' error results up to date after ``card``
    appeared, changed its ``tool_call_id`` or got its verdict: constant work for a call
    whose id no other call of its stream carries."""
    outcome = None
    if card.view.state.terminal:
        outcome = session.pipeline.streams[card.stream].outcome(card.view.key)
    session.pending.cards |= session._owed.update(card, created=created, old_id=old_id, outcome=outcome)
    take_owed_news(session)

def take_owed_news(session: Session) -> None:
    """Results added to the owed list are appended on screen; any other change redoes it."""
    added, rewritten = session._owed.take_news()
    if rewritten:
        session.pending.results = True  # the list is redone
    else:
        session.pending.results_added.extend(added)
