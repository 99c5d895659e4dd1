"""One provider event of many calls is assembled in parts (web/live/backlog.py): the proxy's
tee yields to the event loop between the parts, and the result is the one feeding the
event whole gives."""

from __future__ import annotations

import asyncio
import json

from toollatch.web.live.backlog import OPS_STEP
from toollatch.web.live.session import LiveSession
from toollatch.web.live.tee import Tee

from .test_tee import Flushes, live, outcome


def one_event(count: int) -> bytes:
    entries = [{"index": i, "id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}} for i in range(count)]
    docs = [{"choices": [{"index": 0, "delta": {"tool_calls": entries}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    return ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n").encode()


WIRE = one_event(OPS_STEP * 4)


def test_an_event_of_many_calls_is_assembled_in_parts_between_other_work() -> None:
    whole = live("whole")
    whole.feed_bytes(WIRE)
    whole.finish()

    parts = live("parts")
    tee = Tee(parts, Flushes())  # type: ignore[arg-type]
    seen: list[int] = []

    async def other() -> None:
        while not parts.status.done:
            seen.append(len(parts.cards))
            await asyncio.sleep(0)

    async def run() -> None:
        async def forward() -> None:
            tee.append(WIRE)
            await tee.drain(step=len(WIRE))  # all bytes in one step: only the ops are split
            tee.close(True)
            await parts.settle()

        await asyncio.gather(forward(), other())

    asyncio.run(run())
    assert outcome(parts)[:3] == outcome(whole)[:3]
    assert len(whole.cards) == OPS_STEP * 4
    between = {n for n in seen if 0 < n < len(whole.cards)}
    assert len(between) >= 3, sorted(set(seen))  # the other coroutine ran while the event was half assembled


def test_feeding_whole_is_unchanged_and_leaves_no_backlog() -> None:
    session: LiveSession = live()
    session.feed_bytes(WIRE)
    assert not session.backlog and len(session.cards) == OPS_STEP * 4


def test_a_stop_drops_what_is_not_yet_assembled() -> None:
    session = live()
    session.feed_bytes(WIRE, step=OPS_STEP)
    assert session.backlog
    assembled = len(session.cards)
    session.cancel("user stop")
    assert not session.backlog and session.end_kind == "cancelled"
    assert len(session.cards) == assembled and all(c.view.state.value == "cancelled" or c.view.state.value == "failed" for c in session.cards.values())


def test_the_tee_worker_yields_between_the_parts_of_an_event_of_many_calls() -> None:
    from toollatch.web.live.tee import TeeWorker

    parts = live("worker")
    tee = Tee(parts, Flushes())  # type: ignore[arg-type]
    seen: list[int] = []

    async def run() -> None:
        worker = TeeWorker(step=len(WIRE))  # all bytes in one step: only the ops are split
        tee.append(WIRE)
        worker.queue(tee)
        async with asyncio.timeout(10):
            while tee.size or parts.backlog or not seen or seen[-1] < OPS_STEP * 4:
                seen.append(len(parts.cards))
                await asyncio.sleep(0)  # one turn of the event loop
        await worker.aclose()

    asyncio.run(run())
    between = {n for n in seen if 0 < n < OPS_STEP * 4}
    assert len(between) >= 3, sorted(set(seen))  # this coroutine ran while the event was half assembled
