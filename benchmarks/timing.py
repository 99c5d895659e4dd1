"""Chunk times and the timing lens at scale: 100,000 chunks.

Run: ``.venv/bin/python benchmarks/timing.py``

Targets (printed as ``target=... ok=...``):

* storage: ``ChunkTimes.to_json`` of 100k chunks is at most 8 bytes a chunk before base64
  (about 1.1 MB as text), and no per-chunk object survives in the stored form;
* the lens without calls (gaps, stalls) over 100k chunks in under 0.5 s: it runs in a
  thread, but a page waits for it;
* the timed pass (one more assembly of the stream) within 3× the plain assembly of the
  same bytes;
* the HAR download with ``_chunks`` of 100k chunks written and read back within 2× the
  plain assembly of the same bytes.
"""

from __future__ import annotations

import time

from toollatch.wire.capture import iter_capture
from toollatch.wire.har import read_har, write_har
from toollatch.demo.mockwire import scenario_events, split_events
from toollatch.core.pipeline import Pipeline
from toollatch.observe.timing import ChunkTimes, timed_pass, timing_lens

CHUNKS = 100_000


def body_of(chunks: int) -> bytes:
    """An OpenAI Chat stream of about ``chunks`` events: the 'single' scenario's call with
    its argument text re-sent as many small fragments."""
    events = scenario_events("single", "openai-chat")
    head, tail = events[:2], events[-2:]
    frag = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
    return b"".join(head) + frag * (chunks - len(events)) + b"".join(events[2:-2]) + b"".join(tail)


def main() -> None:
    body = body_of(CHUNKS)
    pieces = split_events(body)
    timed = [(i * 0.01 + (0.3 if i % 5000 == 0 else 0.0), p) for i, p in enumerate(pieces)]
    times = ChunkTimes.from_chunks(timed)
    doc = times.to_json()
    size = len(doc["ends"]) + len(doc["times"])
    print(f"storage chunks={len(times)} stored_chars={size} per_chunk={size / len(times):.1f} target<=11 ok={size / len(times) <= 11}")

    t = time.perf_counter()
    timing_lens(times, None, idle_timeout_s=60.0)
    lens = time.perf_counter() - t
    print(f"lens seconds={lens:.3f} target<0.5 ok={lens < 0.5}")

    t = time.perf_counter()
    pipeline = Pipeline(emit_events=False)
    for event in iter_capture([body]):
        pipeline.feed(event)
    pipeline.close()
    plain = time.perf_counter() - t
    t = time.perf_counter()
    found = timed_pass(times.split(body))
    passed = time.perf_counter() - t
    print(f"timed_pass seconds={passed:.3f} plain={plain:.3f} ratio={passed / plain:.2f} target<=3 ok={passed / plain <= 3} commits={len(found.commits)}")

    t = time.perf_counter()
    har = write_har(body, times, url="http://u/v1/chat/completions")
    (entry,) = read_har(har, "b.har")
    round_trip = time.perf_counter() - t
    print(f"har bytes={len(har)} seconds={round_trip:.3f} ratio={round_trip / plain:.2f} target<=2 ok={round_trip / plain <= 2 and entry.body == body}")


if __name__ == "__main__":
    main()
