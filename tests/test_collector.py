"""collector_paused: no automatic collection during a build, the young generation walked in steps."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import pytest

from toollatch.wire import collector
from toollatch.wire.collector import STEP_OBJECTS, collector_paused


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    gc.collect()
    yield
    if not was:
        gc.disable()


def steppers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "toollatch-collector-step"]


def wait_for(condition: object, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.002)
    return False


def test_pauses_nest_and_overlap_and_the_collector_runs_again_after_the_last() -> None:
    inner_done = threading.Event()
    entered = threading.Event()
    outer_may_end = threading.Event()

    def other_thread() -> None:
        with collector_paused():
            entered.set()
            outer_may_end.wait(5)
        inner_done.set()

    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        worker = threading.Thread(target=other_thread)
        worker.start()
        assert entered.wait(5)
    assert not gc.isenabled()  # the other thread's pause still runs
    outer_may_end.set()
    worker.join(5)
    assert inner_done.is_set() and gc.isenabled()
    assert wait_for(lambda: not steppers(), 5)


def test_the_young_generation_is_walked_in_steps_during_a_pause() -> None:
    # 200,000 call keys (tuples of ints) built in one pause: without the steps every one of
    # them would wait, tracked, for the first collection after it
    generations: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and threading.current_thread().name == "toollatch-collector-step":
            generations.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        with collector_paused():
            keys = walk_in_steps()
    finally:
        gc.callbacks.remove(seen)
    assert generations and set(generations) == {0}  # the youngest generation only: no step walks the older ones
    tracked = sum(gc.is_tracked(k) for k in keys)
    assert tracked <= STEP_OBJECTS * 2, tracked  # the steps untracked the rest (scalars only)
    assert gc.isenabled()


def walk_in_steps() -> list[tuple[int, int, int]]:
    """200,000 call keys built in a pause, given the stepper's turn now and then; returns
    once the stepper has caught up."""
    keys = []
    for i in range(200_000):
        keys.append((0, i, 0))
        if i % 20_000 == 0:
            time.sleep(0.003)  # the stepper's turn, as a reading thread gives the GIL up
    assert wait_for(lambda: gc.get_count()[0] < STEP_OBJECTS)
    assert not gc.isenabled()
    return keys


def test_no_step_runs_where_the_collector_was_off() -> None:
    gc.disable()
    with collector_paused():
        assert not steppers()
        keys = [(0, i, 0) for i in range(3 * STEP_OBJECTS)]
        time.sleep(10 * collector.STEP_SECONDS)
        assert gc.get_count()[0] >= 3 * STEP_OBJECTS  # nothing collected them
    assert not gc.isenabled() and len(keys) == 3 * STEP_OBJECTS


def test_a_pause_whose_stepper_cannot_start_still_turns_the_collector_on_again(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled() and collector._pauses == 0
    monkeypatch.undo()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
