"""One line that says how a finished session went, and verdict counts for the session list.

Built from the cards only (states and reason codes; never argument text):
``"1 of 2 calls FAILED: invalid JSON at byte 90 · 1 COMMITTED"``.
"""

from __future__ import annotations

from collections import Counter

from toollatch.core.model import CallState

from toollatch.web.pages.glossary import short_reason
from toollatch.web.replay.session import Card, Session
from toollatch.web.triage.diagnosis import card_diagnosis

#: Verdict states in the order chips and summaries name them.
VERDICT_ORDER = (CallState.FAILED, CallState.CANCELLED, CallState.COMMITTED)
#: Distinct reasons named in a summary line; more are counted ("and 2 more").
MAX_REASONS = 2


def verdict_counts(session: Session) -> list[tuple[str, int]]:
    """``[(state value, count), ...]`` of the calls with a verdict, FAILED first; empty
    before any verdict."""
    counts = Counter(card.view.state for card in session.cards.values() if card.view.state.terminal)
    return [(state.value, counts[state]) for state in VERDICT_ORDER if counts[state]]


def _would_have_failed(session: Session, cancelled: list[Card]) -> str:
    """``" — the buffer would have failed: invalid JSON at byte 90"`` for the first cancelled
    call whose buffer had already stopped being JSON (one more is counted), else ``""``."""
    found = [dx["would_have_failed"] for dx in (card_diagnosis(session, card) for card in cancelled) if dx]
    if not found:
        return ""
    return f" — {found[0]}" + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")


def session_summary(session: Session) -> str | None:
    """One line for a finished session (``None`` while it runs, and for one that ended with
    an error before any call: the error is the line): how many calls failed or were
    cancelled, with the first reasons in a few words, and how many committed."""
    if not session.status.done:
        return None
    cards = list(session.cards.values())
    if not cards:
        return None if session.error else "No tool calls."  # an error is shown on its own, once
    total = len(cards)
    counts = Counter(card.view.state for card in cards)
    calls = "call" if total == 1 else "calls"
    parts: list[str] = []
    failed = [card for card in cards if card.view.state is CallState.FAILED]
    if failed:
        # distinct reason strings first: 100,000 calls failed alike are one short_reason
        reasons = list(dict.fromkeys(short_reason(reason) for reason in dict.fromkeys(card.view.reason for card in failed)))
        named = "; ".join(reasons[:MAX_REASONS]) + (f"; and {len(reasons) - MAX_REASONS} more" if len(reasons) > MAX_REASONS else "")
        parts.append(f"{len(failed)} of {total} {calls} FAILED: {named}")
    for state in (CallState.CANCELLED, CallState.COMMITTED):
        if counts[state]:
            part = f"{counts[state]} of {total} {calls} {state.name}" if not parts else f"{counts[state]} {state.name}"
            if state is CallState.CANCELLED:
                part += _would_have_failed(session, [card for card in cards if card.view.state is CallState.CANCELLED])
            parts.append(part)
    unsettled = total - sum(counts[s] for s in VERDICT_ORDER)
    if unsettled:
        parts.append(f"{unsettled} without a verdict")
    return " · ".join(parts)
