"""A replay's large event, read in a worker thread before the replay feeds it.

A replay reads its input on the event loop, a slice at a time
(:func:`~toollatch.web.triage.sources.iter_sliced`); an event whose payload is over
:data:`~toollatch.core.large.LARGE_PAYLOAD_CHARS` is left unparsed there. A step that
reaches one stops in front of it (:meth:`HeldEvent.hold`); the runner then awaits
:func:`read_held`, which reads it in a worker thread
(:func:`~toollatch.core.large.read_large_event`: parsed, turned into ops, the calls past
the first ``calls_followed`` of the input left out); the next step feeds that read
(:meth:`HeldEvent.feeder`), its ops :data:`OPS_STEP` at a time, a step each
(:meth:`HeldEvent.next_part`). A step that cannot wait (one not ``sliced``) reads it where it
is. The read feeds a copy of the input's adapter, so a read thrown away (the replay
paused, stepped or rewound meanwhile) leaves the pipeline as it was. The calls left out are counted in the session's notice
(:func:`note_untold`), as a live session's are.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from toollatch.core.large import CappedPipeline, LargeEvent, reader
from toollatch.core.model import Op
from toollatch.core.pipeline import Pipeline
from toollatch.redaction.redact import AssemblyEvent
from toollatch.wire.capture import UNPARSED, ProviderEvent

if TYPE_CHECKING:
    from toollatch.web.replay.session import Session


#: Ops (about one call's worth of work each) a step on the event loop applies before the
#: loop runs again: a large event's (here, and a live session's backlog).
OPS_STEP = 256


class OpsLeft:
    """The ops of an event not applied yet (a large event's, an event of many calls),
    taken a part at a time (:meth:`part`): a live session's backlog and a replay's held
    event hold them alike."""

    __slots__ = ("_ops", "_at")

    def __init__(self) -> None:
        self._ops: list[Op] = []
        self._at = 0

    def __bool__(self) -> bool:
        return self._at < len(self._ops)

    def hold(self, ops: list[Op]) -> None:
        """Hold ``ops`` (what was held before is dropped)."""
        self._ops, self._at = ops, 0

    def hold_read(self, read: LargeEvent) -> LargeEvent:
        """Hold the ops of ``read``; ``read`` without them, for the pipeline to take."""
        self.hold(read.ops or [])
        if read.capped is None:
            return read
        return dataclasses.replace(read, capped=dataclasses.replace(read.capped, ops=[]))

    def progress(self) -> tuple[int, int]:
        """``(ops applied, ops in all)`` of the event held."""
        return self._at, len(self._ops)

    def part(self, size: int | None = None) -> list[Op]:
        """The next ``size`` held ops (None: all that are left), no longer held."""
        end = len(self._ops) if size is None else min(len(self._ops), self._at + size)
        part = self._ops[self._at : end]
        self._at = end
        if end >= len(self._ops):
            self.hold([])
        return part


def note_untold(session: Session) -> int:
    """Name in ``session``'s notice how many calls its pipeline left out (counts only: no
    name, id or text of theirs); returns that count (0: nothing is said)."""
    pipeline = session.pipeline
    untold = pipeline.untold if isinstance(pipeline, CappedPipeline) else 0
    if untold:
        limit = session.config.max_tool_calls_in_flight_assemble
        session.set_notice(
            f"This input opens more tool calls than the dashboard follows one by one ({pipeline.keep} a session): "  # type: ignore[union-attr]
            f"{untold} calls are not assembled here and have no card (your client gets each of them; "
            f"past {limit} in flight they FAIL too_many_tool_calls)."
        )
    return untold


class HeldEvent:
    """The large event a replay stopped in front of, and its read once made."""

    def __init__(self) -> None:
        self.event: ProviderEvent | None = None
        self.read: LargeEvent | None = None
        self._left = OpsLeft()  # what is left of a read's ops (next_part)

    def hold(self, event: Any) -> bool:
        """Hold ``event`` when it is a large one not read yet: True, and the step stops."""
        if isinstance(event, ProviderEvent) and event.data is UNPARSED and self.read is None:
            self.event = event
            return True
        return False

    def take(self) -> ProviderEvent | None:
        """The held event, for the step to feed (None when none is held)."""
        event, self.event = self.event, None
        return event

    def feeder(self, session: Session, event: ProviderEvent, sliced: bool = False) -> Callable[[], Any]:
        """What feeds ``event`` to the session's pipeline: its read, when one was made.
        With ``sliced`` (a step that returns to the event loop), the read's ops are held,
        for the next steps to apply :data:`OPS_STEP` at a time (:meth:`next_part`): the
        first 1,000 calls of one event opened, then their verdicts and cards, are work of a
        tenth of a second and more."""
        read, self.read = self.read, None
        pipeline = session.pipeline
        if read is None or not isinstance(pipeline, CappedPipeline):
            return partial(pipeline.feed, event)
        if sliced and read.ops:  # its ops wait in parts; what the pipeline does with the read, without them
            read = self._left.hold_read(read)
        return partial(pipeline.take, read)

    def parts_left(self) -> bool:
        """Ops of a read event are still to apply (:meth:`next_part`)."""
        return bool(self._left)

    def applied(self) -> tuple[int, int] | None:
        """``(ops applied, ops in all)`` of the read event being applied a part a step (it is
        counted once its last part is: the status names it meanwhile); None when there is none."""
        return self._left.progress() if self._left else None

    def next_part(self, pipeline: Pipeline) -> Callable[[], list[AssemblyEvent]]:
        """What applies the next :data:`OPS_STEP` held ops to ``pipeline``."""
        return partial(pipeline.apply_ops, self._left.part(OPS_STEP))


async def read_held(session: Session) -> None:
    """Read the event ``session`` holds (if any) in a worker thread, for its next step."""
    held, pipeline, generation = session.held, session.pipeline, session.generation
    event = held.event
    if event is None or held.read is not None or not isinstance(pipeline, CappedPipeline):
        return
    read = await asyncio.to_thread(reader(pipeline, event))
    if session.generation == generation and session.held is held and held.event is event:
        held.read = read
