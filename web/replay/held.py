"""A replay's large event, read in a worker thread before the replay feeds it.

A replay reads its input on the event loop, a slice at a time
(:func:`~toollatch.web.triage.sources.iter_sliced`); an event whose payload is over
:data:`~toollatch.core.large.LARGE_PAYLOAD_CHARS` is left unparsed there. A step that
reaches one stops in front of it (:meth:`HeldEvent.hold`); the runner then awaits
:func:`read_held`, which reads it in a worker thread
(:func:`~toollatch.core.large.read_large_event`: parsed, turned into ops, the first
``large_event_calls`` calls it opens kept); the next step feeds that read
(:meth:`HeldEvent.feeder`). A step that cannot wait (a replay at its recorded pace) reads it
where it is. The calls left out are counted in the session's notice
(:func:`untold_notice`), as a live session's are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from toollatch.core.large import CappedPipeline, LargeEvent, read_large_event
from toollatch.wire.capture import UNPARSED, ProviderEvent

if TYPE_CHECKING:
    from toollatch.web.replay.session import Session


def untold_notice(line: int, untold: int, keep: int) -> str:
    """The notice of a session that left calls of a large event out (at ``line``): counts only."""
    return (
        f"An event of this stream (line {line}) opens more tool calls than the dashboard follows "
        f"from one event ({keep}, max_tool_calls_in_flight_assemble + 1): {untold} calls are not assembled here "
        f"and have no card (your client gets each of them; past {keep - 1} in flight they FAIL too_many_tool_calls)."
    )


class HeldEvent:
    """The large event a replay stopped in front of, and its read once made."""

    def __init__(self) -> None:
        self.event: ProviderEvent | None = None
        self.read: LargeEvent | None = None

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

    def feeder(self, session: Session, event: ProviderEvent) -> Callable[[], Any]:
        """What feeds ``event`` to the session's pipeline: its read, when one was made."""
        read, self.read = self.read, None
        pipeline = session.pipeline
        if read is None or not isinstance(pipeline, CappedPipeline):
            return partial(pipeline.feed, event)
        if read.left_out:
            session.set_notice(untold_notice(read.event.line, pipeline.untold + len(read.left_out), pipeline.keep))
        return partial(pipeline.take, read)


async def read_held(session: Session) -> None:
    """Read the event ``session`` holds (if any) in a worker thread, for its next step."""
    held, pipeline, generation = session.held, session.pipeline, session.generation
    event = held.event
    if event is None or held.read is not None or not isinstance(pipeline, CappedPipeline):
        return
    args = (event, pipeline.adapter_state(), pipeline.call_keys(), pipeline.keep, pipeline.name, frozenset(pipeline.left_out))
    read = await asyncio.to_thread(read_large_event, *args)
    if session.generation == generation and session.held is held and held.event is event:
        held.read = read
