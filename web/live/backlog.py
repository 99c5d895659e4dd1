"""Provider events of a live stream decoded but not yet assembled, assembled in parts.

One provider event can carry any number of tool calls (an OpenAI Chat chunk with 100,000
``tool_calls`` entries is one event): assembled at once, it would hold the event loop for
seconds. A :class:`Backlog` holds a live session's decoded events; :meth:`Backlog.work`
assembles them about ``step`` ops at a time (an event of many calls is split between its
ops: :meth:`~toollatch.core.pipeline.Pipeline.ops_of`, the same result as feeding it whole),
so the proxy's tee yields to the event loop between two parts
(:mod:`toollatch.web.live.tee`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

from toollatch.core.model import Op
from toollatch.wire.capture import ProviderEvent

if TYPE_CHECKING:
    from toollatch.web.live.session import LiveSession

#: Ops (about one call's worth of work each) assembled per step before the caller may yield.
OPS_STEP = 256


class Backlog:
    """The events a live session decoded and has not assembled yet, in order."""

    def __init__(self) -> None:
        self._events: deque[ProviderEvent] = deque()
        self._ops: list[Op] = []  # what is left of the event being assembled in parts
        self._at = 0

    def __bool__(self) -> bool:
        return bool(self._events) or self._at < len(self._ops)

    def extend(self, events: Iterable[ProviderEvent]) -> None:
        self._events.extend(events)

    def clear(self) -> None:
        self._events.clear()
        self._ops, self._at = [], 0

    def work(self, session: LiveSession, step: int | None = None) -> bool:
        """Assemble held events into ``session``: all of them (``step`` None), or about
        ``step`` ops. Returns True when some are left. Once the session is over (an
        assembler fault, a stop), what is held is dropped, as bytes arriving then are."""
        done = 0
        while self and (step is None or done < step):
            if session.status.done:
                self.clear()
                return False
            if self._at < len(self._ops):
                end = len(self._ops) if step is None else min(len(self._ops), self._at + step - done)
                part = self._ops[self._at : end]
                self._at = end
                if self._at >= len(self._ops):
                    self._ops, self._at = [], 0
                session._guard(lambda: session.pipeline.apply_ops(part))
                done += len(part)
                continue
            event = self._events.popleft()
            session.live_source.count += 1
            session.position = session.live_source.count
            found: list[list[Op] | None] = []
            if step is not None:  # an adapter fault ends the session like any assembler fault
                session._guard(lambda: found.append(session.pipeline.ops_of(event)) or [])
                if session.status.done:
                    continue
            ops = found[0] if found else None
            if ops is None:
                session._guard(lambda: session.pipeline.feed(event))
                done += 1
            elif step is not None and len(ops) > step - done:
                self._ops, self._at = ops, 0  # more than this step holds: applied in parts
                done += not ops  # an event without ops still counts as work
            else:  # the common event, a few ops: applied at once (no copy of its ops held)
                if ops:
                    session._guard(lambda: session.pipeline.apply_ops(ops))
                done += len(ops) or 1
        session._take_progress()  # the calls' counts, once per call for this piece of work
        return bool(self)
