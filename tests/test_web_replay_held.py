"""A replay's large event (web/replay/held.py): read in a worker thread before it is fed,
the first calls it opens followed, the others counted, as a live session does."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from toollatch.core.config import AssembleConfig
from toollatch.core.large import CALLS_FOLLOWED, LARGE_PAYLOAD_CHARS
from toollatch import Pipeline, read_capture
from toollatch.core.model import CallState
from toollatch.web.pages.render import Renderer
from toollatch.web.replay.held import OPS_STEP, read_held
from toollatch.web.replay.runner import SessionStore
from toollatch.web.replay.session import Session
from toollatch.web.app import resource_dir
from toollatch.web.settings import FULL_SPEED, Settings
from toollatch.web.triage.sources import LoadedSource, check

from .test_large import threads_reading
from .test_live_backlog import gemini_event, one_event, whole_verdicts


def source_of(wire: bytes, dialect: str) -> LoadedSource:
    events, found = check(wire, "big.sse", AssembleConfig(), None)
    assert found == dialect
    return LoadedSource("upload", "big.sse", "big.sse", "", wire, events, dialect, None, None)


def shown(session: Session) -> list[tuple[object, ...]]:
    return [(c.call_id, c.name, c.state, c.reason) for r in session.pipeline.results() for c in r.calls]


def replayed(source: LoadedSource, **create: Any) -> tuple[Session, str]:
    """Replay ``source`` in a fresh store (``create``: its options) until it ends (60 s at
    most); the session and the name of the event loop's thread."""
    settings = Settings()

    async def run() -> tuple[Session, str]:
        store = SessionStore(settings, Renderer(resource_dir("templates"), settings))
        session = store.create(source, **create)
        deadline = time.monotonic() + 60
        while not session.status.done and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await store.shutdown()
        return session, threading.current_thread().name

    return asyncio.run(run())


@pytest.mark.parametrize(("dialect", "wire", "total"), [("openai-chat", one_event(6000), 6000), ("gemini", gemini_event(20000), 20000)])
def test_a_replay_reads_a_large_event_in_a_worker_thread_and_follows_its_first_calls(dialect: str, wire: bytes, total: int, monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(wire) > LARGE_PAYLOAD_CHARS
    source = source_of(wire, dialect)  # the upload's dry run (a worker thread's, served)
    threads = threads_reading(monkeypatch)
    session, loop_thread = replayed(source, speed=FULL_SPEED)
    assert session.status.value == "finished" and threads and loop_thread not in threads
    keep = CALLS_FOLLOWED
    whole = whole_verdicts(wire, dialect)
    calls = shown(session)
    assert len(whole) == total and len(calls) == keep and len(session.cards) == keep
    assert [c[1:] for c in calls] == [w[1:] for w in whole[:keep]]
    assert session.pipeline.untold == total - keep == session.to_json()["untold_calls"]  # type: ignore[attr-defined]
    assert session.notice and f"{total - keep} calls are not assembled here" in session.notice


def test_stepping_by_hand_and_back_over_a_large_event_gives_the_same_state() -> None:
    wire = one_event(6000)

    async def run() -> tuple[list[Any], list[Any]]:
        settings = Settings()
        store = SessionStore(settings, Renderer(resource_dir("templates"), settings))
        session = store.create(source_of(wire, "openai-chat"), autoplay=False)
        store.step(session, 1)  # stops in front of the large event: read in a worker thread, then fed
        deadline = time.monotonic() + 60
        while session.position < 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        first = shown(session)
        store.seek(session, session.total)
        while not session.status.done and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        end = shown(session)
        store.back(session)  # rebuilt from the start: the large event read again
        while session.position != session.total - 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        while session.seek_target is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        again = shown(session)
        await store.shutdown()
        assert len(first) == CALLS_FOLLOWED and [c[0] for c in again] == [c[0] for c in end]
        return first, end

    first, end = asyncio.run(run())
    assert [c[0] for c in first] == [c[0] for c in end]


def test_a_read_events_ops_are_applied_a_part_a_step_and_the_event_counted_after_the_last() -> None:
    wire = one_event(8000)
    assert len(wire) > LARGE_PAYLOAD_CHARS
    whole, _ = replayed(source_of(wire, "openai-chat"), speed=FULL_SPEED)

    async def run() -> tuple[Session, list[int]]:
        settings = Settings()
        store = SessionStore(settings, Renderer(resource_dir("templates"), settings))
        session = store.create(source_of(wire, "openai-chat"), autoplay=False)
        while session.held.event is None:  # slices of input read, then a stop in front of the large event
            assert session.step(1, sliced=True) == 0 and session.position == 0
        await read_held(session)  # read in a worker thread
        assert session.held.read is not None
        cards: list[int] = []
        while session.position == 0:  # each step applies one part of its ops
            assert session.step(1, sliced=True) in (0, 1)
            cards.append(len(session.cards))
        session.step(session.total, sliced=True)
        await store.shutdown()
        return session, cards

    session, cards = asyncio.run(run())
    assert len(cards) >= CALLS_FOLLOWED // OPS_STEP  # the kept calls' ops took several steps
    grown = [b - a for a, b in zip([0, *cards], cards)]
    assert max(grown) <= OPS_STEP and cards[-1] == CALLS_FOLLOWED
    assert session.status.value == "finished" and shown(session) == shown(whole)


def test_a_replay_reads_a_large_event_stream_frame_in_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from .test_eventstream import event_frame

    value = "v" * (LARGE_PAYLOAD_CHARS + 10)
    wire = b"".join([
        event_frame("messageStart", {"role": "assistant"}),
        event_frame("contentBlockStart", {"start": {"toolUse": {"toolUseId": "t1", "name": "write"}}, "contentBlockIndex": 0}),
        event_frame("contentBlockDelta", {"delta": {"toolUse": {"input": '{"text": "' + value + '"}'}}, "contentBlockIndex": 0}),
        event_frame("contentBlockStop", {"contentBlockIndex": 0}),
        event_frame("messageStop", {"stopReason": "tool_use"}),
    ])
    source = source_of(wire, "bedrock-converse")
    threads = threads_reading(monkeypatch)
    session, loop_thread = replayed(source, speed=FULL_SPEED)
    assert session.status.value == "finished" and threads and loop_thread not in threads
    whole = Pipeline(name="whole", config=session.config)  # the dashboard's limits: the call is too large for them
    for event in read_capture(wire):
        whole.feed(event)
    whole.close()
    assert shown(session) == [(c.call_id, c.name, c.state, c.reason) for r in whole.results() for c in r.calls]
    assert [c[:3] for c in shown(session)] == [("t1", "write", CallState.FAILED)]


def test_the_first_event_counted_after_its_last_part_renders_the_status_and_back() -> None:
    """The position moves when a read event's last part is applied: the status bar (its
    count) and the controls (◀ Back, possible from the first event on) are rendered again."""
    wire = one_event(6000)
    assert len(wire) > LARGE_PAYLOAD_CHARS

    async def run() -> tuple[int, bool, bool]:
        settings = Settings()
        store = SessionStore(settings, Renderer(resource_dir("templates"), settings))
        session = store.create(source_of(wire, "openai-chat"), autoplay=False)
        while session.held.event is None and not session.status.done:
            session.step(1, sliced=True)
        await read_held(session)
        session.step(1, sliced=True)  # fed: its ops wait in parts
        assert session.held.parts_left() and session.position == 0
        while session.held.parts_left():
            session.take_changes()  # each step's changes flushed, as the runner does
            session.step(1, sliced=True)
        changes = session.take_changes()
        await store.shutdown()
        return session.position, changes.controls, changes.status

    position, controls, status = asyncio.run(run())
    assert position == 1 and controls and status


def test_the_status_names_the_event_being_applied_in_parts() -> None:
    """Paused between two parts of a read event, the status bar says that the next event is
    being applied (how many of its ops), as its calls' cards already show; once its last
    part is applied it is counted, and the note goes."""
    wire = one_event(6000)

    async def run() -> tuple[list[str], str]:
        settings = Settings()
        renderer = Renderer(resource_dir("templates"), settings)
        store = SessionStore(settings, renderer)
        session = store.create(source_of(wire, "openai-chat"), autoplay=False)
        while session.held.event is None and not session.status.done:
            session.step(1, sliced=True)
        await read_held(session)
        session.step(1, sliced=True)  # fed: its ops wait in parts
        notes: list[str] = []
        while session.held.parts_left():
            html = renderer.page("partials/_status.html", s=session, oob=False)
            notes.append(" ".join(html[html.index("progress-text") : html.index("</progress>")].split()))
            session.step(1, sliced=True)
        html = renderer.page("partials/_status.html", s=session, oob=False)
        await store.shutdown()
        return notes, html

    notes, after = asyncio.run(run())
    assert len(notes) >= 2
    assert all("event <strong>0</strong> of" in n and "event 1 being applied" in n for n in notes)
    done = [int(n.split("being applied (")[1].split(" of ")[0].replace(",", "")) for n in notes]
    assert done == sorted(done) and done[-1] > 0 and len(set(done)) == len(done)
    assert "being applied" not in after and "event <strong>1</strong> of" in after
