"""Pages of a session's JSON twin: a window of its calls, and stream results that hold
only the calls of that window (:meth:`toollatch.web.replay.session.Session.to_json`).

The work per request is bounded by the page's size, not by the session's (a stream of
100,000 calls).
"""

from __future__ import annotations

from toollatch.core.calls import owed_results
from toollatch.core.model import CallOutcome, StreamResult
from toollatch.core.pipeline import Pipeline
from toollatch.web.pages.cards import Card, EndState

#: Calls in one page of a session's JSON twin unless asked otherwise.
CALLS_PAGE = 1000
#: The most calls one page may hold.
MAX_CALLS_PAGE = 5000


def page_results(pipeline: Pipeline, ends: dict[int, EndState], window: list[Card]) -> list[StreamResult]:
    """Stream results holding the calls of ``window`` only (every stream is listed, its
    quirks and end whole; ``ends`` gives each ended stream's shown detail), with the error
    results those calls are owed."""
    committed = set(pipeline.committed_ids)
    streams = pipeline.streams
    wanted: dict[int, list[CallOutcome]] = {}
    for card in window:
        if card.stream < len(streams):
            outcome = streams[card.stream].outcome(card.view.key)
            if outcome is not None:
                wanted.setdefault(card.stream, []).append(outcome)
    out = []
    for index, stream in enumerate(streams):
        calls = wanted.get(index, [])
        end = ends.get(index)
        detail = end.detail if end is not None and stream.end is not None else None
        out.append(StreamResult(stream.dialect, stream.end, detail, calls, owed_results(calls, committed), stream.quirks))
    return out


__all__ = ["CALLS_PAGE", "MAX_CALLS_PAGE", "page_results"]
