"""Mirrored sessions: a stream latched in the agent's own process, shown live here.

``toollatch.latch(stream, dashboard="http://127.0.0.1:8765")`` (:mod:`toollatch.client.mirror`)
sends the redacted assembly events of its stream to

* ``POST /api/mirror`` — ``{"dialect", "tools": [names], "forward_progress"}`` → ``201
  {"id", "url"}``: a new live session;
* ``POST /api/mirror/{id}/events`` — ``{"dialect", "events": [...], "end": null |
  {"kind", "error"}}``: each event is an :class:`~toollatch.redaction.redact.AssemblyEvent`'s JSON
  (a :class:`~toollatch.redaction.redact.CallView`: name, id, state, counts, reason, transitions),
  with ``arguments`` only on a COMMITTED call, ``repaired`` and ``diagnosis`` on a verdict.

No argument text crosses before commit, as nowhere else: the documents have no field for
it, and ``arguments`` is refused on a call that is not COMMITTED. The routes sit behind the
app's ``Host`` and ``Origin`` checks (:mod:`toollatch.web.security`) like every other write. A
malformed document is answered 400 naming the event and the field, never a 500.

The session is a :class:`~toollatch.web.live.session.LiveSession` whose pipeline is a :class:`MirrorPipeline`:
the verdicts are the agent's own latch's, folded into the same cards, results and
WebSocket frames as a proxied stream's. There are no bytes: no recording, no triage of
the source. Stop cannot stop the agent: it says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from toollatch.core.calls import owed_results
from toollatch.core.model import CallKey, CallOutcome, CallState, CommittedCall, StreamResult, Transition
from toollatch.redaction.redact import AssemblyEvent, CallView

from toollatch.web.bodies import read_capped
from toollatch.web.live.session import LiveSession
from toollatch.web.live.source import LiveSource
from toollatch.web.live.store import LiveSessionStore
from toollatch.web.replay.session import Status

#: Largest request body accepted (committed arguments may be up to the latch's byte limit).
MAX_BODY = 8 * 1024 * 1024
#: Events accepted in one request at most.
MAX_EVENTS = 4096
_KINDS = frozenset({"stream_start", "call_opened", "identity", "fragment", "state", "stream_end", "quirk"})
_ENDS = frozenset({"complete", "truncated", "error", "cancelled"})


class MirrorError(ValueError):
    """A mirrored document cannot be used; the message names the event and the field."""


class MirrorStream:
    """One stream's calls as the agent's latch reported them (duck-types the parts of
    :class:`~toollatch.core.assembler.Assembler` a session reads)."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.calls: dict[CallKey, CallOutcome] = {}
        self._quirks: dict[str, int] = {}
        self.end: str | None = None
        self.end_detail: str | None = None
        self.provider_message: str | None = None  # a provider's free text never crosses a mirror

    @property
    def ended(self) -> bool:
        return self.end is not None

    @property
    def quirks(self) -> dict[str, int]:
        return dict(self._quirks)

    def outcome(self, key: CallKey) -> CallOutcome | None:
        return self.calls.get(key)

    def committed(self, key: CallKey) -> CommittedCall | None:
        call = self.calls.get(key)
        if call is None or call.state is not CallState.COMMITTED or call.call_id is None or call.name is None:
            return None
        return CommittedCall(key, call.call_id, call.name, call.arguments, call.executor)

    def result(self) -> StreamResult:
        calls = [self.calls[k] for k in sorted(self.calls)]
        done = {c.call_id for c in calls if c.call_id and c.executor == "client" and c.state is CallState.COMMITTED}
        return StreamResult(self.dialect, self.end, self.end_detail, calls, owed_results(calls, done), dict(self._quirks))  # type: ignore[arg-type]


class MirrorPipeline:
    """Stands in for a session's :class:`~toollatch.core.pipeline.Pipeline`: the assembly
    happened in the agent's process; :meth:`apply` takes its redacted events."""

    def __init__(self) -> None:
        self.dialect: str | None = None
        self._streams: list[MirrorStream] = []
        self.ended = False

    @property
    def streams(self) -> list[MirrorStream]:
        return list(self._streams)

    def results(self) -> list[StreamResult]:
        return [s.result() for s in self._streams]

    def committed(self, stream: int, key: CallKey) -> CommittedCall | None:
        return self._streams[stream].committed(key) if 0 <= stream < len(self._streams) else None

    def check_idle(self) -> list[AssemblyEvent]:
        return []  # applied by the agent's latch

    def cancel(self, detail: str = "user stop") -> list[AssemblyEvent]:
        return []  # the agent's stream is not stopped from here

    def close(self) -> list[AssemblyEvent]:
        return []

    def apply(self, doc: Any, where: str) -> AssemblyEvent:
        """One event document → the :class:`AssemblyEvent` it is, folded into the streams."""
        if not isinstance(doc, dict):
            raise MirrorError(f"{where}: expected an object")
        kind = doc.get("kind")
        if kind not in _KINDS:
            raise MirrorError(f"{where}: kind must be one of {', '.join(sorted(_KINDS))}")
        stream = _int(doc.get("stream"), f"{where}.stream")
        if stream > len(self._streams):
            raise MirrorError(f"{where}.stream: stream {stream} before stream {len(self._streams)}")
        if stream == len(self._streams):
            self._streams.append(MirrorStream(self.dialect or "unknown"))
        target = self._streams[stream]
        end = doc.get("end")
        if end is not None and end not in _ENDS:
            raise MirrorError(f"{where}.end: must be one of {', '.join(sorted(_ENDS))}")
        detail = _text(doc.get("detail"), f"{where}.detail")
        view = _view(doc["call"], f"{where}.call") if doc.get("call") is not None else None
        if "arguments" in doc and (view is None or view.state is not CallState.COMMITTED):
            raise MirrorError(f"{where}.arguments: only a COMMITTED call's arguments are taken")
        seq = _int(doc.get("seq", 0), f"{where}.seq")
        t = doc.get("t", 0.0)
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t):
            raise MirrorError(f"{where}.t: expected seconds")
        if view is not None:
            _fold(target, view, doc)
        elif kind == "quirk" and detail:
            target._quirks[detail] = target._quirks.get(detail, 0) + 1
        elif kind == "stream_end" and end is not None:
            target.end, target.end_detail = end, detail
        return AssemblyEvent(seq, float(t), kind, stream, view, end, detail)


def _fold(stream: MirrorStream, view: CallView, doc: dict[str, Any]) -> None:
    call = stream.calls.get(view.key)
    if call is None:
        call = stream.calls[view.key] = CallOutcome(view.key, None, None, view.state, None, 0, 0, view.executor)
    call.call_id, call.name, call.state, call.reason = view.call_id, view.name, view.state, view.reason
    call.bytes, call.fragments, call.executor = view.bytes, view.fragments, view.executor
    call.transitions = list(view.transitions)
    if view.state is CallState.COMMITTED and "arguments" in doc:
        call.arguments = doc["arguments"]
    if view.state.terminal:
        call.repaired = doc.get("repaired") is True
        diagnosis = doc.get("diagnosis")
        call.diagnosis = diagnosis if isinstance(diagnosis, dict) else None


def _int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**31:
        raise MirrorError(f"{where}: expected a whole number >= 0")
    return value


def _text(value: Any, where: str, limit: int = 2000) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise MirrorError(f"{where}: expected a string of at most {limit} characters")
    return value


def _view(doc: Any, where: str) -> CallView:
    if not isinstance(doc, dict):
        raise MirrorError(f"{where}: expected an object")
    key = doc.get("key")
    if not isinstance(key, list) or not key or len(key) > 8:
        raise MirrorError(f"{where}.key: expected a list of whole numbers")
    try:
        state = CallState(doc.get("state"))
    except ValueError:
        raise MirrorError(f"{where}.state: must be one of {', '.join(s.value for s in CallState)}") from None
    executor = doc.get("executor", "client")
    if executor not in ("client", "server"):
        raise MirrorError(f"{where}.executor: must be client or server")
    moves = doc.get("transitions") or []
    if not isinstance(moves, list) or len(moves) > 16:
        raise MirrorError(f"{where}.transitions: expected a list")
    transitions = []
    for i, move in enumerate(moves):
        try:
            transitions.append(Transition(CallState(move["state"]), float(move["t"])))
        except (TypeError, KeyError, ValueError):
            raise MirrorError(f"{where}.transitions[{i}]: expected {{state, t}}") from None
    return CallView(
        tuple(_int(k, f"{where}.key") for k in key),
        _text(doc.get("call_id"), f"{where}.call_id", 200),
        _text(doc.get("name"), f"{where}.name", 200),
        state,
        _text(doc.get("reason"), f"{where}.reason"),
        _int(doc.get("bytes", 0), f"{where}.bytes"),
        _int(doc.get("fragments", 0), f"{where}.fragments"),
        executor,
        tuple(transitions),
    )


class MirrorSource(LiveSource):
    """A mirrored stream's source: the tool names the agent registered, no bytes, no request."""

    kind = "live"
    mirrored = True

    def __init__(self, dialect: str | None, tools: list[str] | None) -> None:
        request = {"tools": [{"name": n} for n in tools]} if tools else None
        super().__init__("latch()", upstream="latch()", endpoint="in the agent's process", dialect=dialect, request=request)
        self.streaming = True
        self.title = "Live: latch() in an agent" + (f" · {dialect}" if dialect else "")
        self.description = (
            "A stream latched in the agent's own process (toollatch.latch with dashboard=), mirrored here: "
            "names, ids, states and byte counts; arguments once a call committed. The verdicts are the agent's."
        )


class MirrorSession(LiveSession):
    """A live session fed with the agent's redacted events instead of bytes."""

    def reset(self) -> None:
        super().reset()
        self.pipeline = MirrorPipeline()  # type: ignore[assignment]
        self.stream_starts: list[float] = []  # seconds since the first event at which each stream began

    def _watch_idle(self) -> None:
        """The agent's latch applies the idle timeout."""

    def cancel(self, detail: str = "user stop") -> None:
        self.set_notice("This stream runs in the agent's process: stop it there.")

    def take(self, docs: list[Any], dialect: str | None) -> None:
        """Fold a batch of event documents; MirrorError names the first bad one."""
        pipeline: MirrorPipeline = self.pipeline  # type: ignore[assignment]
        if dialect and pipeline.dialect is None:
            pipeline.dialect = self.live_source.dialect = str(dialect)[:40]
        events = [pipeline.apply(doc, f"events[{i}]") for i, doc in enumerate(docs)]  # all checked before any is shown
        for event in events:
            self.clocked(event.stream, event.t)
            self.live_source.count += 1
            self.position = self.live_source.count
            self.progressed()
            self._apply(event)

    def clocked(self, stream: int, t: float) -> None:
        """Keep an event's time on the agent's clock (seconds since its stream started) as
        seconds since the first event: the timing lens of a session without bytes
        (:mod:`toollatch.web.pages.timing`, ``basis: "assembly events"``), one entry of 8 bytes an event."""
        starts = self.stream_starts
        times = self.live_source.times
        while len(starts) <= stream:  # a later stream starts where the clock stands
            starts.append(times.duration_s if len(times) else 0.0)
        times.add(1, starts[stream] + t)

    def ended(self, end: Any) -> None:
        """The agent's turn ended: ``{"kind", "error"}``."""
        if not isinstance(end, dict):
            raise MirrorError("end: expected an object")
        kind, error = end.get("kind"), _text(end.get("error"), "end.error")
        if kind is not None and kind not in _ENDS:
            raise MirrorError(f"end.kind: must be one of {', '.join(sorted(_ENDS))}")
        if kind is None:
            self.failed(error or "No provider stream was recognised.")
        elif kind == "cancelled":
            self.end_kind = "cancelled"
            self.set_status(Status.CANCELLED)
        else:
            self._end(kind)


def build_router(store: LiveSessionStore) -> APIRouter:
    """``POST /api/mirror`` and ``POST /api/mirror/{sid}/events``."""
    router = APIRouter()

    async def body(request: Request) -> Any:
        raw = await read_capped(request, MAX_BODY)
        if raw is None:
            raise MirrorError(f"body over {MAX_BODY} bytes")
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise MirrorError("body is not JSON") from None

    def refused(exc: MirrorError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @router.post("/api/mirror")
    async def create(request: Request) -> JSONResponse:
        try:
            doc = await body(request)
            if not isinstance(doc, dict):
                raise MirrorError("expected an object")
            tools = doc.get("tools")
            if tools is not None and (not isinstance(tools, list) or len(tools) > 512 or not all(isinstance(t, str) and 0 < len(t) <= 200 for t in tools)):
                raise MirrorError("tools: expected a list of tool names")
            dialect = _text(doc.get("dialect"), "dialect", 40)
        except MirrorError as exc:
            return refused(exc)
        source = MirrorSource(dialect, tools)
        session = store.create_live(source, session_class=MirrorSession)
        if doc.get("forward_progress") is False and session.config.ui_forward_partial_args:
            session.config = replace(session.config, ui_forward_partial_args=False)  # as the agent withholds them
        store.flush(session)
        return JSONResponse({"id": session.id, "url": f"/sessions/{session.id}"}, status_code=201)

    @router.post("/api/mirror/{sid}/events")
    async def events(sid: str, request: Request) -> JSONResponse:
        session = store.get(sid)
        if not isinstance(session, MirrorSession):
            return JSONResponse({"detail": f"no mirrored session {sid!r}"}, status_code=404)
        try:
            doc = await body(request)
            if not isinstance(doc, dict) or not isinstance(doc.get("events", []), list):
                raise MirrorError("expected an object with an events list")
            docs = doc.get("events", [])
            if len(docs) > MAX_EVENTS:
                raise MirrorError(f"events: at most {MAX_EVENTS} in one request")
            if session.status.done:
                raise MirrorError("the session has ended")
            session.take(docs, _text(doc.get("dialect"), "dialect", 40))
            if doc.get("end") is not None:
                session.ended(doc["end"])
        except MirrorError as exc:
            return refused(exc)
        if session.status.done:
            await store.finished(session, [])
        else:
            store.flush(session)
        return JSONResponse({"taken": len(docs)})

    return router
