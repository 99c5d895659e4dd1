"""HTML rendering: the Jinja environment, and WebSocket messages built from partials.

One partial serves both the full page and the live update: ``partials/_card.html`` is
included by the session page, and rendered alone with ``oob=True`` for a WebSocket
message. A message is a plain HTML string (not JSON) whose top-level elements all carry
``hx-swap-oob`` and a stable ``id``; htmx 4's ``hx-ws`` extension swaps each into the
element with that id and, since nothing else is left, skips the main swap.

Only :class:`~toollatch.web.replay.session.Card` data reaches templates: a call's ``view`` (name, id,
counts, state, reason, transitions) and, after commit, its ``arguments``.

Rendering is triggered by :class:`toollatch.web.replay.fanout.Broadcaster`, at most a few dozen times a
second per session whatever the replay speed.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from pathlib import Path
from typing import Any

import jinja2

from toollatch.core import jsontext
from toollatch.demo.demos import Demo
from toollatch.core.model import CallState, ToolResult

from toollatch.web.pages import diagram, glossary
from toollatch.web.mask_values import hide_values
from toollatch.web.triage.diagnosis import card_diagnosis
from toollatch.web.replay.session import Card, Changes, Session
from toollatch.web.pages.summary import session_summary, verdict_counts
from toollatch.web.settings import FULL_SPEED, RATES, SPEEDS, Settings, speed_label, speed_value

#: Committed arguments longer than this (characters of pretty JSON) are cut on screen.
MAX_ARGUMENTS_SHOWN = 64 * 1024
#: Committed arguments nested deeper than this are shown on one line: indentation would
#: push the values off screen.
MAX_INDENTED_DEPTH = 16
#: Labelled ticks under each bar (bytes); the scale is logarithmic up to the limit.
BAR_TICKS = (16, 1024, 16 * 1024, 128 * 1024)


def human_bytes(n: int) -> str:
    """``35 B``, ``4.0 KiB``, ``286.1 KiB``, ``1.2 MiB``."""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB".replace(".0 ", " ")
    return f"{n / (1024 * 1024):.1f} MiB".replace(".0 ", " ")


def bar_percent(n: int, limit: int) -> float:
    """Position of ``n`` bytes on a log scale whose full width is ``limit`` bytes (0–100)."""
    if n <= 0 or limit <= 0:
        return 0.0
    return round(min(100.0, 100.0 * math.log1p(n) / math.log1p(limit)), 2)


def pretty_arguments(arguments: Any) -> str:
    """Committed arguments as JSON text (escaped later by the template), at any nesting depth.

    Indented by 2; nested deeper than :data:`MAX_INDENTED_DEPTH` levels, on one line after a
    note saying how deep; cut after :data:`MAX_ARGUMENTS_SHOWN` characters with a note.
    """
    depth = jsontext.value_depth(arguments)
    if depth > MAX_INDENTED_DEPTH:
        text = f"(nested {depth} levels deep: shown without indentation)\n" + jsontext.dumps(arguments)
    else:
        text = jsontext.dumps(arguments, indent=2)
    if len(text) > MAX_ARGUMENTS_SHOWN:
        cut = len(text) - MAX_ARGUMENTS_SHOWN
        text = text[:MAX_ARGUMENTS_SHOWN] + f"\n… {cut:,} more characters (see the JSON view)"
    return text


def plural(n: int, singular: str, many: str | None = None) -> str:
    """``1 registered tool``, ``2 registered tools``, ``1,024 bytes`` (``many``: an irregular plural)."""
    return f"{n:,} {singular if n == 1 else (many or singular + 's')}"


def fmt_t(t: float, virtual: bool = False) -> str:
    """Seconds since stream start as ``+1.250 s``; a replay's virtual clock (one ``1 / rate``
    second tick per provider event, whatever the playback speed) as ``virtual +1,040.000 s``."""
    return f"virtual +{t:,.3f} s" if virtual else f"+{t:,.3f} s"


def _verdict_label(expected: str) -> str:
    """``"failed:invalid_json"`` -> ``"FAILED (invalid_json)"``."""
    state, _, reason = expected.partition(":")
    return state.upper() + (f" ({reason})" if reason else "")


def demo_groups(demos: list[Demo]) -> list[dict[str, Any]]:
    """Demos grouped by scenario: ``[{"key", "title", "description", "expected", "demos"}]``."""
    groups: OrderedDict[str, dict[str, Any]] = OrderedDict()
    for demo in demos:
        key = demo.name.split("-", 1)[1] if "-" in demo.name else demo.name
        title = demo.title.rsplit(" (", 1)[0]
        group = groups.setdefault(key, {"key": key, "title": title, "description": demo.description, "demos": []})
        group["expected"] = ", ".join(_verdict_label(e) for e in demo.expected) + f" · stream {demo.expected_end}"
        group["demos"].append(demo)
    return list(groups.values())


def appended_cards(session: Session, added: list[str]) -> list[Card] | None:
    """The cards ``added`` since the last render, in provider order, when they all come after
    every card shown before (the usual case: a render appends only them, whatever the number
    of cards); None when the list must be redone (one came between cards already shown, or
    they are the first cards, replacing the "no tool calls" note)."""
    ids = {cid for cid in added if cid in session.cards}
    if not ids:
        return []
    ordered = session.ordered_cards
    if len(ordered) == len(ids):
        return None
    tail = ordered[-len(ids):]
    return tail if {card.id for card in tail} == ids else None


def appended_owed(session: Session, owners: list[str]) -> list[tuple[int, ToolResult]] | None:
    """The owed results of the calls ``owners`` (added since the last render), in order, when
    they all come after every result shown before; None when the list must be redone (one
    came between them, or they are the first, replacing the "none yet" note)."""
    ids = set(owners)
    if not ids:
        return []
    tail = session.owed.last(len(ids))
    if len(session.owed) == len(ids) or {owner for owner, _, _ in tail} != ids:
        return None
    return [(stream, result) for _, stream, result in tail]


class Renderer:
    """Renders pages and live-update messages from one template directory."""

    def __init__(self, templates_dir: Path, settings: Settings) -> None:
        self.settings = settings
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(templates_dir),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(
            human_bytes=human_bytes,
            fmt_t=fmt_t,
            plural=plural,
            pretty=pretty_arguments,
            hide_values=hide_values,
            compact_json=jsontext.dumps,  # any depth; escaped by autoescape
            plain=glossary.plain,
            plain_reason=glossary.plain_reason,
            reason_code=glossary.reason_code,
            short_reason=glossary.short_reason,
        )
        self.env.globals.update(
            bar_percent=bar_percent,
            bar_ticks=[(human_bytes(n), bar_percent(n, settings.config.max_tool_argument_bytes)) for n in BAR_TICKS],
            max_bytes=settings.config.max_tool_argument_bytes,
            forward_progress=settings.config.ui_forward_partial_args,
            rates=RATES,
            speeds=[(speed_value(v), speed_label(v)) for v in (*SPEEDS, FULL_SPEED)],
            CallState=CallState,
            diagram_for=diagram.diagram_for,
            diagram_nodes=list(diagram.NODES.values()),
            diagram_edges=diagram.EDGES,
            diagram_size=(diagram.WIDTH, diagram.HEIGHT),
            card_diagnosis=card_diagnosis,
            session_summary=session_summary,
            verdict_counts=verdict_counts,
        )

    def page(self, name: str, **context: Any) -> str:
        return self.env.get_template(name).render(**context)

    def index_context(self) -> dict[str, Any]:
        """Variables of the index page that take reading files (blocking: the captures
        folder, the mock's scenarios): none here."""
        return {}

    def session_context(self, session: Session) -> dict[str, Any]:
        """Variables every session template uses."""
        return {"s": session, "cards": session.ordered_cards, "multi_stream": session.multi_stream}  # no per-card work

    def _part(self, name: str, session: Session, **extra: Any) -> str:
        return self.env.get_template(f"partials/{name}").render(**self.session_context(session), oob=True, **extra)

    def card(self, session: Session, card: Card, *, oob: bool = True) -> str:
        ctx = self.session_context(session)
        return self.env.get_template("partials/_card.html").render(**ctx, card=card, oob=oob)

    def update(self, session: Session, changes: Changes) -> str:
        """One WebSocket message for ``changes``: each changed region rendered once."""
        parts: list[str] = []
        if changes.status:
            parts.append(self._part("_status.html", session))
            parts.append(self._part("_quirks.html", session))
        if changes.controls:
            parts.append(self._part("_controls.html", session))
        appended = None if changes.layout or changes.reset else appended_cards(session, changes.added)
        if appended is None or (changes.status and not session.cards):  # "No tool calls yet / in this stream"
            parts.append(self._part("_calls.html", session))
        else:
            if appended:
                parts.append(self._part("_cards_added.html", session, added=appended))
            fresh = {card.id for card in appended}
            for cid in sorted(changes.cards - fresh):
                card = session.cards.get(cid)
                if card is not None:
                    parts.append(self.card(session, card))
        appended_results = None if changes.results or changes.reset else appended_owed(session, changes.results_added)
        if appended_results is None:
            parts.append(self._part("_results.html", session))
        elif appended_results:
            parts.append(self._part("_results_added.html", session, added=appended_results))
        if changes.reset:
            parts.append(self._part("_verdicts.html", session, verdicts=session.verdicts, mode="innerHTML"))
        elif changes.verdicts:
            parts.append(self._part("_verdicts.html", session, verdicts=changes.verdicts, mode="beforeend"))
        return "\n".join(parts)

    def full_update(self, session: Session) -> str:
        """The whole current state, for a subscriber that just connected (or is resynced)."""
        return self.update(session, Changes.everything())
