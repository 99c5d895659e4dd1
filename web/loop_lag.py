"""How late the dashboard's event loop runs: ``toollatch_event_loop_lag_seconds`` at ``/metrics``.

Every request, websocket frame and proxied chunk waits for the one event loop; work that
holds it (or a worker thread holding the GIL it needs) delays them all. :func:`watch_loop`
sleeps :data:`INTERVAL_S` at a time and records how much later than asked each sleep
ended: the time the loop was held in that interval, give or take a millisecond. The
histogram's buckets reach from a few milliseconds to seconds, so the worst stall since a
scrape shows as the highest bucket whose count grew (``benchmarks/stall_probe.py`` reads
it around each of its scenarios).
"""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry, Histogram

#: Seconds the watcher sleeps between two measures.
INTERVAL_S = 0.02
#: Buckets in seconds of lateness.
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0)
METRIC = "toollatch_event_loop_lag_seconds"


def lag_histogram(registry: CollectorRegistry) -> Histogram:
    """The lag histogram, registered on ``registry`` (the one ``/metrics`` serves)."""
    return Histogram(METRIC, "Seconds the dashboard's event loop ran late, per 20 ms interval watched.", buckets=LAG_BUCKETS, registry=registry)


async def watch_loop(histogram: Histogram, interval: float = INTERVAL_S) -> None:
    """Record the loop's lateness into ``histogram`` until cancelled."""
    clock = time.perf_counter
    while True:
        asked = clock()
        await asyncio.sleep(interval)
        histogram.observe(max(0.0, clock() - asked - interval))
