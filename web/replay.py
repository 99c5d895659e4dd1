"""Session store, replay runner and WebSocket fan-out.

Each playing session has one asyncio task (:meth:`SessionStore._run`) that feeds provider
events at the session's rate, then renders what changed *once* and puts the resulting
HTML message on every subscriber's queue. Several browsers can watch one session; a
subscriber that connects late first receives the whole current state.

Pacing: at ``rate`` events/second the runner ticks every ``1 / rate`` seconds, feeding one
event per tick; above :data:`MAX_TICKS_PER_SECOND` it ticks at that frequency and feeds
``rate / MAX_TICKS_PER_SECOND`` events per tick (changed cards still render once per tick).
``sleep`` is injectable so tests run without waiting.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable

from .render import Renderer
from .session import Changes, Session, Status
from .settings import RATES, Settings
from .sources import LoadedSource

log = logging.getLogger("toollatch.web")

Sleep = Callable[[float], Awaitable[None]]
MAX_TICKS_PER_SECOND = 30.0
MIN_RATE, MAX_RATE = 0.1, 100_000.0
#: A subscriber this many messages behind gets the full state instead of the backlog.
MAX_BACKLOG = 256


def pace(rate: float) -> tuple[float, int]:
    """``(seconds between ticks, events per tick)`` for ``rate`` events/second."""
    if rate <= MAX_TICKS_PER_SECOND:
        return 1.0 / rate, 1
    return 1.0 / MAX_TICKS_PER_SECOND, max(1, round(rate / MAX_TICKS_PER_SECOND))


def clamp_rate(rate: float) -> float:
    return min(MAX_RATE, max(MIN_RATE, rate))


class SessionStore:
    """All sessions of the running app, their replay tasks and their subscribers."""

    def __init__(self, settings: Settings, renderer: Renderer, sleep: Sleep = asyncio.sleep) -> None:
        self.settings = settings
        self.renderer = renderer
        self._sleep = sleep
        self._sessions: dict[str, Session] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._subscribers: dict[str, set[asyncio.Queue[str]]] = {}

    # ------------------------------------------------------------------ sessions

    def create(self, source: LoadedSource, *, rate: float | None = None, autoplay: bool = True) -> Session:
        """A new session for ``source``; starts playing at once when ``autoplay``."""
        self._evict()
        sid = secrets.token_hex(4)
        while sid in self._sessions:
            sid = secrets.token_hex(4)
        session = Session(sid, source, self.settings.config, clamp_rate(rate or self.settings.replay_rate))
        self._sessions[sid] = session
        log.info("session %s: created from %s %s", sid, source.kind, source.name)
        if autoplay:
            self.play(session)
        return session

    def get(self, sid: str) -> Session | None:
        return self._sessions.get(sid)

    def all(self) -> list[Session]:
        """Sessions, newest first."""
        return list(reversed(self._sessions.values()))

    def _evict(self) -> None:
        """Drop the oldest idle sessions beyond ``max_sessions``."""
        for sid in list(self._sessions):
            if len(self._sessions) < self.settings.max_sessions:
                return
            if sid not in self._tasks and not self._subscribers.get(sid):
                del self._sessions[sid]

    # ------------------------------------------------------------------ controls

    def play(self, session: Session) -> None:
        if session.status.done or session.status is Status.PLAYING:
            return
        session.set_status(Status.PLAYING)
        self._start(session)
        self.flush(session)

    def pause(self, session: Session) -> None:
        if session.status is Status.PLAYING:
            session.set_status(Status.PAUSED)
            self.flush(session)

    def step(self, session: Session, count: int = 1) -> None:
        """Feed ``count`` events by hand (pauses a playing replay)."""
        if session.status is Status.PLAYING:
            session.set_status(Status.PAUSED)
        elif session.status is Status.READY:
            session.set_status(Status.PAUSED)
        session.step(count)
        self.flush(session)

    def cancel(self, session: Session) -> None:
        session.cancel("user stop")
        self.flush(session)

    def restart(self, session: Session) -> None:
        task = self._tasks.pop(session.id, None)
        if task is not None:
            task.cancel()
        session.reset()
        session.set_status(Status.READY)
        self.play(session)

    def set_rate(self, session: Session, rate: float) -> None:
        rate = clamp_rate(rate)
        if rate != session.rate:
            session.rate = rate
            session.pending.status = session.pending.controls = True
            self.flush(session)

    # ------------------------------------------------------------------ runner

    def _start(self, session: Session) -> None:
        if session.id in self._tasks:
            return
        task = asyncio.get_running_loop().create_task(self._run(session, session.generation), name=f"replay-{session.id}")
        self._tasks[session.id] = task
        task.add_done_callback(lambda t, sid=session.id: self._tasks.pop(sid, None) if self._tasks.get(sid) is t else None)

    async def _run(self, session: Session, generation: int) -> None:
        while session.status is Status.PLAYING and session.generation == generation:
            interval, batch = pace(session.rate)
            session.step(batch)
            self.flush(session)
            if session.status is not Status.PLAYING:
                break
            await self._sleep(interval)

    async def shutdown(self) -> None:
        """Cancel every replay task (app shutdown)."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ fan-out

    def subscribe(self, session: Session) -> asyncio.Queue[str]:
        """A queue of HTML messages for one WebSocket; the first is the full current state."""
        queue: asyncio.Queue[str] = asyncio.Queue()
        queue.put_nowait(self.renderer.full_update(session))
        self._subscribers.setdefault(session.id, set()).add(queue)
        return queue

    def unsubscribe(self, session: Session, queue: asyncio.Queue[str]) -> None:
        self._subscribers.get(session.id, set()).discard(queue)

    def watchers(self, session: Session) -> int:
        return len(self._subscribers.get(session.id, ()))

    def flush(self, session: Session) -> None:
        """Render the changes accumulated in ``session`` once and queue them for every subscriber."""
        changes: Changes = session.take_changes()
        queues = self._subscribers.get(session.id)
        if not changes.any() or not queues:
            return
        message = self.renderer.update(session, changes)
        for queue in queues:
            if queue.qsize() >= MAX_BACKLOG:
                # A stalled viewer: drop its backlog, send the current state instead.
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait(self.renderer.full_update(session))
            else:
                queue.put_nowait(message)
