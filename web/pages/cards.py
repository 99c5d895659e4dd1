"""What a session shows of each call, and what changed since the last render.

:class:`Card` holds a call's redacted view (and its arguments once committed);
:class:`Changes` records which regions of the page a render must redo, so the WebSocket hub
renders each changed card once however many events arrived in between.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from toollatch.core.model import CallKey, StreamEndKind, ToolResult
from toollatch.redaction.redact import CallView


def card_id(stream: int, key: CallKey) -> str:
    """Stable DOM id of a call's card, e.g. ``call-0-0-1-0``."""
    return "call-" + "-".join(str(part) for part in (stream, *key))


@dataclass
class Card:
    """What the dashboard knows of one call.

    ``arguments`` is set only once an assembly event said the call is COMMITTED;
    ``result`` is the error result owed for a non-committed call, once known.
    """

    stream: int
    view: CallView
    arguments: dict[str, Any] | None = None
    result: ToolResult | None = None

    @cached_property
    def id(self) -> str:
        """:func:`card_id` of the call (its key never changes)."""
        return card_id(self.stream, self.view.key)


@dataclass
class Verdict:
    """A terminal outcome to announce: a call's final state, or a stream's end."""

    text: str
    state: str  # a CallState value, or "stream"
    #: a call's verdict: ``text`` without its reason (the log names the reason in a few
    #: words; its full text is on the call's card); ``reason``: the reason string
    head: str | None = None
    reason: str | None = None


@dataclass
class Changes:
    """What changed since the last render.

    ``cards``: ids of cards whose view changed (bytes, fragments, identity or state);
    ``transitions``: the subset whose *state* changed or that appeared. ``added``: ids of
    cards that appeared, in order (a render appends them when they come after every card
    shown, else redoes the list). ``layout``: the whole list of cards is to be redone;
    ``reset``: the session was rebuilt (restart, seek back). ``verdicts``: new verdicts to
    append to the log, in order. ``results``: the list of owed error results is to be
    redone; ``results_added``: the calls (card ids) owing results added to it, appended
    like cards.
    """

    cards: set[str] = field(default_factory=set)
    transitions: set[str] = field(default_factory=set)
    added: list[str] = field(default_factory=list)
    layout: bool = False
    status: bool = False
    controls: bool = False
    results: bool = False
    results_added: list[str] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    reset: bool = False

    def any(self) -> bool:
        return bool(
            self.cards or self.added or self.layout or self.status or self.controls or self.results or self.results_added or self.verdicts or self.reset
        )

    @property
    def essential(self) -> bool:
        """True when this is more than progress: a state transition, a verdict, a new
        card, a rebuild or a status/control change. Progress-only changes (byte and
        fragment counts, the event counter) may be dropped for a slow viewer because a
        later render supersedes them."""
        return bool(
            self.transitions or self.verdicts or self.added or self.layout or self.reset or self.controls or self.results or self.results_added
        )

    def merge(self, other: Changes) -> Changes:
        """A new :class:`Changes` covering both ``self`` and the later ``other``."""
        return Changes(
            cards=self.cards | other.cards,
            transitions=self.transitions | other.transitions,
            added=list(dict.fromkeys([*self.added, *other.added])),
            layout=self.layout or other.layout,
            status=self.status or other.status,
            controls=self.controls or other.controls,
            results=self.results or other.results,
            results_added=list(dict.fromkeys([*self.results_added, *other.results_added])),
            verdicts=[*self.verdicts, *other.verdicts],
            reset=self.reset or other.reset,
        )

    @classmethod
    def everything(cls) -> Changes:
        """Every region, the verdict log replaced: a full-state render."""
        return cls(layout=True, status=True, controls=True, results=True, reset=True)


@dataclass
class EndState:
    """How one stream of the input ended."""

    kind: StreamEndKind
    detail: str | None


__all__ = ["Card", "Changes", "EndState", "Verdict", "card_id"]
