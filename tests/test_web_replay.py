"""Replay controls (``web/replay/runner.py``): pacing, speed, step back, seek, long seeks.

Stepping back rebuilds the state by replaying from the start; since the pipeline is
deterministic and its clock virtual, the result must equal a session that was simply
stepped to the same event.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from toollatch.core.config import AssembleConfig
from toollatch.demo.demos import DEMOS
from toollatch.demo.stress import stress_demo
from toollatch.web.replay.runner import FULL_SPEED_BATCH, MAX_TICKS_PER_SECOND, SYNC_SEEK_EVENTS, pace
from toollatch.web.replay.session import Session, Status
from toollatch.web.settings import FULL_SPEED, parse_speed, speed_label
from toollatch.web.triage.sources import from_demo

from .test_web_app import WS_BASE, VirtualTime, make_client
from .test_web_fanout import make_store, until
from .test_web_live import DONE, control, start


def state(session: Session) -> dict[str, Any]:
    """What a viewer could see, without the session id and replay status."""
    doc = session.to_json()
    return {k: doc[k] for k in ("position", "streams", "calls", "verdicts", "quirks")}


def stepped(name: str, events: int) -> Session:
    """A fresh session of demo ``name`` fed ``events`` events, for comparison."""
    session = Session("ref", from_demo(DEMOS[name]), AssembleConfig(), 12.0)
    session.step(events)
    return session


# ------------------------------------------------------------------ pacing and speed


def test_pace_ticks_at_most_20_times_a_second() -> None:
    assert pace(12) == pytest.approx(1 / 12)
    assert pace(0.25) == 4.0
    assert pace(240) == pytest.approx(1 / MAX_TICKS_PER_SECOND)
    assert pace(100_000) == pytest.approx(1 / MAX_TICKS_PER_SECOND)


@pytest.mark.parametrize(("raw", "speed"), [("max", math.inf), ("MAX", math.inf), ("0.25", 0.25), ("20", 20.0), (2, 2.0), ("0.1", None), ("21", None), ("nan", None), ("x", None), (True, None), (None, None)])
def test_parse_speed(raw: object, speed: float | None) -> None:
    assert parse_speed(raw) == speed


def test_speed_labels() -> None:
    assert [speed_label(s) for s in (0.25, 1.0, 20.0, FULL_SPEED)] == ["0.25×", "1×", "20×", "max"]


def test_speed_multiplies_the_base_rate_and_leaves_timelines_alone() -> None:
    with make_client() as client:
        slow = start(client, "openai-single", rate=12)
        fast = start(client, "openai-single", rate=12)
        client.post(f"/sessions/{fast}/control", data={"action": "speed", "speed": "20"})
        for sid in (slow, fast):
            for _ in range(DEMOS["openai-single"].events):
                control(client, sid, "step")
        one, two = (client.get(f"/api/sessions/{sid}").json() for sid in (slow, fast))
    assert one["speed"] == 1.0 and one["effective_rate"] == 12.0
    assert two["speed"] == 20.0 and two["effective_rate"] == 240.0
    assert one["calls"] == two["calls"], "virtual time follows the base rate, not the speed"


def test_speed_control_accepts_max_clamps_out_of_range_and_refuses_junk() -> None:
    with make_client() as client:
        sid = start(client, "openai-single")
        client.post(f"/sessions/{sid}/control", data={"action": "speed", "speed": "max"})
        doc = client.get(f"/api/sessions/{sid}").json()
        assert doc["speed"] == "max" and doc["effective_rate"] is None
        page = client.get(f"/sessions/{sid}").text
        assert '<option value="max" selected>max</option>' in page
        assert 'data-speed="max"' in page
        assert client.post(f"/sessions/{sid}/control", data={"action": "speed", "speed": "fast"}).status_code == 400
        assert client.get(f"/api/sessions/{sid}").json()["speed"] == "max"
        client.post(f"/sessions/{sid}/control", data={"action": "speed", "speed": "50"})
        assert client.get(f"/api/sessions/{sid}").json()["speed"] == 20.0
        page = client.get(f"/sessions/{sid}").text
    assert '<option value="20" selected>20×</option>' in page
    assert "Speed 50× is out of range (0.25× … 20×, or max); using 20×." in page


def test_api_accepts_max_rate_and_speed() -> None:
    with make_client() as client:
        created = client.post("/api/sessions", json={"demo": "openai-single", "rate": "max", "autoplay": False})
        assert created.status_code == 201 and created.json()["speed"] == "max"
        created = client.post("/api/sessions", json={"demo": "openai-single", "speed": 5, "autoplay": False})
        assert created.json()["speed"] == 5.0
        assert client.post("/api/sessions", json={"demo": "openai-single", "speed": 100}).status_code == 400
        assert client.post("/api/sessions", json={"demo": "openai-single", "rate": "fast"}).status_code == 400


def test_start_form_offers_full_speed() -> None:
    with make_client() as client:
        assert '<option value="max">full speed (max)</option>' in client.get("/").text
        response = client.post("/sessions", data={"kind": "demo", "name": "canary", "rate": "max"}, follow_redirects=False)
        doc = client.get("/api" + response.headers["location"]).json()
    assert doc["speed"] == "max" and doc["rate"] == 12.0


def test_full_speed_replay_delivers_the_final_state_in_few_frames() -> None:
    demo = DEMOS["openai-oversized"]
    with make_client() as client:
        sid = start(client, "openai-oversized")
        client.post(f"/sessions/{sid}/control", data={"action": "speed", "speed": "max"})
        with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
            frames = [ws.receive_text()]
            control(client, sid, "play")
            while not DONE.search(frames[-1]):
                frames.append(ws.receive_text())
    assert len(frames) <= 4 < demo.events
    assert 'data-state="failed"' in frames[-1] and "arguments_exceed_max_bytes" in frames[-1]


# ------------------------------------------------------------------ back and seek


@pytest.mark.parametrize("name", ["openai-parallel", "anthropic-parallel", "canary"])
def test_back_rebuilds_exactly_the_previous_state(name: str) -> None:
    with make_client() as client:
        sid = start(client, name)
        for _ in range(25):
            control(client, sid, "step")
        control(client, sid, "back")
        doc = client.get(f"/api/sessions/{sid}").json()
    assert doc["status"] == "paused" and doc["position"] == 24
    reference = stepped(name, 24).to_json()
    assert {k: doc[k] for k in ("streams", "calls", "verdicts")} == {k: reference[k] for k in ("streams", "calls", "verdicts")}


def test_back_from_the_end_reopens_the_calls() -> None:
    demo = DEMOS["openai-single"]
    with make_client() as client:
        sid = start(client, "openai-single")
        for _ in range(demo.events):
            control(client, sid, "step")
        assert client.get(f"/api/sessions/{sid}").json()["status"] == "finished"
        control(client, sid, "back")
        doc = client.get(f"/api/sessions/{sid}").json()
        assert doc["status"] == "paused" and doc["position"] == demo.events - 1
        control(client, sid, "back")  # before the finish_reason chunk: the stream has not ended
        doc = client.get(f"/api/sessions/{sid}").json()
    assert doc["position"] == demo.events - 2
    assert [c["state"] for c in doc["calls"]] == ["open"]
    assert doc["verdicts"] == [] and doc["streams"][0]["calls"][0]["arguments"] is None


def test_back_over_the_scripted_cancel_and_forward_again() -> None:
    demo = DEMOS["openai-cancel"]
    assert demo.cancel_after is not None
    with make_client() as client:
        sid = start(client, "openai-cancel")
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": str(demo.events)})
        doc = client.get(f"/api/sessions/{sid}").json()
        assert doc["status"] == "cancelled" and doc["position"] == demo.cancel_after
        control(client, sid, "back")
        assert client.get(f"/api/sessions/{sid}").json()["calls"][0]["state"] == "open"
        control(client, sid, "step")
        doc = client.get(f"/api/sessions/{sid}").json()
    assert doc["status"] == "cancelled" and doc["calls"][0]["state"] == "cancelled"


def test_seek_back_and_forth_and_clamp() -> None:
    name = "anthropic-parallel"
    total = DEMOS[name].events
    with make_client() as client:
        sid = start(client, name)
        for position, expected in ((40, 40), (10, 10), (10, 10), (9999, total), (0, 0), (-1, 0)):
            response = client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": str(position)}, headers={"HX-Request": "true"})
            assert response.status_code == 204
            doc = client.get(f"/api/sessions/{sid}").json()
            assert doc["position"] == expected
            assert {k: doc[k] for k in ("calls", "verdicts")} == {k: stepped(name, expected).to_json()[k] for k in ("calls", "verdicts")}
        assert client.get(f"/api/sessions/{sid}").json()["status"] == "paused"
        assert "Event -1 is out of range" in client.get(f"/sessions/{sid}").text  # clamped, with a notice
        for bad in ("x", "", "1.5"):
            assert client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": bad}).status_code == 400


def test_seek_while_playing_keeps_playing_and_sends_a_reset_frame() -> None:
    demo = DEMOS["anthropic-parallel"]

    async def scenario(time: VirtualTime) -> None:
        store = make_store(time, replay_rate=12)
        session = store.create(from_demo(demo), autoplay=False)
        viewer = store.subscribe(session)
        await viewer.get()
        store.play(session)
        await until(time, lambda: session.position >= 30)
        assert session.status is Status.PLAYING
        while len(viewer):  # frames of the replay so far
            await viewer.get()
        store.seek(session, 3)
        assert session.status is Status.PLAYING and session.position == 3, "still playing, from event 3"
        frames = [await viewer.get()]
        while "innerHTML:#verdict-log" not in frames[-1]:  # the rebuilt state replaces the page's
            frames.append(await viewer.get())
        assert "No tool calls yet" in frames[-1] and "stream: running" in frames[-1]
        await until(time, lambda: session.status.done)
        assert session.status is Status.FINISHED

    asyncio.run(scenario(VirtualTime()))


def test_toggle_plays_and_pauses() -> None:
    async def scenario(time: VirtualTime) -> None:
        store = make_store(time)
        session = store.create(from_demo(DEMOS["openai-cancel"]), autoplay=False)
        store.toggle(session)
        assert session.status is Status.PLAYING
        await until(time, lambda: session.position >= 3)
        store.toggle(session)
        assert session.status is Status.PAUSED
        position = session.position
        await time.sleep(5)
        assert session.position == position, "the runner stopped"

    asyncio.run(scenario(VirtualTime()))


def test_a_long_seek_runs_in_chunks_and_holds_renders_back() -> None:
    demo = stress_demo(SYNC_SEEK_EVENTS * 3, 4)

    async def scenario(time: VirtualTime) -> None:
        store = make_store(time)
        session = store.create(from_demo(demo), autoplay=False)
        viewer = store.subscribe(session)
        await viewer.get()  # the initial full state
        store.seek(session, SYNC_SEEK_EVENTS * 2)
        assert session.seek_target == SYNC_SEEK_EVENTS * 2 and session.position < session.seek_target, "not done inline"
        store.seek(session, SYNC_SEEK_EVENTS * 2 + 7)  # a newer seek replaces the running one
        positions = []
        while session.seek_target is not None:
            positions.append(session.position)
            assert not len(viewer), "nothing is rendered while a seek rebuilds"
            await asyncio.sleep(0)
        assert len(set(positions)) > 2, "the seek yielded to the event loop between chunks"
        await until(time, lambda: len(viewer) > 0)
        frame = await viewer.get()
        assert f'data-position="{SYNC_SEEK_EVENTS * 2 + 7}"' in frame and 'innerHTML:#verdict-log' in frame
        assert session.status is Status.PAUSED
        reference = Session("ref", from_demo(demo), AssembleConfig(), session.rate)
        reference.step(SYNC_SEEK_EVENTS * 2 + 7)
        assert state(session) == state(reference)

    asyncio.run(scenario(VirtualTime()))


def test_full_speed_batches_yield_between_them() -> None:
    demo = stress_demo(FULL_SPEED_BATCH * 4, 2)

    async def scenario(time: VirtualTime) -> None:
        store = make_store(time)
        session = store.create(from_demo(demo), speed=FULL_SPEED, autoplay=False)
        store.play(session)
        seen = []
        while not session.status.done:
            seen.append(session.position)
            await asyncio.sleep(0)
        assert len(set(seen)) >= 4, "other tasks ran between batches"

    asyncio.run(scenario(VirtualTime()))


def test_restart_keeps_the_speed_and_starts_over() -> None:
    with make_client() as c:
        sid = start(c, "openai-parallel")
        for _ in range(20):
            control(c, sid, "step")
        c.post(f"/sessions/{sid}/control", data={"action": "speed", "speed": "max"})
        control(c, sid, "restart")
        doc = c.get(f"/api/sessions/{sid}").json()
    assert doc["status"] in ("playing", "finished") and doc["speed"] == "max"


def record_folds(session: Session) -> list[str]:
    """The kind of every assembly event ``session`` folds from now on, in order (its
    ``_apply`` wrapped; live sessions too)."""
    folded: list[str] = []
    apply = session._apply

    def counting(event: Any) -> None:
        folded.append(event.kind)
        apply(event)

    session._apply = counting  # type: ignore[method-assign]
    return folded


def test_a_step_of_many_events_folds_each_calls_counts_once_and_equals_single_steps() -> None:
    demo = stress_demo(events=400, calls=3)
    batched = Session("batched", from_demo(demo), AssembleConfig(), 12.0)
    folded = record_folds(batched)
    batched.step(300)  # hundreds of fragments of three open calls, no verdict yet
    assert folded.count("fragment") == 3
    one_by_one = Session("single", from_demo(demo), AssembleConfig(), 12.0)
    for _ in range(300):
        one_by_one.step(1)
    assert state(batched) == state(one_by_one)  # the same counts on every card
    assert [c.view for c in batched.cards.values()] == [c.view for c in one_by_one.cards.values()]
