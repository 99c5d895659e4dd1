"""A live stream still arriving: what its triage documents may show of it.

Its open calls have no verdict yet, so nothing of their text may be exported (the
reproducer is refused with :data:`STILL_STREAMING`), and a full assembly of the bytes so far
cuts them off: their diagnoses describe text that has not committed and are dropped.
"""

from __future__ import annotations

from dataclasses import replace

from toollatch.core.model import CallOutcome, StreamResult
from toollatch.web.replay.session import Session


#: Why the reproducer of a live stream still arriving is refused (shown with a 409).
STILL_STREAMING = (
    "The stream is still arriving: some calls have no verdict yet, and a reproducer keeps the "
    "structure of their argument text (object keys, numbers). Export it once the stream has "
    "ended, or press Stop; the JSON report and Markdown summary can be had meanwhile."
)


def still_streaming(session: Session) -> bool:
    """True while a live session's stream is arriving: its source grows and its open calls
    have no verdict yet, so nothing of their text may be exported."""
    return session.source.kind == "live" and not session.status.done


def without_open_diagnoses(session: Session, results: list[StreamResult]) -> list[StreamResult]:
    """``results`` (a full assembly of the bytes so far) with the diagnosis dropped from
    every call the session has not seen reach a verdict: assembling a stream that is still
    arriving cuts those calls off, and their diagnosis (depth, expected token) would describe
    text that has not committed. With ``ui_forward_partial_args: false`` (the session's
    ``forward_progress`` off) such a call's ``bytes`` and ``fragments`` are 0 as well, as
    on the page and in the JSON twin."""
    states = {(card.stream, card.view.key): card.view.state for card in session.cards.values()}

    def withheld(call: CallOutcome) -> CallOutcome:
        if session.forward_progress:
            return replace(call, diagnosis=None)
        return replace(call, diagnosis=None, bytes=0, fragments=0)

    out = []
    for stream, result in enumerate(results):
        calls = [c if (state := states.get((stream, c.key))) is not None and state.terminal else withheld(c) for c in result.calls]
        out.append(replace(result, calls=calls))
    return out


def as_shown(session: Session, results: list[StreamResult]) -> list[StreamResult]:
    """The full ``results`` of ``session`` as its documents may show them: for a live stream
    still arriving, :func:`without_open_diagnoses`; otherwise as they are."""
    return without_open_diagnoses(session, results) if still_streaming(session) else results


__all__ = ["STILL_STREAMING", "as_shown", "still_streaming", "without_open_diagnoses"]
