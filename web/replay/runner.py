"""Session store: replay runner, controls (play, pause, step, back, seek, speed) and fan-out.

Each playing session has one asyncio task (:meth:`SessionStore._run`) that feeds provider
events at the session's pace and then asks the session's
:class:`~toollatch.web.replay.fanout.Broadcaster` for a render; the broadcaster coalesces those requests
to at most ``Settings.max_renders_per_second`` and queues the HTML for every viewer
without ever waiting for one.

Pacing: the effective rate is ``rate × speed`` events/second. Up to
:data:`MAX_TICKS_PER_SECOND` the runner ticks every ``1 / rate`` seconds with one event;
above, it ticks at that frequency with ``rate / MAX_TICKS_PER_SECOND`` events per tick
(the fraction carried over). At full speed ("max") it feeds :data:`FULL_SPEED_BATCH`
events, yields to the event loop, and repeats, so sockets and requests stay served. Every
step also stops after a slice of input (:func:`~toollatch.web.triage.sources.iter_sliced`), so an input that
is mostly not events (megabytes of blank lines before one) is read in bounded pieces too.

Seeking rebuilds the state: back to before the first event, then replay to the target
(the pipeline is deterministic and its clock virtual, so the result is exact). Seeks that
feed up to :data:`SYNC_SEEK_EVENTS` events run inline; longer ones run as a task that
yields every :data:`SEEK_CHUNK` events, with renders held back until it is done.

A source with chunk times (a recording, a HAR with ``_chunks``) replays at its *recorded
pace* by default (:attr:`~toollatch.web.replay.session.Session.recorded_pace`): each event when its
recorded time comes, divided by the speed, the pipeline's virtual clock on recorded
time; setting a rate leaves it, :meth:`SessionStore.set_pace` goes back.

``sleep`` and ``clock`` are injectable so tests run without waiting.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from toollatch.observe.metrics import Metrics
from toollatch.observe.timing import event_times

from toollatch.web.replay.held import read_held
from toollatch.web.replay.fanout import Broadcaster, Clock, Sleep, Viewer
from toollatch.web.pages.render import Renderer
from toollatch.web.replay.session import Session, Status
from toollatch.web.settings import Settings
from toollatch.web.triage.sources import LoadedSource

log = logging.getLogger("toollatch.web")

MAX_TICKS_PER_SECOND = 20.0
FULL_SPEED_BATCH = 512
SYNC_SEEK_EVENTS = 5_000
SEEK_CHUNK = 2_000
MIN_RATE, MAX_RATE = 0.1, 100_000.0


def pace(rate: float) -> float:
    """Seconds between ticks at ``rate`` events/second (never more than 20 ticks a second)."""
    return 1.0 / rate if rate <= MAX_TICKS_PER_SECOND else 1.0 / MAX_TICKS_PER_SECOND


def clamp_rate(rate: float) -> float:
    return min(MAX_RATE, max(MIN_RATE, rate))


class SessionStore:
    """All sessions of the running app, their replay and seek tasks, and their viewers."""

    def __init__(self, settings: Settings, renderer: Renderer, sleep: Sleep = asyncio.sleep, clock: Clock = time.monotonic) -> None:
        self.settings = settings
        self.renderer = renderer
        #: assembly metrics of every session's first pass, served at /metrics
        self.metrics = Metrics(tool_name_label=settings.config.metrics_tool_name_label)
        self._sleep = sleep
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._hubs: dict[str, Broadcaster] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._seeks: dict[str, asyncio.Task[None]] = {}

    # ------------------------------------------------------------------ sessions

    def create(self, source: LoadedSource, *, rate: float | None = None, speed: float = 1.0, autoplay: bool = True) -> Session:
        """A new session for ``source``; starts playing at once when ``autoplay``."""
        sid = self._new_id()
        session = Session(sid, source, self.settings.config, clamp_rate(rate or self.settings.replay_rate), speed, self.metrics)
        session.recorded_pace = session.recorded_pace and rate is None  # an explicit rate wins over the recorded pace
        self._register(session)
        log.info("session %s: created from %s %s", sid, source.kind, source.name)
        if autoplay:
            self.play(session)
        return session

    def _new_id(self) -> str:
        """A fresh session id (room made first: the oldest finished sessions are evicted)."""
        self._evict()
        sid = secrets.token_hex(4)
        while sid in self._sessions:
            sid = secrets.token_hex(4)
        return sid

    def _register(self, session: Session) -> None:
        """Keep ``session`` and give it the broadcaster that fans its renders out to viewers."""
        self._sessions[session.id] = session
        self._hubs[session.id] = Broadcaster(
            session,
            self.renderer,
            max_per_second=self.settings.max_renders_per_second,
            capacity=self.settings.viewer_queue_frames,
            clock=self._clock,
            sleep=self._sleep,
        )

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
            if sid not in self._tasks and sid not in self._seeks and not self._hubs[sid].viewers:
                del self._sessions[sid]
                self._hubs.pop(sid).close()

    # ------------------------------------------------------------------ controls

    def play(self, session: Session) -> None:
        if session.status.done or session.status is Status.PLAYING or session.seek_target is not None:
            return
        session.set_status(Status.PLAYING)
        self._start(session)
        self.flush(session)

    def pause(self, session: Session) -> None:
        if session.status is Status.PLAYING:
            self._stop_runner(session)
            session.set_status(Status.PAUSED)
            self.flush(session)

    def toggle(self, session: Session) -> None:
        """Play when paused or ready, pause when playing (the space bar)."""
        if session.status is Status.PLAYING:
            self.pause(session)
        else:
            self.play(session)

    def step(self, session: Session, count: int = 1) -> None:
        """Feed ``count`` events by hand (pauses a playing replay)."""
        if session.seek_target is not None:
            return
        self._stop_runner(session)
        if session.status in (Status.PLAYING, Status.READY):
            session.set_status(Status.PAUSED)
        target = session.position + count
        session.step(count, sliced=True)
        if session.position < target and not session.status.done:  # a slice of input read: the rest in steps
            self._seek_later(session, target, resume=False)
            return
        self.flush(session)

    def back(self, session: Session) -> None:
        """Step one event back: rebuild the state up to event ``position - 1``, paused."""
        if session.position > 0:
            self.seek(session, session.position - 1, resume=False)

    def seek(self, session: Session, target: int, *, resume: bool = True) -> None:
        """Jump to the state after ``target`` events (0 … total).

        Going back (or anywhere from a finished or cancelled session) rebuilds from the
        start; going forward feeds the events in between. A playing replay keeps playing
        from the target when ``resume``; otherwise the session is left paused.
        """
        target = max(0, min(session.total, target))
        resume = resume and session.status is Status.PLAYING
        self._cancel_seek(session)
        self._stop_runner(session)
        if target < session.position or (session.status.done and target != session.position):
            session.rewind()
        elif session.status in (Status.PLAYING, Status.READY):
            session.set_status(Status.PAUSED)
        distance = target - session.position
        if distance <= SYNC_SEEK_EVENTS:
            session.step(max(0, distance), sliced=True)
            if session.position >= target or session.status.done:
                self._after_seek(session, resume)
                return
        self._seek_later(session, target, resume)

    def _seek_later(self, session: Session, target: int, resume: bool) -> None:
        """Go on to ``target`` in a task that yields to the event loop between steps."""
        session.seek_target = target
        task = asyncio.get_running_loop().create_task(self._seek_run(session, target, session.generation, resume), name=f"seek-{session.id}")
        self._seeks[session.id] = task
        task.add_done_callback(lambda t, sid=session.id: self._seeks.pop(sid, None) if self._seeks.get(sid) is t else None)

    async def _seek_run(self, session: Session, target: int, generation: int, resume: bool) -> None:
        while session.position < target and session.generation == generation and not session.status.done:
            session.step(min(SEEK_CHUNK, target - session.position), sliced=True)
            await read_held(session)  # a large event the step stopped in front of: read in a worker thread
            await asyncio.sleep(0)  # a real yield: other sessions and requests are served meanwhile
        session.seek_target = None
        self._after_seek(session, resume)

    def _after_seek(self, session: Session, resume: bool) -> None:
        self.flush(session)
        if resume and not session.status.done:
            self.play(session)

    def _cancel_seek(self, session: Session) -> None:
        task = self._seeks.pop(session.id, None)
        if task is not None:
            task.cancel()
        session.seek_target = None

    def cancel(self, session: Session) -> None:
        self._cancel_seek(session)
        self._stop_runner(session)
        session.cancel("user stop")
        self.flush(session)

    def restart(self, session: Session) -> None:
        self._cancel_seek(session)
        self._stop_runner(session)
        session.reset()
        session.set_status(Status.READY)
        self.play(session)

    def set_rate(self, session: Session, rate: float) -> None:
        """Change the base rate (events/second at speed 1×); leaves the recorded pace."""
        rate = clamp_rate(rate)
        if rate != session.rate or session.recorded_pace:
            session.rate, session.recorded_pace = rate, False
            self._repace(session)

    def set_pace(self, session: Session, recorded: bool) -> None:
        """Replay at the recorded pace (``recorded``: only a source with chunk times has one)
        or at the base rate."""
        recorded = recorded and session.can_pace_recorded
        if recorded != session.recorded_pace:
            session.recorded_pace = recorded
            self._repace(session)

    def set_speed(self, session: Session, speed: float) -> None:
        """Change the speed multiplier (``math.inf``: full speed)."""
        if speed != session.speed:
            session.speed = speed
            self._repace(session)

    def _repace(self, session: Session) -> None:
        session.pending.status = session.pending.controls = True
        if session.status is Status.PLAYING:  # apply now, not after the current (maybe long) tick
            self._stop_runner(session)
            self._start(session)
        self.flush(session)

    # ------------------------------------------------------------------ runner

    def _start(self, session: Session) -> None:
        if session.id in self._tasks:
            return
        task = asyncio.get_running_loop().create_task(self._run(session, session.generation), name=f"replay-{session.id}")
        self._tasks[session.id] = task
        task.add_done_callback(lambda t, sid=session.id: self._tasks.pop(sid, None) if self._tasks.get(sid) is t else None)

    def _stop_runner(self, session: Session) -> None:
        task = self._tasks.pop(session.id, None)
        if task is not None:
            task.cancel()

    async def _run(self, session: Session, generation: int) -> None:
        def playing() -> bool:
            return session.status is Status.PLAYING and session.generation == generation

        if session.recorded_pace and not session.full_speed:
            await self._run_recorded(session, playing)
            return
        due, carry = self._clock(), 0.0
        while playing():
            if session.full_speed:
                await self._sleep(0)
                if not playing():
                    break
                session.step(FULL_SPEED_BATCH, sliced=True)
                await read_held(session)
                due = self._clock()
            else:
                rate = session.effective_rate
                interval = pace(rate)
                now = self._clock()
                due = max(due + interval, now)  # never a burst to catch up, at most one tick late
                await self._sleep(due - now)
                if not playing():
                    break
                carry += rate * interval
                count = int(carry + 1e-9)
                carry -= count
                while count > 0 and playing() and not session.status.done:
                    count -= session.step(count, sliced=True)
                    if count > 0:  # a slice of input read (or a large event to read first): the due events after a yield
                        await read_held(session)
                        await self._sleep(0)
            self.flush(session)

    async def _run_recorded(self, session: Session, playing: Callable[[], bool]) -> None:
        """Feed each event when its recorded time comes (÷ speed), measured from where the
        replay stands; a long recorded gap is waited out in ticks of at most
        ``1 / MAX_TICKS_PER_SECOND`` s, so pause, speed and stop apply at once."""
        if session.event_times is None:
            times = session.source.times  # type: ignore[attr-defined]
            data = session.source.data
            session.event_times = await asyncio.to_thread(lambda: event_times(times.split(data), session.source.name))
            if not playing():
                return
        schedule = session.event_times
        start_clock, start_t = self._clock(), session.virtual_t
        while playing() and not session.full_speed:
            pos = session.position
            target = schedule[pos] if pos < len(schedule) else (schedule[-1] if schedule else 0.0)
            now = self._clock()
            due = start_clock + max(0.0, target - start_t) / session.speed
            if due > now:
                await self._sleep(min(due - now, 1.0 / MAX_TICKS_PER_SECOND))
                continue
            reached = start_t + (now - start_clock) * session.speed
            count = 1
            while pos + count < len(schedule) and schedule[pos + count] <= reached and count < FULL_SPEED_BATCH:
                count += 1
            session.step(count, sliced=True)
            await read_held(session)  # a large event the step stopped in front of: read in a worker thread
            self.flush(session)
            await self._sleep(0)

    async def shutdown(self) -> None:
        """Cancel every replay, seek and pending render (app shutdown)."""
        tasks = [*self._tasks.values(), *self._seeks.values()]
        self._tasks.clear()
        self._seeks.clear()
        for task in tasks:
            task.cancel()
        for hub in self._hubs.values():
            hub.close()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ fan-out

    def hub(self, session: Session) -> Broadcaster:
        """The session's broadcaster (renders, viewers, counters)."""
        return self._hubs[session.id]

    def subscribe(self, session: Session) -> Viewer:
        """A bounded queue of HTML messages for one WebSocket; the first is the full state."""
        return self._hubs[session.id].subscribe()

    def unsubscribe(self, session: Session, viewer: Viewer) -> None:
        hub = self._hubs.get(session.id)
        if hub is not None:
            hub.unsubscribe(viewer)

    def watchers(self, session: Session) -> int:
        hub = self._hubs.get(session.id)
        return len(hub.viewers) if hub is not None else 0

    def delivery(self, session: Session) -> dict[str, Any]:
        """Render and per-viewer queue counters (the JSON twin's ``delivery``)."""
        hub = self._hubs.get(session.id)
        return hub.stats() if hub is not None else {}

    def flush(self, session: Session) -> None:
        """Ask for a render of what changed (coalesced; see :class:`~toollatch.web.replay.fanout.Broadcaster`)."""
        hub = self._hubs.get(session.id)
        if hub is not None:
            hub.request()
