"""Coalesced renders and bounded per-viewer queues (``web/replay/fanout.py``), on virtual time.

Everything runs in ``asyncio.run`` with :class:`VirtualTime` as the app's clock and sleep:
no test waits on the wall clock, and "at most 20 renders a second" is checked on the very
clock the broadcaster reads.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from toollatch.demo.demos import DEMOS
from toollatch.demo.stress import stress_demo
from toollatch.web.app import resource_dir
from toollatch.web.replay.fanout import Frame, Viewer
from toollatch.web.pages.render import Renderer
from toollatch.web.replay.runner import SessionStore
from toollatch.web.replay.session import Changes, Session, Status, Verdict
from toollatch.web.settings import FULL_SPEED, Settings
from toollatch.web.triage.sources import from_demo

from .test_web_app import VirtualTime

CARD = re.compile(r'<article id="(call-[\d-]+)" class="card state-(\w+)" data-state="\w+" data-bytes="(\d+)"')
VERDICT = re.compile(r'<li class="v-(\w+)">([^<]+)</li>')
FINISHED = 'class="pill status-finished"'


def make_store(time: VirtualTime, **settings: Any) -> SessionStore:
    config = Settings(**settings)
    return SessionStore(config, Renderer(resource_dir("templates"), config), sleep=time.sleep, clock=time.clock)


def run(test: Callable[[VirtualTime], Awaitable[None]]) -> None:
    time = VirtualTime()
    asyncio.run(test(time))


async def drain(viewer: Viewer) -> list[str]:
    """Every frame queued for ``viewer`` right now."""
    frames = []
    while len(viewer):
        frames.append(await viewer.get())
    return frames


async def until(time: VirtualTime, done: Callable[[], bool], limit: float = 3600.0) -> None:
    """Let virtual time pass until ``done()``; fail after ``limit`` virtual seconds."""
    start = time.now
    while not done():
        assert time.now - start < limit, "condition never held"
        await time.sleep(0.01)


def costly(session: Session, time: VirtualTime, per_event: float = 0.0005) -> None:
    """Make feeding take virtual time (``per_event`` seconds an event), as real work does.

    Without it a full-speed replay is instantaneous on a virtual clock and there would be
    nothing to coalesce.
    """
    step = session.step

    def timed(count: int = 1, **options: Any) -> int:
        before = session.position
        taken = step(count, **options)
        time.now += per_event * (session.position - before)
        return taken

    session.step = timed  # type: ignore[method-assign]


def card_history(frames: list[str]) -> dict[str, list[tuple[str, int]]]:
    """Per card id, the (state, bytes) it showed in each frame that rendered it."""
    seen: dict[str, list[tuple[str, int]]] = {}
    for frame in frames:
        for cid, state, size in CARD.findall(frame):
            seen.setdefault(cid, []).append((state, int(size)))
    return seen


RANK = {"open": 0, "args_complete": 1, "committed": 2, "failed": 2, "cancelled": 2}


def assert_only_forward(history: dict[str, list[tuple[str, int]]]) -> None:
    for cid, shown in history.items():
        sizes = [size for _, size in shown]
        ranks = [RANK[state] for state, _ in shown]
        assert sizes == sorted(sizes), f"{cid}: bytes went backwards: {sizes}"
        assert ranks == sorted(ranks), f"{cid}: state went backwards: {[s for s, _ in shown]}"


# ------------------------------------------------------------------ coalescing


def test_full_speed_renders_at_most_20_per_second_and_ends_on_the_final_state() -> None:
    demo = stress_demo(6_000, 4)

    async def scenario(time: VirtualTime) -> None:
        store = make_store(time)
        session = store.create(from_demo(demo), speed=FULL_SPEED, autoplay=False)
        costly(session, time)
        hub = store.hub(session)
        viewer = store.subscribe(session)
        rendered: list[float] = []
        update = store.renderer.update
        store.renderer.update = lambda s, c: (rendered.append(time.now), update(s, c))[1]  # type: ignore[method-assign]
        frames: list[str] = []
        consumer = asyncio.create_task(_consume(viewer, frames))
        store.play(session)
        await until(time, lambda: session.status.done and hub.idle and not len(viewer))
        await time.sleep(0.01)
        consumer.cancel()

        assert session.status is Status.FINISHED
        gaps = [b - a for a, b in zip(rendered, rendered[1:])]
        assert gaps and min(gaps) >= 0.05 - 1e-9, "two renders closer than 1/20 s"
        assert hub.renders == len(rendered) >= 10
        assert hub.renders <= 20 * (rendered[-1] - rendered[0]) + 1
        assert hub.renders < demo.events / 50, "renders were coalesced, not one per event"
        assert FINISHED in frames[-1]
        history = card_history(frames)
        assert len(history) == 4
        assert all(shown[-1][0] == "committed" for shown in history.values())
        assert_only_forward(history)
        verdicts = [text for frame in frames for _, text in VERDICT.findall(frame)]
        assert len(verdicts) == 5 and verdicts[-1].startswith("Stream 0 ended: complete"), "each verdict exactly once"

    run(scenario)


def test_paced_replay_renders_each_event_below_20_per_second() -> None:
    demo = DEMOS["openai-parallel"]

    async def scenario(time: VirtualTime) -> None:
        store = make_store(time, replay_rate=12)
        session = store.create(from_demo(demo), autoplay=False)
        viewer = store.subscribe(session)
        frames: list[str] = []
        consumer = asyncio.create_task(_consume(viewer, frames))
        started = time.now
        store.play(session)
        await until(time, lambda: session.status.done and store.hub(session).idle and not len(viewer))
        consumer.cancel()
        elapsed = time.now - started
        assert elapsed == pytest.approx(demo.events / 12, rel=0.05), "12 events per virtual second"
        # 12 events/s is below the render cap: every event gets its own frame.
        assert len(frames) >= demo.events
        assert store.delivery(session)["renders"] <= 20 * elapsed + 1

    run(scenario)


def test_speed_20x_is_still_capped_at_20_renders_per_second() -> None:
    async def scenario(time: VirtualTime) -> None:
        store = make_store(time, replay_rate=12)
        session = store.create(from_demo(stress_demo(3_000, 2)), speed=20.0, autoplay=False)
        viewer = store.subscribe(session)
        consumer = asyncio.create_task(_consume(viewer, []))
        started = time.now
        store.play(session)
        await until(time, lambda: session.status.done)
        consumer.cancel()
        elapsed = time.now - started
        assert elapsed == pytest.approx(3_000 / 240, rel=0.05), "20 × 12 events/s"
        assert store.delivery(session)["renders"] <= 20 * elapsed + 2

    run(scenario)


def test_no_viewer_no_render() -> None:
    async def scenario(time: VirtualTime) -> None:
        store = make_store(time)
        session = store.create(from_demo(DEMOS["openai-single"]), speed=FULL_SPEED)
        await until(time, lambda: session.status.done)
        assert store.delivery(session)["renders"] == 0
        viewer = store.subscribe(session)
        assert FINISHED in (await drain(viewer))[0], "a late viewer starts from the full state"

    run(scenario)


async def _consume(viewer: Viewer, into: list[str]) -> None:
    while True:
        into.append(await viewer.get())


# ------------------------------------------------------------------ slow viewers


def test_a_stalled_viewer_never_stalls_the_replay_and_keeps_every_verdict() -> None:
    demo = stress_demo(20_000, 8)

    async def scenario(time: VirtualTime) -> None:
        store = make_store(time, viewer_queue_frames=6)
        session = store.create(from_demo(demo), speed=FULL_SPEED, autoplay=False)
        costly(session, time)
        stalled = store.subscribe(session)  # never read while the replay runs
        fast = store.subscribe(session)
        fast_frames: list[str] = []
        consumer = asyncio.create_task(_consume(fast, fast_frames))
        store.play(session)
        await until(time, lambda: session.status.done and store.hub(session).idle)
        await time.sleep(0.01)
        consumer.cancel()

        assert session.status is Status.FINISHED, "the replay ran to the end with a viewer that read nothing"
        stats = stalled.stats()
        assert stats["queued"] <= 6 and stats["peak_queued"] <= 6
        assert stats["dropped"] > 0, stats
        assert fast.stats()["dropped"] == 0 and len(fast_frames) == fast.stats()["offered"]

        late = await drain(stalled)
        assert FINISHED in late[-1]
        history = card_history(late)
        assert len(history) == 8 and all(shown[-1][0] == "committed" for shown in history.values())
        assert_only_forward(history)
        verdicts = [text for frame in late for _, text in VERDICT.findall(frame)]
        assert sorted(verdicts) == sorted(session_verdicts(session)), "no verdict lost, none twice"

    run(scenario)


def session_verdicts(session: Session) -> list[str]:
    return [v.text for v in session.verdicts]


def _frame(name: str, *, cards: set[str] | None = None, transitions: set[str] | None = None, verdict: str | None = None) -> Frame:
    changes = Changes(cards=set(cards or ()), transitions=set(transitions or ()), verdicts=[Verdict(verdict, "committed")] if verdict else [])
    return Frame(name, changes, changes.essential)


def test_full_queue_drops_progress_first_and_folds_it_into_the_newest_frame() -> None:
    rendered: list[Changes] = []

    def rerender(changes: Changes) -> str:
        rendered.append(changes)
        return "merged"

    async def scenario() -> list[str]:
        viewer = Viewer(3, rerender=rerender, full=lambda: "full")
        viewer.offer(_frame("p1", cards={"a"}))
        viewer.offer(_frame("e2", cards={"b"}, transitions={"b"}, verdict="b COMMITTED"))
        viewer.offer(_frame("p3", cards={"c"}))
        viewer.offer(_frame("p4", cards={"d"}))
        assert viewer.stats()["dropped"] == 2 and viewer.stats()["resyncs"] == 0
        return await drain(viewer)

    assert asyncio.run(scenario()) == ["e2", "merged"]
    assert rendered[0].cards == {"a", "c", "d"} and rendered[0].verdicts == []


def test_full_queue_of_transitions_becomes_one_full_state_resync() -> None:
    async def scenario() -> tuple[list[str], dict[str, int]]:
        viewer = Viewer(3, rerender=lambda changes: "merged", full=lambda: "full")
        for n in range(4):
            viewer.offer(_frame(f"e{n}", transitions={f"c{n}"}, verdict=f"v{n}"))
        return await drain(viewer), viewer.stats()

    frames, stats = asyncio.run(scenario())
    assert frames == ["full"]
    assert stats["resyncs"] == 1 and stats["queued"] == 0 and stats["sent"] == 1


def test_changes_know_what_is_essential() -> None:
    assert not Changes(cards={"a"}, status=True).essential
    assert Changes(cards={"a"}, transitions={"a"}).essential
    assert Changes(verdicts=[Verdict("x", "stream")]).essential
    assert Changes(controls=True).essential and Changes(reset=True).essential
    merged = Changes(cards={"a"}, verdicts=[Verdict("1", "stream")]).merge(Changes(cards={"b"}, layout=True, verdicts=[Verdict("2", "stream")]))
    assert merged.cards == {"a", "b"} and merged.layout and [v.text for v in merged.verdicts] == ["1", "2"]
