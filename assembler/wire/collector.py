"""Python's cyclic garbage collector held off while one structure of millions of objects is built.

A payload of megabytes parsed, then read by its dialect adapter, builds up to millions of
objects in one go. Each automatic collection meanwhile walks every object alive, the ones
being built too, though none of them is garbage; a full one holds the GIL, every thread of
the process stopped, for half a second and more. :func:`collector_paused` turns automatic
collections off for the build, and a stepper thread collects the youngest generation in
small steps meanwhile (:data:`STEP_OBJECTS` at a time), so that when the pause ends no
collection has to walk all of what was built at once: tuples of scalars (an adapter's
call keys) are untracked as they are walked, and a container made early in the build (an
adapter's tables) moves to the middle generation while still small, so no later step
walks it again. Every step holds the GIL for about a millisecond; one collection of the
100,000 call keys an event of 100,000 tool calls leaves behind held it for 20-60 ms.

What the steps do not remove: the other objects that survive the build (a dialect's own
record per call) wait in the middle generation, and the first automatic collection of it
after the pause walks them all at once (a full collection of them would follow as
usual; collecting the middle generation in the steps instead only brings that full one
forward). ``benchmarks/collector_pauses.py`` gives the longest single collection either way.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["STEP_OBJECTS", "STEP_SECONDS", "collector_paused"]

#: Young objects (allocated, less those freed, since the last collection) at which the
#: stepper collects: walking them takes about a millisecond.
STEP_OBJECTS = 10_000
#: How often the stepper looks (seconds).
STEP_SECONDS = 0.002

_lock = threading.Lock()
_pauses = 0  # collector_paused blocks running now, in any thread
_was_enabled = True
_stop: threading.Event | None = None  # set to end the stepper of the pauses running now


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's automatic cyclic garbage collection (process-wide; nested and
    concurrent pauses are counted, and it runs again once the last ends, if it ran before
    the first began), collecting the youngest generation in steps of about
    :data:`STEP_OBJECTS` objects meanwhile from a thread of its own (none if collection
    was off before). Reference counting frees objects as usual when they are let go."""
    global _pauses, _was_enabled, _stop
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
        if _pauses == 1 and _was_enabled:
            stop = threading.Event()
            try:
                threading.Thread(target=_step, args=(stop,), name="toollatch-collector-step", daemon=True).start()
            except RuntimeError:  # no thread to be had (a process at its limit): a pause without steps
                pass
            else:
                _stop = stop
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0:
                if _stop is not None:
                    _stop.set()
                    _stop = None
                if _was_enabled:
                    gc.enable()


def _step(stop: threading.Event) -> None:
    """Collect the youngest generation whenever :data:`STEP_OBJECTS` objects are waiting in
    it, until ``stop`` is set: each step walks only what was made since the one before (its
    survivors move to the middle generation)."""
    while not stop.wait(STEP_SECONDS):
        if gc.get_count()[0] >= STEP_OBJECTS:
            gc.collect(0)
