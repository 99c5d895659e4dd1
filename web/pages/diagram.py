"""The call state machine as a small inline SVG, one per card, highlighting where a call is.

The diagram is DESIGN.md's core model::

    OPEN ──▶ ARGS_COMPLETE ──▶ COMMITTED
      │              └───────▶ FAILED
      ├─────────────────────▶ FAILED
      └─────────────────────▶ CANCELLED

Geometry is computed once here (boxes, edges, arrowheads in SVG user units); a card only
adds classes: ``current`` for the call's state, ``visited`` for states in its timeline,
``taken`` for edges it went along. Every node carries its state's name as text, so the
diagram never relies on colour alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from toollatch.core.model import CallState
from toollatch.redaction.redact import CallView

#: SVG user units: the diagram's viewBox is ``0 0 WIDTH HEIGHT``.
WIDTH, HEIGHT = 300, 66
_BOX_H = 17
_ARROW = 5.0  # arrowhead length


@dataclass(frozen=True)
class Node:
    """A state's box: top-left corner, width and height, label centre."""

    state: CallState
    x: float
    y: float
    w: float
    h: float = _BOX_H

    @property
    def label(self) -> str:
        return self.state.name

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2


@dataclass(frozen=True)
class Edge:
    """A legal transition drawn from ``start`` to ``end`` (the arrow's tip)."""

    source: CallState
    target: CallState
    start: tuple[float, float]
    end: tuple[float, float]

    @property
    def head(self) -> str:
        """The arrowhead as SVG polygon points."""
        (x1, y1), (x2, y2) = self.start, self.end
        angle = math.atan2(y2 - y1, x2 - x1)
        left = (x2 - _ARROW * math.cos(angle - 0.45), y2 - _ARROW * math.sin(angle - 0.45))
        right = (x2 - _ARROW * math.cos(angle + 0.45), y2 - _ARROW * math.sin(angle + 0.45))
        return " ".join(f"{x:.1f},{y:.1f}" for x, y in (self.end, left, right))

    @property
    def line_end(self) -> tuple[float, float]:
        """Where the line stops: just inside the arrowhead, so the tip stays sharp."""
        (x1, y1), (x2, y2) = self.start, self.end
        angle = math.atan2(y2 - y1, x2 - x1)
        return (x2 - (_ARROW - 1) * math.cos(angle), y2 - (_ARROW - 1) * math.sin(angle))


NODES: dict[CallState, Node] = {
    CallState.OPEN: Node(CallState.OPEN, 1, 24.5, 44),
    CallState.ARGS_COMPLETE: Node(CallState.ARGS_COMPLETE, 76, 1.5, 96),
    CallState.COMMITTED: Node(CallState.COMMITTED, 215, 1.5, 84),
    CallState.FAILED: Node(CallState.FAILED, 215, 24.5, 84),
    CallState.CANCELLED: Node(CallState.CANCELLED, 215, 47.5, 84),
}


def _edge(source: CallState, target: CallState, dy_start: float = 0.0, dy_end: float = 0.0) -> Edge:
    a, b = NODES[source], NODES[target]
    return Edge(source, target, (a.x + a.w, a.cy + dy_start), (b.x - 1, b.cy + dy_end))


EDGES: tuple[Edge, ...] = (
    _edge(CallState.OPEN, CallState.ARGS_COMPLETE, -5, 2),
    _edge(CallState.ARGS_COMPLETE, CallState.COMMITTED),
    _edge(CallState.ARGS_COMPLETE, CallState.FAILED, 5, -4),
    _edge(CallState.OPEN, CallState.FAILED),
    _edge(CallState.OPEN, CallState.CANCELLED, 5, 0),
)


@dataclass(frozen=True)
class Diagram:
    """What one card's diagram highlights."""

    current: CallState
    visited: frozenset[CallState]
    taken: frozenset[tuple[CallState, CallState]]

    def node_class(self, node: Node) -> str:
        if node.state is self.current:
            return f"sm-node current sm-{node.state.value}"
        return "sm-node visited" if node.state in self.visited else "sm-node"

    def edge_class(self, edge: Edge) -> str:
        return "sm-edge taken" if (edge.source, edge.target) in self.taken else "sm-edge"

    @property
    def label(self) -> str:
        """Text alternative, e.g. ``State machine: OPEN → ARGS_COMPLETE → COMMITTED (current)``."""
        return "State machine, path so far: " + " → ".join(self.path) + " (current)"

    @property
    def path(self) -> list[str]:
        return [s.name for s in _path_states(self)]


def _path_states(diagram: Diagram) -> list[CallState]:
    order = [CallState.OPEN, CallState.ARGS_COMPLETE, CallState.COMMITTED, CallState.FAILED, CallState.CANCELLED]
    return [s for s in order if s in diagram.visited]


def diagram_for(view: CallView) -> Diagram:
    """The highlight for a call: its current state, the states it went through, the edges taken."""
    states = [t.state for t in view.transitions] or [view.state]
    if states[-1] is not view.state:
        states.append(view.state)
    taken = frozenset(zip(states, states[1:]))
    return Diagram(view.state, frozenset(states), taken)
