"""Replay at the recorded pace (toollatch.web.replay.runner): events when their recorded time comes."""

from __future__ import annotations

import asyncio

from toollatch.observe.timing import ChunkTimes
from toollatch.web.replay.session import Status
from toollatch.web.triage.sources import LoadedSource

from .test_timing import CALL, _chunks
from .test_web_app import VirtualTime
from .test_web_fanout import make_store, until

TIMES = [0.0, 10.0, 70.0, 75.0]  # recorded seconds of the four events


def timed_source(times: list[float] | None = TIMES) -> LoadedSource:
    chunk_times = ChunkTimes.from_chunks(_chunks(times)) if times is not None else None
    return LoadedSource("upload", "t.sse", "Upload: t.sse", "test", CALL, 4, "openai-chat", None, None, None, chunk_times)


def replayed(rate: float | None = None, speed: float = 1.0, times: list[float] | None = TIMES) -> tuple[float, dict]:
    """(virtual seconds the replay took, its JSON twin)."""
    clock = VirtualTime()

    async def go() -> tuple[float, dict]:
        store = make_store(clock)
        session = store.create(timed_source(times), rate=rate, speed=speed)
        start = clock.now
        await until(clock, lambda: session.status is Status.FINISHED)
        took = clock.now - start
        doc = session.to_json()
        doc["transitions"] = [(m.state.value, m.t) for c in session.pipeline.results()[0].calls for m in c.transitions]
        await store.shutdown()
        return took, doc

    return asyncio.run(go())


def test_a_timed_source_replays_at_its_recorded_pace_by_default() -> None:
    took, doc = replayed()
    assert doc["pace"] == "recorded"
    assert 0.9 < took / TIMES[-1] < 1.1
    committed = [t for state, t in doc["transitions"] if state == "committed"]
    assert committed and 0.9 < committed[0] / TIMES[-1] < 1.1  # the virtual clock runs on recorded time


def test_speed_divides_the_recorded_pace() -> None:
    took, _ = replayed(speed=4.0)
    assert 0.9 < took / (TIMES[-1] / 4) < 1.1


def test_an_explicit_rate_wins_and_a_source_without_times_has_no_recorded_pace() -> None:
    took, doc = replayed(rate=100.0)
    assert doc["pace"] == "rate" and took < TIMES[-1] / 10
    _, plain = replayed(times=None)
    assert plain["pace"] == "rate"


def test_set_pace_switches_between_rate_and_recorded() -> None:
    clock = VirtualTime()

    async def go() -> None:
        store = make_store(clock)
        session = store.create(timed_source(), autoplay=False)
        store.set_rate(session, 100.0)
        assert not session.recorded_pace
        store.set_pace(session, True)
        assert session.recorded_pace
        store.play(session)
        start = clock.now
        await until(clock, lambda: session.status is Status.FINISHED)
        assert clock.now - start > TIMES[-1] * 0.9
        await store.shutdown()

    asyncio.run(go())
