"""The per-card state machine diagram (``web/pages/diagram.py``) and how a card renders it."""

from __future__ import annotations

import re

from toollatch.core.model import CallState, Transition
from toollatch.redaction.redact import CallView
from toollatch.web.app import resource_dir
from toollatch.web.pages.diagram import EDGES, HEIGHT, NODES, WIDTH, diagram_for
from toollatch.web.pages.render import Renderer
from toollatch.web.replay.session import Card, Session
from toollatch.web.settings import Settings
from toollatch.web.triage.sources import from_demo

from toollatch.demo.demos import DEMOS

S = CallState


def view(*states: CallState, reason: str | None = None) -> CallView:
    transitions = tuple(Transition(s, float(i)) for i, s in enumerate(states))
    return CallView((0,), "call_1", "get_weather", states[-1], reason, 35, 7, "client", transitions)


def test_the_diagram_holds_every_legal_transition_and_nothing_else() -> None:
    assert {(e.source, e.target) for e in EDGES} == {
        (S.OPEN, S.ARGS_COMPLETE),
        (S.ARGS_COMPLETE, S.COMMITTED),
        (S.ARGS_COMPLETE, S.FAILED),
        (S.OPEN, S.FAILED),
        (S.OPEN, S.CANCELLED),
    }
    assert set(NODES) == set(CallState)


def test_nodes_and_arrows_stay_inside_the_view_box_and_do_not_overlap() -> None:
    boxes = list(NODES.values())
    for n in boxes:
        assert 0 <= n.x and n.x + n.w <= WIDTH and 0 <= n.y and n.y + n.h <= HEIGHT
    for a in boxes:
        for b in boxes:
            if a is not b:
                apart = a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y
                assert apart, f"{a.label} overlaps {b.label}"
    for e in EDGES:
        for x, y in (e.start, e.end):
            assert 0 <= x <= WIDTH and 0 <= y <= HEIGHT


def test_committed_path_is_highlighted() -> None:
    dg = diagram_for(view(S.OPEN, S.ARGS_COMPLETE, S.COMMITTED))
    assert dg.current is S.COMMITTED
    assert dg.node_class(NODES[S.COMMITTED]) == "sm-node current sm-committed"
    assert dg.node_class(NODES[S.OPEN]) == "sm-node visited"
    assert dg.node_class(NODES[S.FAILED]) == "sm-node"
    taken = [e for e in EDGES if dg.edge_class(e) == "sm-edge taken"]
    assert [(e.source, e.target) for e in taken] == [(S.OPEN, S.ARGS_COMPLETE), (S.ARGS_COMPLETE, S.COMMITTED)]
    assert dg.label == "State machine, path so far: OPEN → ARGS_COMPLETE → COMMITTED (current)"


def test_cancel_from_open_takes_the_direct_edge() -> None:
    dg = diagram_for(view(S.OPEN, S.CANCELLED))
    taken = [(e.source, e.target) for e in EDGES if dg.edge_class(e).endswith("taken")]
    assert taken == [(S.OPEN, S.CANCELLED)]
    assert dg.node_class(NODES[S.ARGS_COMPLETE]) == "sm-node"


def test_a_call_born_failed_has_no_edges_taken() -> None:
    dg = diagram_for(view(S.FAILED, reason="too_many_tool_calls"))
    assert not any(dg.edge_class(e).endswith("taken") for e in EDGES)
    assert dg.node_class(NODES[S.FAILED]).startswith("sm-node current")


def test_each_card_renders_its_diagram_with_text_labels() -> None:
    settings = Settings()
    renderer = Renderer(resource_dir("templates"), settings)
    session = Session("s1", from_demo(DEMOS["openai-single"]), settings.config, 12.0)
    card = Card(0, view(S.OPEN, S.ARGS_COMPLETE))
    html = renderer.card(session, card)
    svg = re.search(r"<svg class=\"sm\".*?</svg>", html, re.S)
    assert svg is not None
    assert 'role="img"' in svg.group(0) and "path so far: OPEN → ARGS_COMPLETE (current)" in svg.group(0)
    assert re.findall(r"<text [^>]*>(\w+)</text>", svg.group(0)) == ["OPEN", "ARGS_COMPLETE", "COMMITTED", "FAILED", "CANCELLED"]
    assert 'class="sm-node current sm-args_complete"' in svg.group(0)
