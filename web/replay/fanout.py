"""Live-update fan-out: at most N renders per second per session, bounded per-viewer queues.

Two rules keep the dashboard fast under load without losing what matters:

* **Coalescing.** :class:`Broadcaster` renders a session's accumulated
  :class:`~toollatch.web.replay.session.Changes` at most ``max_renders_per_second`` times a second. A render
  that comes too soon is deferred to a trailing render at the end of the interval, which
  picks up everything that changed meanwhile, so the final state is always delivered.
  Coalescing never loses a transition or a verdict: verdicts are appended to the log in
  order, and each card's timeline lists every state it went through.
* **Slow viewers never stall the replay.** Each WebSocket has a :class:`Viewer`: a bounded
  queue filled synchronously by the render and drained by that socket's own task. When it
  is full, queued *progress-only* frames (byte/fragment counts, the event counter) are
  dropped first and what they covered is folded into the newest frame, re-rendered at the
  current state, so bars still only grow. If every queued frame is essential (a state
  transition or verdict), the queue is replaced by one full-state frame (a resync).

Time comes from an injectable ``clock`` and ``sleep``, so tests drive it without waiting.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from toollatch.web.triage import diagnosis as triage
from toollatch.web.pages.render import Renderer
from toollatch.web.replay.session import Changes, Session

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
#: Slack when comparing clock readings: a tick exactly one interval later is on time.
_EPSILON = 1e-6


@dataclass(frozen=True)
class Frame:
    """One WebSocket message: rendered HTML and the changes it covers."""

    html: str
    changes: Changes
    essential: bool


class Viewer:
    """The bounded outgoing queue of one WebSocket.

    ``rerender(changes)`` renders ``changes`` at the session's *current* state;
    ``full()`` renders the whole current state. Both are called only from :meth:`offer`,
    i.e. right after a render, when the current state is the newest frame's state.
    """

    def __init__(self, capacity: int, rerender: Callable[[Changes], str], full: Callable[[], str], number: int = 0) -> None:
        self.number = number  # 1, 2, … in order of connection to the session
        self.capacity = max(2, capacity)
        self._rerender = rerender
        self._full = full
        self._frames: deque[Frame] = deque()
        self._ready = asyncio.Event()
        self.offered = 0
        self.sent = 0
        self.dropped = 0
        self.resyncs = 0
        self.peak = 0
        self.bytes_sent = 0

    def __len__(self) -> int:
        return len(self._frames)

    def offer(self, frame: Frame) -> None:
        """Queue ``frame``; never blocks. On overflow drop progress first, else resync."""
        self.offered += 1
        if len(self._frames) >= self.capacity:
            frame = self._make_room(frame)
        self._frames.append(frame)
        self.peak = max(self.peak, len(self._frames))
        self._ready.set()

    def _make_room(self, frame: Frame) -> Frame:
        kept: deque[Frame] = deque()
        carried: Changes | None = None
        for queued in self._frames:
            if queued.essential:
                kept.append(queued)
            else:
                carried = queued.changes if carried is None else carried.merge(queued.changes)
                self.dropped += 1
        if carried is not None:
            # The dropped frames' regions are re-rendered now, in the newest frame: they
            # show the current state, never an older one, so nothing moves backwards.
            merged = carried.merge(frame.changes)
            frame = Frame(self._rerender(merged), merged, frame.essential)
        if len(kept) >= self.capacity:
            self.dropped += len(kept)
            self.resyncs += 1
            kept.clear()
            frame = Frame(self._full(), Changes.everything(), True)
        self._frames = kept
        return frame

    async def get(self) -> str:
        """The next message to send (waits while the queue is empty)."""
        while not self._frames:
            self._ready.clear()
            await self._ready.wait()
        html = self._frames.popleft().html
        self.sent += 1
        self.bytes_sent += len(html)
        return html

    def stats(self) -> dict[str, int]:
        """Counters: frames offered, sent (and their characters), dropped, resyncs, queued."""
        return {
            "viewer": self.number,
            "offered": self.offered,
            "sent": self.sent,
            "sent_chars": self.bytes_sent,
            "dropped": self.dropped,
            "resyncs": self.resyncs,
            "queued": len(self._frames),
            "peak_queued": self.peak,
        }


class Broadcaster:
    """Renders one session's changes, at most ``max_per_second`` times a second, to its viewers."""

    def __init__(self, session: Session, renderer: Renderer, *, max_per_second: float, capacity: int, clock: Clock, sleep: Sleep) -> None:
        self.session = session
        self.renderer = renderer
        self.interval = 1.0 / max_per_second if max_per_second > 0 else 0.0
        self.capacity = capacity
        self._clock = clock
        self._sleep = sleep
        self._last = -math.inf
        self._trailing: asyncio.Task[None] | None = None
        self.viewers: set[Viewer] = set()
        self.connected = 0  # viewers ever subscribed, to number them
        self.renders = 0
        self.render_times: deque[float] = deque(maxlen=64)  # clock readings of recent renders

    # ------------------------------------------------------------------ viewers

    def subscribe(self) -> Viewer:
        """A new viewer whose first frame is the whole current state. Cards, verdicts or owed
        results that appeared before it and are not rendered yet are in that state already:
        the next render redoes those lists for every viewer instead of appending them
        (twice, for this one)."""
        pending = self.session.pending
        if pending.added or pending.verdicts or pending.results_added:
            self.session.pending = pending.merge(Changes(layout=True, results=True, reset=True))
        self.connected += 1
        viewer = Viewer(
            self.capacity,
            rerender=lambda changes: self.renderer.update(self.session, changes),
            full=lambda: self.renderer.full_update(self.session),
            number=self.connected,
        )
        viewer.offer(Frame(self.renderer.full_update(self.session), Changes.everything(), True))
        self.viewers.add(viewer)
        return viewer

    def unsubscribe(self, viewer: Viewer) -> None:
        self.viewers.discard(viewer)

    # ------------------------------------------------------------------ rendering

    def request(self) -> None:
        """Render now if the last render is at least one interval old, else schedule a
        trailing render for when it is (a pending one already covers this request)."""
        if self.session.seek_target is not None or self._trailing is not None:
            return
        wait = self._last + self.interval - self._clock()
        if wait <= _EPSILON:
            self._render()
        else:
            self._trailing = asyncio.get_running_loop().create_task(self._later(wait), name=f"render-{self.session.id}")

    async def _later(self, wait: float) -> None:
        try:
            await self._sleep(wait)
        finally:
            if self._trailing is asyncio.current_task():
                self._trailing = None
        if self.session.seek_target is None:
            self._render()

    def _render(self) -> None:
        changes = self.session.take_changes()
        if not changes.any() or not self.viewers:
            return  # a viewer that connects later starts from the full state
        if changes.status and self.session.status.done:
            triage.prewarm(self.session)  # the page fetches the panel as soon as this frame arrives
        now = self._clock()
        self._last = now
        self.renders += 1
        self.render_times.append(now)
        frame = Frame(self.renderer.update(self.session, changes), changes, changes.essential)
        for viewer in self.viewers:
            viewer.offer(frame)

    @property
    def idle(self) -> bool:
        """True when no trailing render is pending."""
        return self._trailing is None

    def close(self) -> None:
        """Cancel a pending trailing render (session dropped or app shutting down)."""
        if self._trailing is not None:
            self._trailing.cancel()
            self._trailing = None

    def stats(self) -> dict[str, Any]:
        return {
            "renders": self.renders,
            "max_renders_per_second": round(1.0 / self.interval, 3) if self.interval else None,
            "viewers": [v.stats() for v in sorted(self.viewers, key=lambda v: v.number)],
        }
