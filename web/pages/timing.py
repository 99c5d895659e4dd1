"""The timing lens of a session (its ``timing`` document and page panel) and a recording's HAR download.

:func:`session_timing` computes :func:`toollatch.observe.timing.timing_lens` for any session, off
the event loop (a thread: the timed pass assembles the stream once more), and keeps it
once the session's stream is complete. A live session's times are those its chunks
arrived at the proxy (or the direct connection); a replayed recording's or HAR upload's,
the times it was recorded with; a mirrored session (``latch(..., dashboard=)``), which
carries no bytes across the redaction boundary, its assembly events' times on the agent's
clock (``basis: "assembly events"``). A source without times (a plain ``.sse`` upload, a
demo) says so instead of inventing them.

:func:`recording_har` is a recording's download as a HAR 1.2 file with each chunk's
arrival time in ``response.content._chunks`` (:mod:`toollatch.wire.har`): the bytes as received
when every call committed, else the redacted reproducer with the same chunk times (chunk
ends scaled to its length). No header is ever written.
"""

from __future__ import annotations

import asyncio
from typing import Any

from toollatch.wire.har import write_har
from toollatch.core.model import CallState
from toollatch.observe.timing import ChunkTimes, TimedPass, timed_pass, timing_lens

from toollatch.web.live.session import LiveSession
from toollatch.web.replay.session import Session
from toollatch.web.store import StoredSource


def _inputs(session: Session) -> tuple[ChunkTimes | None, bytes, str | None]:
    """``(times, body, why none)`` of a session's stream."""
    if isinstance(session, LiveSession):
        src = session.live_source
        if src.mirrored and not len(src.times):
            return None, b"", "no assembly event has arrived from the agent yet"
        if not len(src.times):
            return None, b"", "no byte has arrived yet"
        times = ChunkTimes(src.times.ends[:], src.times.times[:], src.times.first_byte_s)  # a copy: the stream may go on
        return times, src.stream_data if session.status.done else b"", None
    times = getattr(session.source, "times", None)
    if times is None:
        return None, b"", "this source holds no chunk arrival times (a plain capture or upload): none are invented"
    return times, session.source.data, None


def compute_timing(session: Session, times: ChunkTimes | None, body: bytes, why: str | None) -> dict[str, Any]:
    """The timing document (blocking: a timed pass over ``body`` when given)."""
    if times is None:
        return timing_lens(None, why=why)
    found: TimedPass | None = None
    if isinstance(session, LiveSession) and session.live_source.mirrored:
        return _mirrored(session, times)
    if body:
        registry = session.source.registry() if hasattr(session.source, "registry") else None
        found = timed_pass(times.split(body), session.source.name, config=session.config, registry=registry, calls_followed=session.calls_followed)
    doc = timing_lens(times, found, idle_timeout_s=session.config.assemble_idle_timeout_s)
    if not session.status.done and isinstance(session, LiveSession):
        doc["calls_timed"] = False  # the stream is still arriving: calls are timed once it ends
    return doc


def _mirrored(session: LiveSession, times: ChunkTimes) -> dict[str, Any]:
    """A mirrored session's lens: no bytes cross, so its times are its assembly events' on
    the agent's clock (``basis: "assembly events"``; ``chunks`` counts events, no ``bytes``)."""
    starts: list[float] = getattr(session, "stream_starts", [])
    found = TimedPass()
    opens, commits = [], []
    for i, result in enumerate(session.pipeline.results()):
        t0 = starts[i] if i < len(starts) else 0.0
        for call in result.calls:
            if call.transitions:
                first, last = call.transitions[0].t + t0, call.transitions[-1].t + t0
                opens.append(first)
                found.open_spans.append((first, last))
            commit = next((m.t for m in call.transitions if m.state is CallState.COMMITTED), None)
            if commit is not None:
                commits.append((commit + t0, call.call_id, call.name))
    found.first_call_s = min(opens) if opens else None
    found.commits = [{"call_id": c, "name": n, "t": round(t, 4)} for t, c, n in sorted(commits, key=lambda x: x[0])]
    doc = timing_lens(times, found, idle_timeout_s=session.config.assemble_idle_timeout_s)
    doc.update(basis="assembly events", bytes=None, first_byte_s=None)
    return doc


async def session_timing(session: Session) -> dict[str, Any]:
    """The session's ``timing`` document, computed in a thread; cached once final."""
    cached = getattr(session, "_timing_doc", None)
    if cached is not None:
        return cached
    running: asyncio.Future[dict[str, Any]] | None = getattr(session, "_timing_run", None)
    if running is not None and not running.done():  # one computation at a time: the others wait for it
        return await asyncio.shield(running)
    final = not isinstance(session, LiveSession) or session.status.done
    times, body, why = _inputs(session)
    run = asyncio.ensure_future(asyncio.to_thread(compute_timing, session, times, body, why))
    session._timing_run = run  # type: ignore[attr-defined]
    doc = await asyncio.shield(run)
    session.timing_doc = doc
    if final:
        session._timing_doc = doc  # type: ignore[attr-defined]
    return doc


def recording_har(stored: StoredSource, body: bytes, media: str, times: ChunkTimes | None) -> bytes:
    """The HAR 1.2 download of a recording whose served bytes are ``body`` (as received or
    the redacted reproducer), with ``times`` fitted to them in ``_chunks``."""
    meta = stored.meta
    url = f"http://toollatch.invalid/proxy/{meta.get('upstream') or 'upstream'}{meta.get('endpoint') or '/'}"
    status = meta.get("http_status") if isinstance(meta.get("http_status"), int) else 200
    comment = None if meta.get("download") == "as_received" else "redacted reproducer: argument strings and text masked, chunk times kept"
    request = meta.get("request")
    if isinstance(request, dict):  # what a replay needs (its tools), never the conversation
        request = {k: request[k] for k in ("model", "stream", "tools") if k in request}
    return write_har(
        body,
        times.fit(len(body)) if times is not None else None,
        url=url,
        status=status,
        mime=media,
        request=request,
        started=meta.get("started") if isinstance(meta.get("started"), (int, float)) else stored.created,
        comment=comment,
    )
