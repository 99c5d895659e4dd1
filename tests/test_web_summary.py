"""A finished session says how it went in one line, codes carry plain words, the session list
shows verdict chips, and a call's error text is shown once on its page."""

from __future__ import annotations

import re
import time
from typing import Any

from starlette.testclient import TestClient

from toollatch.demo.demos import DEMOS
from toollatch.web.triage.breakpoint import describe
from toollatch.web.pages.glossary import plain, short_reason
from toollatch.web.pages.summary import session_summary

from .test_web_app import make_client

INVALID_REASON = "invalid_json: Expecting property name enclosed in double quotes at byte 90"


def finished(client: TestClient, demo: str, *, finish: bool = True) -> str:
    sid = str(client.post("/api/sessions", json={"demo": demo, "autoplay": False}).json()["id"])
    if finish:
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": str(DEMOS[demo].events)})
        assert client.get(f"/api/sessions/{sid}").json()["status"] in ("finished", "cancelled")
    return sid


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&#39;", "'").replace("&#34;", '"').replace("&quot;", '"')


def test_a_finished_session_has_a_one_line_summary() -> None:
    with make_client() as client:
        invalid = finished(client, "openai-invalid")
        parallel = finished(client, "anthropic-parallel")
        running = finished(client, "openai-single", finish=False)
        assert 'id="summary"' in client.get(f"/sessions/{invalid}").text
        page = text_of(client.get(f"/sessions/{invalid}").text)
        assert "1 of 1 call FAILED: invalid JSON at byte 90" in page
        assert "2 of 2 calls COMMITTED" in text_of(client.get(f"/sessions/{parallel}").text)
        assert 'id="summary"' not in client.get(f"/sessions/{running}").text
        assert client.get(f"/api/sessions/{invalid}").json()["summary"] == "1 of 1 call FAILED: invalid JSON at byte 90"
        assert client.get(f"/api/sessions/{running}").json()["summary"] is None


def test_the_full_error_text_is_shown_once_on_the_page() -> None:
    with make_client() as client:
        sid = finished(client, "openai-invalid")
        assert client.get(f"/api/sessions/{sid}").json()["calls"][0]["reason"] == INVALID_REASON
        page = client.get(f"/sessions/{sid}").text + client.get(f"/sessions/{sid}/triage").text
        assert text_of(page).count("Expecting property name enclosed in double quotes") == 1
        # the verdict log, the error result and the results panel name it in a few words
        assert "write_note (call_qBL0GuZkUNX0EZLTv1WNSTXt) FAILED: invalid JSON at byte 90" in text_of(page)
        assert "its content the reason above" in text_of(page)
        # the JSON twin keeps every word
        doc = client.get(f"/api/sessions/{sid}").json()
        assert any(INVALID_REASON in v for v in doc["verdicts"])
        assert doc["streams"][0]["results"][0]["content"] == INVALID_REASON


def test_codes_carry_plain_words_on_the_page() -> None:
    with make_client() as client:
        sid = finished(client, "openai-invalid")
        page = text_of(client.get(f"/sessions/{sid}").text)
        assert "invalid_json" in page and "(the arguments are not valid JSON)" in page
        triage = text_of(client.get(f"/sessions/{sid}/triage").text)
        assert "count_brackets (runs a call when its brackets balance)" in triage
        truncated = finished(client, "anthropic-truncated")
        page = text_of(client.get(f"/sessions/{truncated}").text)
        assert "Diagnosis: cut off: the stream ended (truncated) after" in page and "Diagnosis: cut_off" not in page


def test_the_session_list_shows_verdict_chips() -> None:
    with make_client() as client:
        finished(client, "openai-invalid")
        finished(client, "anthropic-parallel")
        listing = client.get("/partials/sessions").text
        assert '<span class="chip chip-failed">1 FAILED</span>' in listing
        assert '<span class="chip chip-committed">2 COMMITTED</span>' in listing
        assert listing.count('class="chip ') == 2


def test_short_reasons_and_lookups() -> None:
    assert short_reason(INVALID_REASON) == "invalid JSON at byte 90"
    assert short_reason("stream_truncated: input ended before message_stop") == "stream cut off"
    assert short_reason("something_new: x") == "something_new"
    assert plain("role_repeated", "quirk") and plain("merge_by_position") and plain("cut_off", "diagnosis")
    assert plain("role_repeated", "reason") == "" and plain(None) == ""


def test_a_summary_names_several_reasons_and_counts_the_rest() -> None:
    from toollatch.core.model import CallState

    class View:
        def __init__(self, state: CallState, reason: str | None) -> None:
            self.state, self.reason, self.key = state, reason, None

    class Card:
        def __init__(self, state: CallState, reason: str | None = None) -> None:
            self.view, self.stream = View(state, reason), 0

    class Status:
        done = True

    class Pipeline:
        streams: list[Any] = []  # no outcomes: nothing to say about a cancelled buffer

    class Fake:
        status, error, pipeline = Status(), None, Pipeline()
        cards: dict[str, Any] = {}

    fake = Fake()
    fake.cards = {str(i): c for i, c in enumerate([
        Card(CallState.FAILED, "invalid_json: x at byte 3"), Card(CallState.FAILED, "unknown_tool: 'f'"),
        Card(CallState.FAILED, "schema_invalid: /a"), Card(CallState.CANCELLED, "cancelled"), Card(CallState.COMMITTED),
    ])}
    assert session_summary(fake) == (  # type: ignore[arg-type]
        "3 of 5 calls FAILED: invalid JSON at byte 3; unknown tool; and 1 more · 1 CANCELLED · 1 COMMITTED"
    )


def test_describe_a_cut_off_call() -> None:
    text = describe({"kind": "cut_off", "stream_end": "truncated", "bytes": 1200, "fragments": 7, "text": {"kind": "complete"}})
    assert text == "cut off: the stream ended (truncated) after 1,200 bytes in 7 fragments of this call; the text so far is complete JSON"


def test_a_finished_live_session_has_its_summary_too(tmp_path: Any) -> None:
    from toollatch.web import Settings, create_app

    with TestClient(create_app(Settings(data_dir=tmp_path, mock_delay=0.0)), base_url="http://127.0.0.1") as client:
        response = client.post("/proxy/anthropic/v1/messages", json={"model": "parallel", "stream": True})
        assert response.status_code == 200
        sid = client.get("/api/live").json()["sessions"][0]["id"]
        for _ in range(200):
            if client.get(f"/api/sessions/{sid}").json()["status"] == "finished":
                break
            time.sleep(0.02)
        page = text_of(client.get(f"/sessions/{sid}").text)
        assert "2 of 2 calls COMMITTED" in page
        assert '<span class="chip chip-committed">2 COMMITTED</span>' in client.get("/partials/sessions").text


def test_an_upstream_error_is_not_repeated_by_a_summary(tmp_path: Any) -> None:
    from toollatch.web import Settings, create_app

    with TestClient(create_app(Settings(data_dir=tmp_path, mock_delay=0.0)), base_url="http://127.0.0.1") as client:
        assert client.post("/proxy/openai/v1/chat/completions?status=429", json={"model": "single", "stream": True}).status_code == 429
        sid = client.get("/api/live").json()["sessions"][0]["id"]
        for _ in range(200):
            if client.get(f"/api/sessions/{sid}").json()["status"] == "error":
                break
            time.sleep(0.02)
        status = client.get(f"/sessions/{sid}").text.split('id="status"', 1)[1].split("</div>", 1)[0]
        assert text_of(status).count("The mock answers 429 as asked") == 1 and 'id="summary"' not in status
