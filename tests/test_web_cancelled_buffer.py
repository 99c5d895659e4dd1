"""A call cancelled mid-stream (a user stop, a client that disconnected) whose buffer had
already stopped being JSON says so beside CANCELLED, by offset only, never by text."""

from __future__ import annotations

from toollatch.demo.demos import DEMOS
from toollatch.web.triage.breakpoint import would_have_failed

from .test_web_app import make_client
from .test_web_summary import text_of

WOULD = "the buffer would have failed: invalid JSON at byte 90"


def cancelled_before_the_end(client, demo: str) -> str:  # type: ignore[no-untyped-def]
    sid = str(client.post("/api/sessions", json={"demo": demo, "autoplay": False}).json()["id"])
    client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": str(DEMOS[demo].events - 1)})
    client.post(f"/sessions/{sid}/control", data={"action": "cancel"})
    assert client.get(f"/api/sessions/{sid}").json()["status"] == "cancelled"
    return sid


def test_a_cancelled_call_shows_what_its_buffer_would_have_done() -> None:
    with make_client() as client:
        sid = cancelled_before_the_end(client, "openai-invalid")
        doc = client.get(f"/api/sessions/{sid}").json()
        assert doc["calls"][0]["state"] == "cancelled"
        page = text_of(client.get(f"/sessions/{sid}").text)
        assert f"CANCELLED — {WOULD}" in page
        assert "broke in fragment" in page and "at byte 90" in page
        assert doc["summary"] == f"1 of 1 call CANCELLED — {WOULD}"


def test_a_cancelled_call_with_a_sound_buffer_says_nothing_more() -> None:
    with make_client() as client:
        sid = cancelled_before_the_end(client, "openai-single")
        page = text_of(client.get(f"/sessions/{sid}").text)
        assert "would have failed" not in page
        assert client.get(f"/api/sessions/{sid}").json()["summary"] == "1 of 1 call CANCELLED"


def test_would_have_failed_names_only_an_offset() -> None:
    assert would_have_failed({"kind": "cut_off", "text": {"kind": "invalid", "byte_offset": 7, "fragment_index": 0, "expected": "value"}}) == (
        "the buffer would have failed: invalid JSON at byte 7"
    )
    assert would_have_failed({"kind": "cut_off", "text": {"kind": "incomplete", "depth": 1, "expected": "value"}}) is None
    assert would_have_failed({"kind": "invalid", "byte_offset": 7}) is None
    assert would_have_failed(None) is None


def test_a_replays_timeline_says_its_time_is_virtual() -> None:
    from .test_web_summary import finished

    with make_client() as client:
        sid = finished(client, "openai-invalid")
        page = client.get(f"/sessions/{sid}").text
        times = [t for t in text_of(page).split() if t.startswith("+")]
        assert times and "virtual +" in text_of(page)
        assert 'class="virtual" title="Virtual time:' in page


def test_a_client_that_disconnects_after_the_buffer_broke_sees_both() -> None:
    from toollatch.core.config import AssembleConfig
    from toollatch.web.live.session import LiveSession, LiveSource
    from toollatch.web.pages.summary import session_summary
    from toollatch.web.triage.diagnosis import card_diagnosis

    events = [e + b"\n\n" for e in DEMOS["openai-invalid"].wire.split(b"\n\n") if e.strip()]
    last_fragment = max(i for i, e in enumerate(events) if b'"arguments"' in e)
    source = LiveSource("mock/v1/chat/completions", upstream="mock", endpoint="/v1/chat/completions", dialect="openai-chat", request={"model": "invalid", "stream": True})
    session = LiveSession("s", source, AssembleConfig())
    source.http_status, source.content_type = 200, "text/event-stream"
    session.feed_bytes(b"".join(events[: last_fragment + 1]))  # every fragment, not the end
    session.cancel("client disconnected")
    [card] = session.cards.values()
    assert card.view.state.value == "cancelled"
    dx = card_diagnosis(session, card)
    assert dx is not None and dx["would_have_failed"] == WOULD
    assert session_summary(session) == f"1 of 1 call CANCELLED — {WOULD}"
