"""One replay session: a source, a pipeline, and the redacted state the dashboard shows.

A :class:`Session` is driven step by step (one provider event at a time) by the replay
runner (:mod:`toollatch.web.replay.runner`) or by a control request. It keeps only what may be shown:
:class:`~toollatch.redaction.redact.CallView` snapshots, and a call's arguments only after an
assembly event reported the call COMMITTED; with ``ui_forward_partial_args: false``, its
byte and fragment counts only once it has its verdict (:func:`~toollatch.redaction.redact.hide_progress`:
a fragment then changes nothing that is sent). It also records *what changed* since the
last render (:class:`Changes`), so the WebSocket hub renders each changed card once per
render however many events arrived in between.

Time is virtual: the pipeline's clock advances by ``1 / rate`` seconds per provider
event fed (``rate`` is the base rate; the speed multiplier does not enter), so timelines
read as "seconds into the replay at the base pace", pauses excluded, and are the same on
every run. That also makes stepping *back* exact: :meth:`Session.rewind` and replaying
to event ``n - 1`` rebuilds the very same state.
"""

from __future__ import annotations

import enum
from collections import Counter
import itertools
import logging
import math
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from toollatch.wire.capture import CaptureError, ProviderEvent
from toollatch.core.config import AssembleConfig
from toollatch.core.model import CallState, ToolResult
from toollatch.observe.metrics import Metrics
from toollatch.core.large import CALLS_FOLLOWED, CappedPipeline
from toollatch.core.pipeline import Pipeline
from toollatch.redaction.redact import AssemblyEvent, CallView, hide_open_progress, hide_progress

from toollatch.web.pages.cards import Card, Changes, EndState, Verdict
from toollatch.web.mask_values import hide_stream_documents, mask_by_default
from toollatch.web.replay.fold import fold_event
from toollatch.web.replay.held import HeldEvent, note_untold
from toollatch.web.replay.owed import OwedResults
from toollatch.web.replay.paging import CALLS_PAGE, MAX_CALLS_PAGE, page_results
from toollatch.web.settings import speed_label, speed_value
from toollatch.web.triage.sources import LoadedSource, Slice

log = logging.getLogger("toollatch.web")

#: Creation numbers: every session takes the next one, so a larger ``seq`` is a newer session
#: whatever was evicted meanwhile (session ids are random).
_CREATED = itertools.count(1)
#: Slices of input (:data:`~toollatch.web.triage.sources.REPLAY_SLICE` bytes) one sliced step reads at most
#: while it feeds events; one, when it has fed none.
SLICES_PER_STEP = 4


class Status(str, enum.Enum):
    """Replay status of a session."""

    READY = "ready"  # nothing fed yet, not playing
    PLAYING = "playing"
    PAUSED = "paused"
    FINISHED = "finished"  # input consumed, pipeline closed
    CANCELLED = "cancelled"  # user stop (or the demo's scripted stop)
    ERROR = "error"  # the input could not be assembled further

    @property
    def done(self) -> bool:
        return self in _DONE  # read per provider event: the members' tuple once, not per call


#: The statuses after which nothing more is fed (:attr:`Status.done`).
_DONE = (Status.FINISHED, Status.CANCELLED, Status.ERROR)


class Session:
    """Replay state of one source. Not thread-safe; used from the event loop only."""

    def __init__(
        self, sid: str, source: LoadedSource, config: AssembleConfig, rate: float, speed: float = 1.0, metrics: Metrics | None = None
    ) -> None:
        self.id = sid
        self.seq = next(_CREATED)  # creation order in this process: larger is newer
        self.metrics = metrics  # observed on the first pass only: restarts and seeks rebuild
        self.source = source
        self.config = config
        #: *mask values*: committed argument values are shown hidden too (toollatch.web.mask_values)
        self.mask_values = mask_by_default(str(getattr(source, "kind", "")))
        self.rate = rate  # base rate, provider events per second at speed 1×
        self.speed = speed  # multiple of ``rate``; ``math.inf`` is "max" (full speed)
        self.status = Status.READY
        self.generation = 0  # bumped by reset: a runner or seek of an older generation stops
        self.seek_target: int | None = None  # set while a long seek rebuilds the state
        self.notice: str | None = None  # e.g. a control value that was out of range and clamped
        #: Replay at the pace the source was recorded at (the default when it holds chunk
        #: times): events at their recorded seconds ÷ ``speed``, the virtual clock on recorded time.
        self.recorded_pace = self.can_pace_recorded
        #: When each provider event was complete, in recorded seconds (set by the runner).
        self.event_times: Any = None
        #: The last timing document computed (:func:`toollatch.web.pages.timing.session_timing`), or None.
        self.timing_doc: dict[str, Any] | None = None
        self.reset()

    # ------------------------------------------------------------------ state

    def reset(self) -> None:
        """Back to before the first event (restart)."""
        self.virtual_t = 0.0
        self.position = 0
        self._events: Iterator[ProviderEvent | Slice] = self.source.iter_slices()
        first_pass = self.generation == 0
        self.pipeline = CappedPipeline(
            config=self.config,
            registry=self.source.registry(),
            clock=lambda: self.virtual_t,
            name=self.source.name,
            metrics=self.metrics if first_pass else None,
            progress_events=self.forward_progress,
            coalesce_progress=True,  # byte counts folded once per step, not per fragment (_take_progress)
            keep=self.calls_followed,
        )
        self.held = HeldEvent()  # a large event the next step feeds once read (web/replay/held.py)
        self.cards: dict[str, Card] = {}
        self._ordered: list[Card] = []  # the cards in provider order, kept sorted as they appear
        self._states: Counter[CallState] = Counter()  # calls per state (state_counts)
        self._owed = OwedResults(self.config.finalize_order == "arrival")
        self.ends: dict[int, EndState] = {}
        self.verdicts: list[Verdict] = []
        self.error: str | None = None
        self.pending = Changes.everything()
        self._counters_moved = False
        self.generation += 1

    def rewind(self) -> None:
        """Back to before the first event, paused (the first half of a seek back)."""
        self.reset()
        self.set_status(Status.PAUSED)

    @property
    def forward_progress(self) -> bool:
        """``ui_forward_partial_args``: show byte and fragment counts before a call's verdict."""
        return self.config.ui_forward_partial_args

    def shown(self, view: CallView) -> CallView:
        """What the dashboard may show of ``view`` (counts withheld until the verdict unless
        :attr:`forward_progress`)."""
        return view if self.forward_progress else hide_progress(view)

    def scrubbed(self, value: Any) -> Any:
        """``value`` (a committed call's arguments, a document, a report, an export's bytes)
        as the dashboard may show or serve it. A replay shows its source as is; a live
        session replaces the credentials its request forwarded (:class:`toollatch.web.live.session.LiveSession`)."""
        return value

    @property
    def total(self) -> int:
        """Provider events in the input."""
        return self.source.count

    @property
    def triage_state(self) -> str:
        """``"<generation>:done"`` once the replay is over, else ``"<generation>:open"``: the
        state the triage panel must show (``#status[data-triage]``; ``static/app.js`` fetches
        the panel when its ``data-state`` differs, e.g. after a restart, back or seek)."""
        return f"{self.generation}:{'done' if self.status.done else 'open'}"

    calls_followed = CALLS_FOLLOWED  # calls of the input followed one by one (CappedPipeline)

    def set_notice(self, notice: str | None) -> None:
        """Show (or clear, with None) a one-line notice under the status bar."""
        if notice != self.notice:
            self.notice = notice
            self.pending.status = True

    @property
    def can_pace_recorded(self) -> bool:
        """The source holds chunk times, so it can replay at its recorded pace (never a live stream)."""
        return self.source.kind != "live" and getattr(self.source, "times", None) is not None

    @property
    def full_speed(self) -> bool:
        return math.isinf(self.speed)

    @property
    def effective_rate(self) -> float:
        """Provider events per second at the current speed (``inf`` at full speed)."""
        return self.rate * self.speed

    @property
    def speed_label(self) -> str:
        return speed_label(self.speed)

    @property
    def speed_value(self) -> str:
        return speed_value(self.speed)

    def quirk_counts(self) -> dict[str, int]:
        """Quirks met so far, summed over streams, in order of first sighting."""
        counts: dict[str, int] = {}
        for stream in self.pipeline.streams:
            for name, count in stream.quirks.items():
                counts[name] = counts.get(name, 0) + count
        return counts

    @property
    def ordered_cards(self) -> list[Card]:
        """Cards in provider order (stream, then key), kept sorted as they appear: read it, do not change it."""
        return self._ordered

    @property
    def multi_stream(self) -> bool:
        """The input holds more than one stream (so far): cards then name their stream."""
        return len(self.ends) > 1 or (bool(self._ordered) and self._ordered[0].stream != self._ordered[-1].stream)

    @property
    def results(self) -> list[tuple[int, ToolResult]]:
        """Error results owed so far, as (stream, result), in provider order (:class:`~toollatch.web.replay.owed.OwedResults`)."""
        return self._owed.results()

    def set_status(self, status: Status) -> None:
        if status is not self.status:
            log.info("session %s: %s -> %s", self.id, self.status.value, status.value)
            self.status = status
            self.pending.status = self.pending.controls = True

    def progressed(self) -> None:
        """An event (or a live chunk) arrived: the status bar's counters moved; rendered at once with
        :attr:`forward_progress`, else with the next frame another change causes (never per fragment)."""
        if self.forward_progress:
            self.pending.status = True
        else:
            self._counters_moved = True

    def take_changes(self) -> Changes:
        """The changes accumulated since the last call, and start a new set."""
        changes, self.pending = self.pending, Changes()
        if self._counters_moved and changes.any():
            changes.status, self._counters_moved = True, False
        return changes

    # ------------------------------------------------------------------ driving

    def step(self, count: int = 1, *, sliced: bool = False) -> int:
        """Feed up to ``count`` provider events (:meth:`_step_events`), then fold the counts they moved."""
        taken = self._step_events(count, sliced=sliced)
        self._take_progress()
        note_untold(self)  # calls past the first calls_followed: counted in the notice
        return taken

    def _take_progress(self) -> None:
        """Fold the calls' byte and fragment counts that moved since the last time: one ``fragment``
        event per call that took fragments (verdicts and other assembly events fold as they come)."""
        if isinstance(self.pipeline, Pipeline) and self.pipeline.coalesce_progress and not self.status.done:
            self._guard(self.pipeline.take_progress)

    def _step_events(self, count: int = 1, *, sliced: bool = False) -> int:
        """Feed up to ``count`` provider events; close the pipeline right after the last one.
        Returns how many steps were taken: fewer than ``count`` when the session ended, or
        with ``sliced`` when a slice of input was read without an event fed, or
        :data:`SLICES_PER_STEP` slices were (:func:`~toollatch.web.triage.sources.iter_sliced`): a caller on
        the event loop then lets it run before the next call, so no input, however little of
        it is events, holds the loop longer than a few slices take to parse.

        A demo's scripted stop (``cancel_after``) is applied as soon as that many events
        were fed. Errors end the session with status ERROR and a message.
        """
        taken = fed = slices = 0
        while taken < count:
            if self.status.done:
                return taken
            if self.held.parts_left():  # a large event's ops, a part a step (held.py)
                self._guard(self.held.next_part(self.pipeline))
                self.progressed()  # the status names the part applied (_status.html)
                if self.status.done or (sliced and self.held.parts_left()):
                    return taken
                if not self.held.parts_left():  # the event is fed whole: counted now
                    if self.position == 0:
                        self.pending.controls = True  # the first event: ◀ Back becomes possible
                    self.position += 1
                    taken += 1
                    if self._ended():
                        return taken
                continue
            if self.position < self.total and not self._stop_due():
                event = self.held.take() or next(self._events, None)
                while isinstance(event, Slice):
                    slices += 1
                    if sliced and (slices >= SLICES_PER_STEP or not fed):
                        return taken
                    event = next(self._events, None)
                if sliced and self.held.hold(event):
                    return taken  # a large event: read in a worker thread first (read_held), fed by the next step
                self.progressed()
                if self.position == 0:
                    self.pending.controls = True  # the first event: ◀ Back becomes possible
                if event is None:  # fewer events than counted: treat as the end of input
                    self.position = self.total
                else:
                    times = self.event_times if self.recorded_pace else None
                    if times is not None and self.position < len(times):
                        self.virtual_t = max(self.virtual_t, times[self.position])
                    else:
                        self.virtual_t += 1.0 / self.rate
                    self.position += 1
                    fed += 1
                    self._guard(self.held.feeder(self, event, sliced))
                    if self.status.done:
                        return taken + 1
                    if self.held.parts_left():  # its ops applied by the next steps, the event counted after the last
                        self.position -= 1
                        return taken
            taken += 1
            if self._ended():
                return taken
        return taken

    def _ended(self) -> bool:
        """Apply the demo's scripted stop or the end of input when due: True once applied."""
        if self._stop_due():
            self.cancel("user stop by the demo script")
            return True
        if self.position >= self.total:
            self._take_progress()  # the last counts before the verdicts the end gives
            self._guard(self.pipeline.close)
            if not self.status.done:
                self.set_status(Status.FINISHED)
            return True
        return False

    def _stop_due(self) -> bool:
        return self.source.cancel_after is not None and self.position >= self.source.cancel_after

    def cancel(self, detail: str = "user stop") -> None:
        """User stop: open calls become CANCELLED and get their error results."""
        if self.status.done:
            return
        self._take_progress()
        self._guard(partial(self.pipeline.cancel, detail))
        if not self.status.done:
            self.set_status(Status.CANCELLED)

    def _guard(self, action: Callable[[], list[AssemblyEvent]]) -> None:
        try:
            events = action()
        except CaptureError as exc:
            self._fail(str(exc))
            return
        except Exception as exc:  # never a traceback on screen; never argument text in a log
            log.error("session %s: assembler raised %s", self.id, type(exc).__name__)
            self._fail(f"The assembler failed on this input ({type(exc).__name__}).")
            return
        for event in events:
            self._apply(event)

    def _fail(self, message: str) -> None:
        self.error = message
        self.set_status(Status.ERROR)

    def _apply(self, event: AssemblyEvent) -> None:
        """Fold one assembly event into the redacted state (:func:`toollatch.web.replay.fold.fold_event`)."""
        fold_event(self, event)

    def _announce(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)
        self.pending.verdicts.append(verdict)

    @property
    def owed(self) -> OwedResults:
        """The owed results, with the calls owing them (:class:`~toollatch.web.replay.owed.OwedResults`)."""
        return self._owed

    # ------------------------------------------------------------------ JSON

    def to_json(self, offset: int = 0, limit: int = CALLS_PAGE) -> dict[str, Any]:
        """The session's JSON twin: meta, stream documents and redacted call views.

        ``streams`` holds one ``toollatch assemble --json`` stream document per stream so
        far; a call's ``arguments`` appear there only once committed (every value hidden while
        ``mask_values`` is on), and its ``bytes`` and
        ``fragments`` only once it has its verdict when ``ui_forward_partial_args`` is false
        (``forward_progress``).

        Paged by call: ``calls`` holds the views of the calls ``offset`` … ``offset + limit -
        1`` in provider order (counted over every stream), and each stream document holds the
        calls of that window only, with the error results those calls are owed; ``page``
        says ``offset``, ``limit``, ``total`` (calls in the session) and ``states`` (calls per
        state, over all of them). A session of at most ``limit`` calls is one page, its
        documents whole. The work per request is bounded by ``limit`` calls, not by the
        session's size (a stream of 100,000 calls). ``offset`` and ``limit`` are clamped to
        0 … total and 1 … :data:`MAX_CALLS_PAGE`.
        """
        total = len(self._ordered)
        limit = max(1, min(MAX_CALLS_PAGE, limit))
        offset = max(0, min(total, offset))
        window = self._ordered[offset : offset + limit]
        streams = self.pipeline.results() if offset == 0 and total <= limit else page_results(self.pipeline, self.ends, window)
        if not self.forward_progress:
            streams = [hide_open_progress(r) for r in streams]
        return {
            "id": self.id,
            "source": self.source.meta(),
            "status": self.status.value,
            "error": self.error,
            "position": self.position,
            "total": self.total,
            "rate": self.rate,
            "pace": "recorded" if self.recorded_pace else "rate",
            "timing": self.timing_doc,
            "speed": "max" if self.full_speed else self.speed,
            "effective_rate": None if self.full_speed else self.effective_rate,
            "dialect": self.pipeline.dialect,
            "max_tool_argument_bytes": self.config.max_tool_argument_bytes,
            "forward_progress": self.forward_progress,
            "quirks": [{"quirk": name, "count": count} for name, count in self.quirk_counts().items()],
            "mask_values": self.mask_values,
            "streams": hide_stream_documents([r.to_json() for r in streams]) if self.mask_values else [r.to_json() for r in streams],
            "calls": [{"stream": c.stream, **c.view.to_json()} for c in window],
            "page": {"offset": offset, "limit": limit, "total": total, "states": self.state_counts()},
            "untold_calls": getattr(self.pipeline, "untold", 0), "notice": self.notice,  # calls left out (held.py)
            "verdicts": [v.text for v in self.verdicts[-MAX_CALLS_PAGE:]],  # the latest ones
        }

    def state_counts(self) -> dict[str, int]:
        """Calls per state (``{"failed": 99968, "committed": 32}``), over every call so far;
        kept as cards change (:func:`~toollatch.web.replay.fold.fold_event`), so reading it
        costs nothing per call."""
        return {state.value: count for state, count in self._states.items() if count}
