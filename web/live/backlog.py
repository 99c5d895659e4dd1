"""Provider events of a live stream decoded but not yet assembled, assembled in parts.

One provider event can carry any number of tool calls (an OpenAI Chat chunk with 100,000
``tool_calls`` entries is one event): assembled at once, it would hold the event loop for
seconds. A :class:`Backlog` holds a live session's decoded events; :meth:`Backlog.work`
assembles them about ``step`` ops at a time (an event of many calls is split between its
ops: :meth:`~toollatch.core.pipeline.Pipeline.ops_of`, the same result as feeding it whole),
so the proxy's tee yields to the event loop between two parts
(:mod:`toollatch.web.live.tee`).

An event whose payload is too large to parse on the event loop
(:data:`~toollatch.core.large.LARGE_PAYLOAD_CHARS`: the session's decoder leaves it
unparsed) waits at the head of the backlog until :meth:`Backlog.read_large` has read it in
a worker thread (:func:`~toollatch.core.large.read_large_event`: parsed and turned into
ops). An input's calls past the first :data:`~toollatch.core.large.CALLS_FOLLOWED`
are left out (:class:`~toollatch.core.large.CappedPipeline`), named by count in the
session's notice and in ``untold_calls``.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from toollatch.core.large import LargeEvent, reader
from toollatch.redaction.redact import AssemblyEvent
from toollatch.wire.capture import UNPARSED, ProviderEvent

from toollatch.web.replay.held import OPS_STEP, OpsLeft, note_untold

if TYPE_CHECKING:
    from toollatch.web.live.session import LiveSession

class Backlog:
    """The events a live session decoded and has not assembled yet, in order."""

    def __init__(self) -> None:
        self._events: deque[ProviderEvent] = deque()
        self._left = OpsLeft()  # what is left of the event being assembled in parts
        self._reading: asyncio.Future[LargeEvent] | None = None  # the head event, read in a thread

    def __bool__(self) -> bool:
        return bool(self._events) or bool(self._left)

    def extend(self, events: Iterable[ProviderEvent]) -> None:
        self._events.extend(events)

    def clear(self) -> None:
        self._events.clear()
        self._left.hold([])

    def waiting(self, session: LiveSession) -> bool:
        """The next event to assemble is a large one, to be read by :meth:`read_large` first."""
        return not self._left and bool(self._events) and self._events[0].data is UNPARSED

    async def read_large(self, session: LiveSession) -> None:
        """Read the large event at the head of the backlog in a worker thread (one read at a
        time: a second caller awaits the same read), then hold its ops for :meth:`work`.
        The session's pipeline is not fed meanwhile: :meth:`work` stops at that event."""
        if not self.waiting(session):
            return
        event = self._events[0]
        if self._reading is None:
            self._reading = asyncio.ensure_future(asyncio.to_thread(reader(session.pipeline, event)))
        reading = self._reading
        try:
            read = await asyncio.shield(reading)
        finally:
            if reading.done() and self._reading is reading:
                self._reading = None
        if self._events and self._events[0] is event and not session.status.done:
            self._events.popleft()
            self._take(session, read)

    def _take(self, session: LiveSession, read: LargeEvent) -> None:
        """Count the large event just read and apply it: its ops are held, to be applied
        in parts by :meth:`work` (an event to feed as it is is fed now)."""
        session.live_source.count += 1
        session.position = session.live_source.count
        pipeline = session.pipeline
        if read.ops is not None:  # its ops wait in parts; what the pipeline does with the read, without them
            read = self._left.hold_read(read)
        session._guard(lambda: pipeline.take(read))

    def work(self, session: LiveSession, step: int | None = None) -> bool:
        """Assemble held events into ``session``: all of them (``step`` None), or about
        ``step`` ops. Returns True when some are left. Once the session is over (an
        assembler fault, a stop), what is held is dropped, as bytes arriving then are.
        A fault of the adapter or the assembler ends the session as
        :meth:`~toollatch.web.replay.session.Session._guard` ends it (status ERROR)."""
        done = 0
        while self and (step is None or done < step):
            if session.status.done:
                self.clear()
                return False
            if self._left:
                part = self._left.part(None if step is None else step - done)
                session._guard(lambda: session.pipeline.apply_ops(part))
                done += len(part)
                continue
            if self._events[0].data is UNPARSED:  # a large event: read off the loop (read_large)
                if step is not None or self._reading is not None:
                    break  # a caller that may not wait here, or a read in a thread meanwhile: left for read_large
                head = self._events.popleft()  # read where it is (CappedPipeline.feed), applied at once
                session.live_source.count += 1
                session.position = session.live_source.count
                session._guard(lambda: session.pipeline.feed(head))
                continue
            done += self._events_run(session, step, done)
        session._take_progress()  # the calls' counts, once per call for this piece of work
        if getattr(session.pipeline, "untold", 0) != session.live_source.untold_calls:
            session.live_source.untold_calls = note_untold(session)
        return bool(self)

    def _events_run(self, session: LiveSession, step: int | None, done: int) -> int:
        """Assemble held events one after another until the step is full (``done`` ops of
        it taken already), an event's ops are more than the step has room for (held in
        parts), the next event is one for :meth:`read_large`, no event is left, or the
        session is over; returns the ops taken.
        One event at a time, each folded into the session as it is assembled."""
        events, pipeline, source = self._events, session.pipeline, session.live_source
        apply = session._apply
        room = math.inf if step is None else step - done
        taken = 0
        while events and taken < room:
            if events[0].data is UNPARSED:
                break  # a large event, read off the loop: work's own path
            event = events.popleft()
            source.count += 1
            session.position = source.count
            try:
                ops = pipeline.ops_of(event) if step is not None else None  # without the ops of calls left out (CappedPipeline.ops_of)
                if ops is None:
                    out = pipeline.feed(event)
                    taken += 1
                elif len(ops) > room - taken:
                    self._left.hold(ops)  # more than this step holds: applied in parts
                    return taken
                else:  # the common event, a few ops: applied at once (no copy of its ops held)
                    out = pipeline.apply_ops(ops) if ops else []
                    taken += len(ops) or 1
            except Exception as exc:  # the session's own handling, as for any assembler fault
                session._guard(_raiser(exc))
                return taken
            for assembly_event in out:
                apply(assembly_event)
            if session.status.done:
                break
        return taken


def _raiser(exc: Exception) -> Callable[[], list[AssemblyEvent]]:
    """An action that raises ``exc``: given to the session's guard, which words the fault."""

    def action() -> list[AssemblyEvent]:
        raise exc

    return action
