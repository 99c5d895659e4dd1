"""Triage of one session: diagnoses of failed calls, the naive-client lane, reveal, full results.

Everything here is computed from what the session has replayed so far (its pipeline's
results and the first ``position`` provider events of its source), except
:func:`full_results`, which assembles the whole source (for the exports and the compare
page). Heavy work (re-reading the source) runs in a worker thread and is cached per
session and replay state, and per source size (a live source grows).

What reaches a page or the JSON twin: tool names, call ids, verdicts, byte and fragment
counts, diagnoses (fragment index, byte offset, expected token class, depth, JSON
Pointers), token classes around a break, and arguments only where the latch committed
them. The text around a break is added only when the user turned *Reveal text* on for
that session, which is offered only for uploaded or recorded-file captures whose replay
is over (never for a live stream, never before the end).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from toollatch.wire.capture import ProviderEvent
from toollatch.core.model import CallOutcome, CallState, StreamResult
from toollatch.redaction.naive import NaiveAction, naive_lane
from toollatch.core.large import CappedPipeline
from toollatch.core.pipeline import Pipeline

from toollatch.web.triage import breakpoint
from toollatch.web.pages import glossary
from toollatch.web.mask_values import hide_values
from toollatch.web.replay.paging import CALLS_PAGE
from toollatch.web.replay.session import Card, Session
from toollatch.web.triage.open_streams import still_streaming
from toollatch.web.triage.sources import LoadedSource, capped_events, iter_events
from toollatch.web.triage.bulk import is_blank  # after the rest: a whole-input check in pieces

log = logging.getLogger("toollatch.web")

#: Source kinds whose failed calls' text may be revealed on request (never ``"live"`` or
#: ``"recording"``: those bytes came from a live stream).
REVEALABLE = ("upload", "capture")
#: Failed calls per session for which the break context is recovered.
MAX_CONTEXTS = 24
#: Calls failed for a reason without a text diagnosis listed by name in the triage view (a
#: stream of 100,000 calls failed ``too_many_tool_calls`` lists these, and counts the rest).
MAX_OTHER_FAILURES = 200

STRATEGIES = glossary.STRATEGIES  # what each naive strategy does, in plain words


class Events:
    """The first ``limit`` provider events of a source, re-read on every iteration (bounded memory)."""

    def __init__(self, source: LoadedSource, limit: int | None = None) -> None:
        self.source = source
        self.limit = source.count if limit is None else min(limit, source.count)

    def __iter__(self) -> Iterator[ProviderEvent]:
        # From the bytes, not ``source.iter_events()``: a live source keeps its bytes but
        # does not replay them.
        return itertools.islice(iter_events(self.source.stream_data, self.source.name), self.limit)

    def __len__(self) -> int:
        return self.limit

    def __contains__(self, item: object) -> bool:
        return any(item == event for event in self)


@dataclass
class _Cache:
    full: list[StreamResult] | None = None
    full_size: tuple[int, int] | None = None  # source bytes and events ``full`` was assembled from
    state: tuple[int, int, int, int, str] | None = None
    view: dict[str, Any] | None = None
    # The computation under way, and the state it is for: a view asked for meanwhile (the
    # page's fetch right after the prewarm at the end of a replay) waits for it.
    running: asyncio.Future[dict[str, Any]] | None = None
    running_state: tuple[int, int, int, int, str] | None = None


@dataclass
class _Flags:
    reveal: bool = False


_caches: weakref.WeakKeyDictionary[Session, _Cache] = weakref.WeakKeyDictionary()
_flags: weakref.WeakKeyDictionary[Session, _Flags] = weakref.WeakKeyDictionary()


# ------------------------------------------------------------------ reveal


def reveal_allowed(session: Session) -> bool:
    """Reveal is offered for uploaded captures and capture files, once the replay is over."""
    source = session.source
    if source.kind not in REVEALABLE or not session.status.done:
        return False
    return not (source.kind == "capture" and source.name.startswith("recording "))  # a replayed live recording


def revealed(session: Session) -> bool:
    flags = _flags.get(session)
    return bool(flags and flags.reveal and reveal_allowed(session))


def set_reveal(session: Session, on: bool) -> bool:
    """Turn *Reveal text* on or off for ``session``; returns whether it is on now."""
    _flags.setdefault(session, _Flags()).reveal = bool(on) and reveal_allowed(session)
    return _flags[session].reveal


# ------------------------------------------------------------------ full results


def assemble_source(source: LoadedSource, config: Any, calls_followed: int | None = None) -> list[StreamResult]:
    """The whole source through a fresh pipeline (virtual clock, no progress events); no
    streams when there is nothing to assemble yet (a live source before its first event,
    or a non-streaming body not yet whole or not readable). ``calls_followed``: the
    calls of the input the session follows (the first ones), None: all of them."""
    data = source.stream_data
    if is_blank(data):
        return []
    kwargs: dict[str, Any] = {"config": config, "registry": source.registry(), "name": source.name, "clock": lambda: 0.0, "progress_events": False}
    pipeline = Pipeline(**kwargs) if calls_followed is None else CappedPipeline(keep=calls_followed, **kwargs)
    for event in iter_events(data, source.name) if calls_followed is None else capped_events(data, source.name):
        pipeline.feed(event)
    pipeline.close()
    return pipeline.results()


async def full_results(session: Session) -> list[StreamResult]:
    """The whole source assembled (cached per session, source size and event count: a live
    source that grew, or whose non-streaming body was read, is assembled again); raises
    ``CaptureError`` if unreadable."""
    cache = _caches.setdefault(session, _Cache())
    size = (session.source.size, session.source.count)
    if cache.full is None or cache.full_size != size:
        full = await asyncio.to_thread(assemble_source, session.source, session.config, session.calls_followed)
        if (session.source.size, session.source.count) == size:  # a chunk that arrived meanwhile is not in ``full``
            cache.full, cache.full_size = full, size
        return full
    return cache.full


# ------------------------------------------------------------------ cards


def outcome(session: Session, stream: int, key: tuple[int, ...]) -> CallOutcome | None:
    """The session's current outcome record of one call (that call's alone: a card render
    does not build the records of every call)."""
    streams = session.pipeline.streams
    if not 0 <= stream < len(streams):
        return None
    return streams[stream].outcome(key)


def card_diagnosis(session: Session, card: Card) -> dict[str, Any] | None:
    """``{"text", "diagnosis"}`` for a FAILED card with a diagnosis, else None (cheap: no
    re-read). For a CANCELLED card whose buffer had already stopped being JSON,
    ``{"text", "diagnosis", "would_have_failed"}``, ``text`` saying where the buffer broke (see :func:`breakpoint.would_have_failed`)."""
    if card.view.state not in (CallState.FAILED, CallState.CANCELLED):
        return None
    call = outcome(session, card.stream, card.view.key)
    if call is None or not call.diagnosis:
        return None
    if card.view.state is CallState.CANCELLED:
        would = breakpoint.would_have_failed(call.diagnosis)
        if would is None:
            return None
        return session.scrubbed({"text": breakpoint.describe(call.diagnosis["text"]), "diagnosis": call.diagnosis, "would_have_failed": would})
    return session.scrubbed({"text": breakpoint.describe(call.diagnosis), "diagnosis": call.diagnosis})


# ------------------------------------------------------------------ the triage view


def _compute(
    source: LoadedSource,
    dialect: str | None,
    position: int,
    results: list[StreamResult] | Callable[[], list[StreamResult]],
    done: bool,
    reveal: bool,
    untold: int = 0,
) -> dict[str, Any]:
    """The triage view of a replay state (runs in a worker thread). ``other_failures`` lists
    at most :data:`MAX_OTHER_FAILURES` calls; ``other_failures_total`` counts them all.
    ``untold``: calls the session left out of large events (no naive-client lane then)."""
    if callable(results):
        results = results()
    events = Events(source, position)
    diagnoses: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []  # failed for a reason that has no text diagnosis
    other_total = 0
    for stream, result in enumerate(results):
        for call in result.calls:
            if call.state is not CallState.FAILED:
                continue
            if not call.diagnosis:
                other_total += 1
                if len(others) >= MAX_OTHER_FAILURES:
                    continue
                others.append({"stream": stream, "call_id": call.call_id, "name": call.name, "reason": (call.reason or "").split(":", 1)[0]})
                continue
            entry: dict[str, Any] = {
                "stream": stream,
                "key": list(call.key),
                "call_id": call.call_id,
                "name": call.name,
                "reason": (call.reason or "").split(":", 1)[0],
                "bytes": call.bytes,
                "fragments": call.fragments,
                "diagnosis": call.diagnosis,
                "text": breakpoint.describe(call.diagnosis),
                "context": None,
            }
            if call.diagnosis.get("kind") in ("invalid", "incomplete") and dialect and len(diagnoses) < MAX_CONTEXTS:
                try:
                    _add_context(entry, events, dialect, stream, call, reveal)
                except Exception as exc:  # a provider event of a shape the re-read cannot take: no context, named
                    log.warning("triage: break context of a call not recovered (%s)", type(exc).__name__)
                    entry["context_error"] = f"The token classes around the break could not be recovered ({type(exc).__name__})."
            diagnoses.append(entry)
    lane: list[dict[str, Any]] | None = None
    lane_error: str | None = None
    if done and dialect and untold:
        lane_error = f"The naive-client lane is not computed for this stream: the dashboard left {untold} of its calls out."
    elif done and dialect:
        try:
            lane = [_lane_row(a) for a in naive_lane(events, dialect, results)]
        except Exception as exc:  # e.g. a hostile choices[].index: only the lane is lost, named
            log.warning("triage: naive-client lane failed with %s", type(exc).__name__)
            lane_error = (
                "The naive-client lane is unavailable for this stream: a provider event has a shape "
                f"the naive strategies cannot read ({type(exc).__name__})."
            )
    return {"diagnoses": diagnoses, "other_failures": others, "other_failures_total": other_total, "naive_lane": lane, "naive_lane_error": lane_error}


def _add_context(entry: dict[str, Any], events: Events, dialect: str, stream: int, call: CallOutcome, reveal: bool) -> None:
    """Set ``entry["context"]`` (token classes around the break) and, when ``reveal``,
    ``entry["revealed"]``, from the call's fragments re-read from the source."""
    assert call.diagnosis is not None
    fragments = breakpoint.call_fragments(events, dialect, stream, call.key)
    context = breakpoint.break_context(fragments, call.diagnosis) if fragments is not None else None
    if context is not None and fragments is not None:
        entry["context"] = context.to_json()
        if reveal:
            before, after = breakpoint.text_window(fragments, context.offset)
            entry["revealed"] = {"before": before, "after": after}


def _lane_row(action: NaiveAction) -> dict[str, Any]:
    doc = action.to_json()
    doc["description"] = STRATEGIES.get(action.strategy, action.strategy)
    return doc


def _results_for_view(session: Session, done: bool) -> list[StreamResult] | Callable[[], list[StreamResult]]:
    """What :func:`_compute` reads: the stream results of an ended session as a function
    (built in the worker thread: they no longer change), a snapshot taken now of a running
    one of at most :data:`~toollatch.web.replay.paging.CALLS_PAGE` calls, and none of a
    larger running one (its diagnoses come once it ends: no request builds 100,000 call
    records on the event loop)."""
    if done:
        return session.pipeline.results
    return session.pipeline.results() if len(session.cards) <= CALLS_PAGE else []


def stream_ends(session: Session) -> list[StreamResult]:
    """Each stream's end and end detail, as stream results without calls (all that
    :func:`truncation` reads): constant work per stream."""
    out = []
    for index, stream in enumerate(session.pipeline.streams):
        end = session.ends.get(index)
        out.append(StreamResult(stream.dialect, stream.end, end.detail if end is not None else None, [], [], {}))
    return out


def truncation(session: Session, results: list[StreamResult], stored_meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """How the input was cut off, if it was: streams that ended truncated, and the cut's place."""
    streams = [i for i, r in enumerate(results) if r.end == "truncated"]
    cut = (stored_meta or {}).get("cut")
    if not streams and not cut:
        return None
    details = [r.end_detail for r in results if r.end == "truncated" and r.end_detail]
    return {"streams": streams, "cut": cut, "detail": details[0] if details else None}


def provider_messages(session: Session, reveal: bool) -> list[dict[str, Any]]:
    """The free text of each provider error that ended a stream: ``{"stream", "message"}``
    with *Reveal text* on, else ``{"stream", "message": None}`` (it is untrusted and may
    quote a call's buffered arguments, so it is never shown otherwise)."""
    out = []
    for index, stream in enumerate(session.pipeline.streams):
        message = getattr(stream, "provider_message", None)  # a mirrored stream has none here
        if message:
            out.append({"stream": index, "message": message if reveal else None})
    return out


async def _compute_safely(
    session: Session, results: list[StreamResult] | Callable[[], list[StreamResult]], done: bool, reveal: bool
) -> dict[str, Any]:
    """:func:`_compute` in a worker thread; ``results`` may be a function giving them (the
    stream results of a session that has ended, which no longer change: worked out in the
    thread too, so a session of 100,000 calls never builds them on the event loop)."""
    try:
        untold = getattr(session.pipeline, "untold", 0)
        return await asyncio.to_thread(_compute, session.source, session.pipeline.dialect, session.position, results, done, reveal, untold)
    except Exception as exc:  # never a 500: the lane and contexts are extras
        log.error("session %s: triage failed with %s", session.id, type(exc).__name__)
        return {"diagnoses": [], "other_failures": [], "naive_lane": None, "naive_lane_error": None, "error": f"Triage failed ({type(exc).__name__})."}


_prewarming: set[asyncio.Task[Any]] = set()


def prewarm(session: Session) -> None:
    """Start working out the triage view of a session that just ended (in a worker thread),
    so the panel the page fetches when it sees the end is ready sooner. Needs a running loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # rendered outside the server's loop: the page's fetch works it out
        return
    task = loop.create_task(view(session), name=f"triage-{session.id}")
    _prewarming.add(task)
    task.add_done_callback(_prewarming.discard)


async def view(session: Session, stored_meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The triage panel's data and the ``triage`` member of the session's JSON twin."""
    done = session.status.done
    panel_state = session.triage_state  # taken before the await: the state this view shows
    reveal = revealed(session)
    cache = _caches.setdefault(session, _Cache())
    # Everything the view depends on: a verdict can come without an event (an idle timeout),
    # and a live source grows.
    state = (session.generation, session.position, len(session.verdicts), session.source.size, f"{session.status.value}:{reveal}")
    if cache.state != state or cache.view is None:
        loop = asyncio.get_running_loop()
        stale = cache.running is None or cache.running.cancelled() or cache.running.get_loop() is not loop
        if stale or cache.running_state != state:  # a prewarm cancelled with its loop is worked out again
            cache.running_state = state
            cache.running = asyncio.ensure_future(_compute_safely(session, _results_for_view(session, done), done, reveal))
        running = cache.running
        try:
            computed = await asyncio.shield(running)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not running.cancelled() or (current is not None and current.cancelling()):
                raise  # this request was cancelled, not the shared work
            computed = await _compute_safely(session, _results_for_view(session, done), done, reveal)
        if cache.running is running:
            cache.running = None
        cache.state, cache.view = state, computed
    # Ended without a stream (an upstream HTTP error, a connect failure): say what happened
    # and offer nothing that would have no stream to work on.
    failure = session.error if done and session.error and not session.pipeline.streams else None
    shown = cache.view
    if session.mask_values and shown.get("naive_lane"):
        lane = [{**a, "arguments": hide_values(a["arguments"])} if a.get("arguments") is not None else a for a in shown["naive_lane"]]
        shown = {**shown, "naive_lane": lane}
    return session.scrubbed({
        "failure": failure,
        **shown,
        "ready": done,
        "state": panel_state,
        "status": session.status.value,
        "truncated": truncation(session, stream_ends(session), stored_meta),
        "reveal": {"allowed": reveal_allowed(session), "on": reveal},
        "provider_messages": provider_messages(session, reveal),
        "permalink": f"/sources/{stored}" if (stored := getattr(session.source, "stored_id", None)) else None,
        "exports": None if failure else {
            "reproducer": None if still_streaming(session) else f"/sessions/{session.id}/export.sse",
            "report": f"/sessions/{session.id}/export.report.json",
            "markdown": f"/sessions/{session.id}/export.md",
        },
    })

