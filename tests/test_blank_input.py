"""Input that is mostly not events (megabytes of blank lines before one event) costs work
in proportion to its size, in bounded steps: the SSE decoder takes a run of blank lines in
one match, the capture reader decides its framing after a bounded blank head, and a replay
on the event loop yields after every slice of input it reads.

Nothing here measures time: the tests count decoder steps and event-loop turns."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toollatch.wire.intake import BLANK_HEAD_LIMIT, PushDecoder
from toollatch.wire.sse import SSEDecoder
from toollatch.web.app import resource_dir
from toollatch.web.pages.render import Renderer
from toollatch.web.replay.runner import SessionStore
from toollatch.web.replay.session import Session, Status
from toollatch.web.settings import FULL_SPEED, Settings
from toollatch.web.triage.sources import REPLAY_SLICE, LoadedSource, Slice, check

EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
BLANK = 1024 * 1024


def blank_source(blank: bytes = b"\n") -> LoadedSource:
    data = blank * (BLANK // len(blank)) + EVENT
    count, dialect = check(data, "blank.sse", Settings().config, None)
    assert count == 2
    return LoadedSource("upload", "blank.sse", "Upload: blank.sse", "", data, count, dialect)


# ------------------------------------------------------------------ the SSE decoder


@pytest.mark.parametrize("blank", [b"\n", b"\r\n", b"\r"])
def test_a_run_of_blank_lines_is_one_step_of_the_decoder(blank: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []
    process = SSEDecoder._process

    def counted(self: SSEDecoder, line: str, offset: int, events: list[Any]) -> None:
        lines.append(line)
        process(self, line, offset, events)

    monkeypatch.setattr(SSEDecoder, "_process", counted)
    decoder = SSEDecoder()
    data = b"data: 1" + blank * 100_000 + b"data: 2" + blank * 2
    events = decoder.decode(data)
    assert [e.data for e in events] == ["1", "2"] and [e.line for e in events] == [1, 100_001]
    assert decoder.lines_read == 100_002
    # At most each line with data and the blank line after it that dispatched (a "data: "
    # line right before its one blank line is dispatched in a single step), never a step per blank line.
    assert len(lines) <= 4


# ------------------------------------------------------------------ the capture reader


def test_the_framing_is_decided_after_a_bounded_blank_head() -> None:
    decoder = PushDecoder("blank.sse")
    fed = 0
    while decoder.framing is None and fed < 8 * BLANK_HEAD_LIMIT:
        decoder.feed(b"\n" * 4096)
        fed += 4096
    assert decoder.framing == "sse" and fed <= BLANK_HEAD_LIMIT + 4096
    first, done = decoder.feed(EVENT)
    assert first.line == fed + 1 and first.offset == fed and done.data == "[DONE]"


# ------------------------------------------------------------------ the replay on the event loop


def store() -> SessionStore:
    settings = Settings()
    return SessionStore(settings, Renderer(resource_dir("templates"), settings))


async def turns_until_done(session: Session) -> list[tuple[int, Status]]:
    """What another task on the loop sees each time it gets a turn, until ``session`` ends."""
    seen: list[tuple[int, Status]] = []
    while not session.status.done and len(seen) < 100_000:
        seen.append((session.position, session.status))
        await asyncio.sleep(0)
    return seen


def test_a_full_speed_replay_lets_the_loop_run_between_slices_of_blank_input() -> None:
    async def scenario() -> list[tuple[int, Status]]:
        sessions = store()
        session = sessions.create(blank_source(), speed=FULL_SPEED)
        seen = await turns_until_done(session)
        assert session.status is Status.FINISHED and session.position == 2
        await sessions.shutdown()
        return seen

    seen = asyncio.run(scenario())
    waiting = [s for s in seen if s == (0, Status.PLAYING)]
    assert len(waiting) >= BLANK // REPLAY_SLICE // 2  # a turn for the others after each slice, before the event


@pytest.mark.parametrize("blank", [b"\n", b": keep-alive\n"])
def test_a_step_by_hand_through_blank_input_goes_on_in_slices(blank: bytes) -> None:
    async def scenario() -> list[tuple[int, Status]]:
        sessions = store()
        session = sessions.create(blank_source(blank), autoplay=False)
        sessions.step(session, 1)
        assert session.position == 0 and session.seek_target == 1  # not read in one go: the rest in a task
        seen: list[tuple[int, Status]] = []
        while session.position < 1 and len(seen) < 100_000:
            seen.append((session.position, session.status))
            await asyncio.sleep(0)
        assert session.position == 1 and session.status is Status.PAUSED
        await sessions.shutdown()
        return seen

    assert len(asyncio.run(scenario())) >= BLANK // REPLAY_SLICE // 2


def test_a_paced_replay_feeds_the_event_due_after_slices_of_blank_input() -> None:
    read: list[int] = []

    def counting(items: Any) -> Any:
        for item in items:
            if isinstance(item, Slice):
                read.append(1)
            yield item

    async def scenario() -> list[tuple[int, int]]:
        sessions = store()
        session = sessions.create(blank_source(), rate=1000.0)
        session._events = counting(session._events)
        seen: list[tuple[int, int]] = []
        while not session.status.done and len(seen) < 100_000:
            seen.append((session.position, len(read)))
            await asyncio.sleep(0)
        assert session.status is Status.FINISHED
        await sessions.shutdown()
        return seen

    seen = asyncio.run(scenario())
    slices = -(-len(blank_source().data) // REPLAY_SLICE)
    midway = {n for position, n in seen if position == 0 and 0 < n < slices}
    assert len(midway) >= slices // 2  # other tasks ran between the slices read for the one event due
