"""Chunk arrival times of a recorded stream, and the timing lens computed from them.

A recording keeps, besides its bytes, when each chunk arrived: :class:`ChunkTimes` holds
two compact arrays (8 bytes a chunk, however many chunks: no per-chunk object or row),
``ends`` (the body offset, in bytes, where each chunk ends) and ``times`` (seconds since
the first byte arrived). :meth:`ChunkTimes.to_json` packs them as base64 for storage;
:meth:`ChunkTimes.split` cuts a body back into its timed chunks.

:func:`timed_pass` assembles a body chunk by chunk with the pipeline's clock set to each
chunk's arrival time, so every provider event and every call transition carries recorded
time; :func:`timing_lens` turns that into the session's ``timing`` document: duration
(first byte to end), time to first byte, to the first call and to each commit,
inter-chunk gaps (p50, max) with stalls (gaps of at least :data:`STALL_S`, the mark
browser SSE panels use), and the margin left before ``assemble_idle_timeout_s``.
Without times the document says ``{"recorded": false}`` and invents none.
"""

from __future__ import annotations

import base64
import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from toollatch.wire.capture import CaptureError
from toollatch.core.config import AssembleConfig
from toollatch.wire.intake import PushDecoder
from toollatch.core.model import CallState
from toollatch.core.large import LARGE_PAYLOAD_CHARS, CappedPipeline
from toollatch.core.pipeline import Pipeline
from toollatch.core.registry import ToolRegistry

#: Seconds: an inter-chunk gap at least this long is a stall.
STALL_S = 0.25
#: Stalls listed at most in a timing document (``stalls_total`` counts them all).
MAX_STALLS_LISTED = 50
#: Commits listed at most in a timing document.
MAX_COMMITS_LISTED = 200


class TimingError(ValueError):
    """Chunk times that cannot belong to a body; the message names what is wrong."""


def _pack(values: array) -> str:  # type: ignore[type-arg]
    if sys.byteorder != "little":
        values = array(values.typecode, values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def _unpack(typecode: str, text: Any, where: str) -> array:  # type: ignore[type-arg]
    if not isinstance(text, str):
        raise TimingError(f"{where}: expected base64 text")
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raise TimingError(f"{where}: not valid base64") from None
    values = array(typecode)
    if len(raw) % values.itemsize:
        raise TimingError(f"{where}: {len(raw)} bytes is not a whole number of {values.itemsize}-byte values")
    values.frombytes(raw)
    if sys.byteorder != "little":
        values.byteswap()
    return values


@dataclass
class ChunkTimes:
    """Arrival of each chunk of one body: ``ends[i]`` is the offset (bytes) where chunk
    ``i`` ends, ``times[i]`` the seconds since the first byte when it arrived (0 for the
    first). ``first_byte_s``: seconds from the request to the first byte, when known."""

    ends: array = field(default_factory=lambda: array("Q"))  # type: ignore[type-arg]
    times: array = field(default_factory=lambda: array("d"))  # type: ignore[type-arg]
    first_byte_s: float | None = None

    def __len__(self) -> int:
        return len(self.ends)

    @property
    def size(self) -> int:
        """Bytes covered (the end of the last chunk)."""
        return self.ends[-1] if self.ends else 0

    @property
    def duration_s(self) -> float:
        """Seconds from the first byte to the last chunk."""
        return self.times[-1] if self.times else 0.0

    def add(self, size: int, t: float) -> None:
        """A chunk of ``size`` bytes arrived ``t`` seconds after the first byte (monotonic:
        a time before the previous chunk's is taken as the previous one's)."""
        if size <= 0:
            return
        self.ends.append(self.size + size)
        self.times.append(max(t, self.times[-1]) if self.times else max(t, 0.0))

    def add_all(self, arrivals: Iterable[tuple[int, float]], origin: float) -> None:
        """:meth:`add` of each ``(size, time)`` pair, in order: ``size`` bytes, ``time`` in the
        seconds of a clock whose first byte came at ``origin`` (one call for a batch of
        chunks, such as the proxy's tee records between two rounds)."""
        ends, times = self.ends, self.times
        end = ends[-1] if ends else 0
        last = times[-1] if times else 0.0
        for size, at in arrivals:
            if size > 0:
                end += size
                t = at - origin
                last = t if t > last else last
                ends.append(end)
                times.append(last)

    @classmethod
    def from_chunks(cls, chunks: Iterable[tuple[float, bytes]], first_byte_s: float | None = None) -> ChunkTimes:
        """From ``(seconds, bytes)`` pairs in arrival order; times are made relative to the first."""
        out = cls(first_byte_s=first_byte_s)
        t0: float | None = None
        for t, data in chunks:
            if not data:
                continue
            t0 = t if t0 is None else t0
            out.add(len(data), t - t0)
        return out

    def fit(self, size: int) -> ChunkTimes:
        """These times for a body of ``size`` bytes: unchanged when the sizes agree, else
        each chunk end scaled in proportion (a redacted body whose strings changed length),
        so the times and their number of chunks survive."""
        if size == self.size or not self.ends:
            return self
        scale = size / self.size
        ends = array("Q")
        for i, end in enumerate(self.ends):
            ends.append(size if i == len(self.ends) - 1 else min(size, max(ends[-1] if ends else 0, round(end * scale))))
        return ChunkTimes(ends, array("d", self.times), self.first_byte_s)

    def cut(self, size: int) -> ChunkTimes:
        """These times for the first ``size`` bytes only (a body cut short: its readable part)."""
        if size >= self.size:
            return self
        k = bisect_left(self.ends, size)
        ends, times = array("Q", self.ends[:k]), array("d", self.times[:k])
        if size > (ends[-1] if ends else 0):
            ends.append(size)
            times.append(self.times[k])
        return ChunkTimes(ends, times, self.first_byte_s)

    def split(self, body: bytes) -> Iterator[tuple[float, bytes]]:
        """``(seconds, bytes)`` per chunk of ``body`` (:meth:`fit` to its length first)."""
        fitted = self.fit(len(body))
        start = 0
        view = memoryview(body)
        for end, t in zip(fitted.ends, fitted.times):
            if end > start:
                yield t, bytes(view[start:end])
            start = end

    def time_at(self, offset: int) -> float:
        """Seconds when the byte at ``offset`` had arrived."""
        i = bisect_left(self.ends, offset + 1)
        return self.times[min(i, len(self.times) - 1)] if self.times else 0.0

    def to_json(self) -> dict[str, Any]:
        """Compact storage: ``{"chunks", "ends", "times", "first_byte_s"}``, the arrays as
        base64 of little-endian uint32 ends and float32 times (8 bytes a chunk)."""
        return {
            "chunks": len(self.ends),
            "ends": _pack(array("I", self.ends)),
            "times": _pack(array("f", self.times)),
            "first_byte_s": self.first_byte_s,
        }

    @classmethod
    def from_json(cls, doc: Any, where: str = "chunk times") -> ChunkTimes:
        """The inverse of :meth:`to_json`; raises :class:`TimingError` naming the field."""
        if not isinstance(doc, dict):
            raise TimingError(f"{where}: expected an object")
        ends = array("Q", _unpack("I", doc.get("ends"), f"{where}.ends"))
        times = array("d", _unpack("f", doc.get("times"), f"{where}.times"))
        if len(ends) != len(times):
            raise TimingError(f"{where}: {len(ends)} chunk ends but {len(times)} times")
        first = doc.get("first_byte_s")
        return cls(ends, times, float(first) if isinstance(first, (int, float)) and not isinstance(first, bool) else None)


def event_times(chunks: Iterable[tuple[float, bytes]], name: str = "<input>") -> array:  # type: ignore[type-arg]
    """Seconds at which each provider event of timed chunks was complete (the arrival of its
    last byte), in event order: the schedule of a replay at recorded pace. Decoding only
    (no assembly); a decoding fault ends the list there."""
    out = array("d")
    decoder = PushDecoder(name)
    t = 0.0
    try:
        for t, data in chunks:
            out.extend([t] * len(decoder.feed(data)))
        out.extend([t] * len(decoder.close()))
    except CaptureError:
        pass
    return out


@dataclass
class TimedPass:
    """What :func:`timed_pass` found, in recorded seconds since the first byte:
    ``event_times`` (one per provider event, in order), ``first_call_s`` and ``commits``
    (``{"call_id", "name", "t"}`` per COMMITTED call, in commit order)."""

    event_times: array = field(default_factory=lambda: array("d"))  # type: ignore[type-arg]
    first_call_s: float | None = None
    commits: list[dict[str, Any]] = field(default_factory=list)
    open_spans: list[tuple[float, float]] = field(default_factory=list)


def timed_pass(
    chunks: Iterable[tuple[float, bytes]],
    name: str = "<input>",
    *,
    config: AssembleConfig | None = None,
    registry: ToolRegistry | None = None,
    calls_followed: int | None = None,
) -> TimedPass:
    """Assemble timed chunks with the pipeline clock at each chunk's arrival time.

    Linear in the body; a stream that cannot be read yields what was found up to the
    fault (the session shows the fault itself). Times are seconds since the first byte.
    ``calls_followed``: follow only the first that many calls of the input, as the
    session timed did (:class:`~toollatch.core.large.CappedPipeline`); None: every call."""
    now = [0.0]
    kwargs: dict[str, Any] = {"config": config, "registry": registry, "clock": lambda: now[0], "name": name, "progress_events": False}
    pipeline = Pipeline(**kwargs) if calls_followed is None else CappedPipeline(keep=calls_followed, **kwargs)
    # capped: a large payload is parsed where the pipeline reads it (read_large_event)
    decoder = PushDecoder(name, defer_over=None if calls_followed is None else LARGE_PAYLOAD_CHARS)
    out = TimedPass()
    starts: list[float] = []
    try:
        for t, data in chunks:
            now[0] = t
            for event in decoder.feed(data):
                out.event_times.append(t)
                pipeline.feed(event)
                while len(starts) < len(pipeline.streams):
                    starts.append(t)
        for event in decoder.close():
            out.event_times.append(now[0])
            pipeline.feed(event)
            while len(starts) < len(pipeline.streams):
                starts.append(now[0])
        pipeline.close()
    except (CaptureError, ValueError, RecursionError):
        pass
    found: list[tuple[float, str | None, str | None]] = []
    opens: list[float] = []
    for stream, t0 in zip(pipeline.streams, starts):
        for call in stream.result().calls:
            moves = call.transitions
            if moves:
                opens.append(t0 + moves[0].t)
                end = next((m.t for m in moves if m.state.terminal), moves[-1].t)
                out.open_spans.append((t0 + moves[0].t, t0 + end))
            commit = next((m.t for m in moves if m.state is CallState.COMMITTED), None)
            if commit is not None:
                found.append((t0 + commit, call.call_id, call.name))
    out.first_call_s = min(opens) if opens else None
    out.commits = [{"call_id": cid, "name": nm, "t": round(t, 4)} for t, cid, nm in sorted(found, key=lambda f: f[0])]
    return out


def _merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _p50(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def timing_lens(times: ChunkTimes | None, found: TimedPass | None = None, *, idle_timeout_s: float | None = None, why: str | None = None) -> dict[str, Any]:
    """The ``timing`` document of a session (seconds, rounded to 0.1 ms).

    Without ``times``: ``{"recorded": false, "why": ...}``. Otherwise ``recorded``,
    ``duration_s`` (first byte to the last chunk), ``first_byte_s`` (request to first byte,
    None when not known), ``first_call_s`` and ``commits`` (from ``found``), ``chunks``,
    ``gaps`` (``{"p50_s", "max_s"}`` between consecutive chunks), ``stalls`` (gaps of at
    least :data:`STALL_S`: ``{"after_s", "gap_s", "byte"}``, at most
    :data:`MAX_STALLS_LISTED`; ``stalls_total`` counts them) and ``idle_timeout``
    (``{"timeout_s", "longest_quiet_s", "margin_s"}``: the longest gap while a call was
    open, and what was left of the timeout)."""
    if times is None or not len(times):
        return {"recorded": False, "why": why or "this source holds no chunk arrival times: none are invented"}
    r = lambda x: round(float(x), 4)  # noqa: E731
    gaps = [times.times[i] - times.times[i - 1] for i in range(1, len(times.times))]
    stalls = [i for i, g in enumerate(gaps) if g >= STALL_S]
    doc: dict[str, Any] = {
        "recorded": True,
        "basis": "chunks",
        "duration_s": r(times.duration_s),
        "first_byte_s": None if times.first_byte_s is None else r(times.first_byte_s),
        "chunks": len(times),
        "bytes": times.size,
        "gaps": {"p50_s": r(_p50(gaps)) if gaps else None, "max_s": r(max(gaps)) if gaps else None},
        "stall_s": STALL_S,
        "stalls_total": len(stalls),
        "stalls": [{"after_s": r(times.times[i]), "gap_s": r(gaps[i]), "byte": times.ends[i]} for i in stalls[:MAX_STALLS_LISTED]],
        "first_call_s": None,
        "commits": [],
    }
    if found is not None:
        doc["first_call_s"] = None if found.first_call_s is None else r(found.first_call_s)
        doc["commits"] = found.commits[:MAX_COMMITS_LISTED]
    if idle_timeout_s is not None:
        quiet, spans, k = 0.0, _merged(found.open_spans if found is not None else []), 0
        for i, g in enumerate(gaps):  # one sweep: gaps and spans are both in time order
            start = times.times[i]
            while k < len(spans) and spans[k][1] <= start:
                k += 1
            if k < len(spans) and spans[k][0] <= start:
                quiet = max(quiet, g)
        doc["idle_timeout"] = {"timeout_s": idle_timeout_s, "longest_quiet_s": r(quiet), "margin_s": r(idle_timeout_s - quiet)}
    return doc


__all__ = ["MAX_STALLS_LISTED", "STALL_S", "ChunkTimes", "TimedPass", "TimingError", "event_times", "timed_pass", "timing_lens"]
