"""One provider event of many calls is assembled in parts (web/live/backlog.py): the proxy's
tee yields to the event loop between the parts, and the result is the one feeding the
event whole gives."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from toollatch.core.config import AssembleConfig
from toollatch.core.large import CALLS_FOLLOWED, LARGE_PAYLOAD_CHARS
from toollatch.core.pipeline import Pipeline
from toollatch.wire.intake import PushDecoder
from toollatch.web.live.backlog import OPS_STEP
from toollatch.web.live.session import LiveSession, LiveSource
from toollatch.web.live.tee import Tee

from .test_large import threads_reading
from .test_tee import Flushes, live, outcome


def one_event(count: int) -> bytes:
    entries = [{"index": i, "id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}} for i in range(count)]
    docs = [{"choices": [{"index": 0, "delta": {"tool_calls": entries}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    return ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n").encode()


WIRE = one_event(OPS_STEP * 3)


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
    assert len(whole.cards) == OPS_STEP * 3
    between = {n for n in seen if 0 < n < len(whole.cards)}
    assert len(between) >= 3, sorted(set(seen))  # the other coroutine ran while the event was half assembled


def test_feeding_whole_is_unchanged_and_leaves_no_backlog() -> None:
    session: LiveSession = live()
    session.feed_bytes(WIRE)
    assert not session.backlog and len(session.cards) == OPS_STEP * 3


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
            while tee.size or parts.backlog or not seen or seen[-1] < OPS_STEP * 3:
                seen.append(len(parts.cards))
                await asyncio.sleep(0)  # one turn of the event loop
        await worker.aclose()

    asyncio.run(run())
    between = {n for n in seen if 0 < n < OPS_STEP * 3}
    assert len(between) >= 3, sorted(set(seen))  # this coroutine ran while the event was half assembled


# ---------------------------------------------------------------------- one large event


def through_tee(session: LiveSession, wire: bytes, read: int | None = None) -> str:
    """Forward ``wire`` to ``session``'s tee in reads of ``read`` bytes (all at once: None),
    drain and settle it as the proxy does; the name of the event loop's thread."""
    tee = Tee(session, Flushes())  # type: ignore[arg-type]
    size = read or len(wire)

    async def run() -> str:
        for i in range(0, len(wire), size):
            tee.append(wire[i : i + size])
            await tee.drain()
        tee.close(True)
        await session.settle()
        return threading.current_thread().name

    return asyncio.run(run())


def gemini_event(count: int) -> bytes:
    parts = [{"functionCall": {"name": "f", "args": {"a": i}}} for i in range(count)]
    docs = [
        {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0}]},
    ]
    return "".join(f"data: {json.dumps(d)}\n\n" for d in docs).encode()


def whole_verdicts(wire: bytes, dialect: str) -> list[tuple[object, ...]]:
    pipeline = Pipeline(name="whole")
    decoder = PushDecoder("whole")
    for event in [*decoder.feed(wire), *decoder.close()]:
        pipeline.feed(event)
    pipeline.close()
    return [(c.call_id, c.name, c.state, c.reason) for r in pipeline.results() for c in r.calls]


@pytest.mark.parametrize(("dialect", "wire"), [("openai-chat", one_event(6000)), ("gemini", gemini_event(20000))])
def test_a_large_event_is_read_in_a_worker_thread_and_keeps_the_first_calls_it_opens(dialect: str, wire: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    from toollatch.web.live import backlog

    assert len(wire) > LARGE_PAYLOAD_CHARS  # the event is left unparsed by the session's decoder
    source = LiveSource(f"up/{dialect}", upstream="up", endpoint="/v1/x", dialect=dialect, request={"model": "m", "stream": True})
    session = LiveSession("large", source, AssembleConfig())
    source.http_status, source.content_type = 200, "text/event-stream"
    threads = threads_reading(monkeypatch)
    loop_thread = through_tee(session, wire, 65536)
    assert threads and loop_thread not in threads
    keep = CALLS_FOLLOWED
    total = 6000 if dialect == "openai-chat" else 20000
    shown = [(c.call_id, c.name, c.state, c.reason) for r in session.pipeline.results() for c in r.calls]
    whole = whole_verdicts(wire, dialect)
    assert len(whole) == total and len(shown) == keep and len(session.cards) == keep
    if dialect == "openai-chat":  # ids given by the provider: the very same calls
        assert shown == whole[:keep]
    else:  # ids made up per call: the same verdicts, in order
        assert [s[1:] for s in shown] == [w[1:] for w in whole[:keep]]
    assert session.live_source.untold_calls == total - keep
    assert session.notice and f"{total - keep} calls are not assembled here" in session.notice
    assert session.end_kind == "complete" and session.position == session.live_source.count


def test_calls_left_out_of_a_large_event_stay_out_when_later_events_name_them() -> None:
    entries = [{"index": i, "id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": ""}} for i in range(6000)]
    later = [{"index": i, "function": {"arguments": '{"a":1}'}} for i in (0, 1500, 5999)]
    docs = [
        {"choices": [{"index": 0, "delta": {"tool_calls": entries}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": later}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    wire = ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n").encode()
    session = live("later")
    through_tee(session, wire)
    calls = {c.call_id: c for r in session.pipeline.results() for c in r.calls}
    assert len(calls) == CALLS_FOLLOWED and "c1500" not in calls and "c5999" not in calls
    assert calls["c0"].state.value == "committed" and calls["c0"].arguments == {"a": 1}
    assert calls["c999"].state.value == "failed"  # past the in-flight limit: too_many_tool_calls
    assert session.live_source.untold_calls == 6000 - CALLS_FOLLOWED


def test_a_large_event_fed_whole_is_read_at_once_with_the_same_calls() -> None:
    wire = one_event(6000)
    stepped, whole = live("stepped"), live("whole")
    through_tee(stepped, wire)
    whole.feed_bytes(wire)  # no step: a caller that cannot wait reads it where it is
    whole.finish()
    assert outcome(whole)[:3] == outcome(stepped)[:3]
    assert whole.live_source.untold_calls == stepped.live_source.untold_calls == 6000 - CALLS_FOLLOWED
