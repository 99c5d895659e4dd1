"""The session's JSON twin is paged by call: bounded items per page, totals over all calls."""

from __future__ import annotations

import json

from toollatch import read_capture
from toollatch.core.config import DEFAULT_CONFIG
from toollatch.web.replay.session import Session
from toollatch.web.settings import Settings
from toollatch.web.triage.sources import LoadedSource

from .test_web_app import make_client


def many_calls(count: int, valid: int) -> bytes:
    """One OpenAI Chat chunk of ``count`` calls (the first ``valid`` with JSON arguments), then the end."""
    entries = [
        {"index": i, "id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": '{"a":1}' if i < valid else "{"}}
        for i in range(count)
    ]
    docs = [{"choices": [{"index": 0, "delta": {"tool_calls": entries}}]}, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    return ("".join(f"data: {json.dumps(d)}\n\n" for d in docs) + "data: [DONE]\n\n").encode()


def finished(data: bytes) -> Session:
    source = LoadedSource("upload", "many.sse", "many.sse", "many.sse", data, len(read_capture(data)), None, None, None)
    session = Session("s1", source, DEFAULT_CONFIG, 10.0)
    session.step(source.count)
    assert session.status.done
    return session


def test_a_page_holds_the_window_of_calls_and_the_totals_of_all() -> None:
    session = finished(many_calls(30, valid=10))
    doc = session.to_json(offset=5, limit=10)
    assert [c["call_id"] for c in doc["calls"]] == [f"c{i}" for i in range(5, 15)]
    assert doc["page"] == {"offset": 5, "limit": 10, "total": 30, "states": {"committed": 10, "failed": 20}}
    (stream,) = doc["streams"]
    assert [c["call_id"] for c in stream["calls"]] == [f"c{i}" for i in range(5, 15)]
    assert [r["tool_call_id"] for r in stream["results"]] == [f"c{i}" for i in range(10, 15)], "the results owed by the window's calls"
    assert stream["end"] == "complete"


def test_a_session_within_one_page_has_its_whole_documents() -> None:
    session = finished(many_calls(12, valid=4))
    doc = session.to_json()
    whole = session.pipeline.results()[0].to_json()
    assert doc["streams"][0] == whole
    assert len(doc["calls"]) == 12 and doc["page"]["total"] == 12


def test_the_last_page_and_out_of_range_offsets_are_clamped() -> None:
    session = finished(many_calls(30, valid=30))
    assert [c["call_id"] for c in session.to_json(offset=25, limit=10)["calls"]] == [f"c{i}" for i in range(25, 30)]
    past = session.to_json(offset=99, limit=10)
    assert past["calls"] == [] and past["page"]["offset"] == 30 and past["page"]["total"] == 30


def test_state_counts_follow_every_transition() -> None:
    session = finished(many_calls(40, valid=25))
    counts = session.state_counts()
    assert counts == {"committed": 25, "failed": 15}
    assert sum(counts.values()) == len(session.cards)


def test_the_api_pages_and_refuses_bad_page_values(tmp_path) -> None:
    with make_client(Settings(data_dir=tmp_path)) as client:
        response = client.post("/sessions/upload", files={"file": ("many.sse", many_calls(30, valid=30), "text/event-stream")}, data={"rate": "max"}, follow_redirects=False)
        sid = response.headers["location"].rsplit("/", 1)[-1]
        for _ in range(200):
            doc = client.get(f"/api/sessions/{sid}").json()
            if doc["status"] == "finished":
                break
        page = client.get(f"/api/sessions/{sid}?offset=20&limit=4").json()
        assert [c["call_id"] for c in page["calls"]] == ["c20", "c21", "c22", "c23"]
        assert page["page"]["total"] == 30 and page["page"]["states"] == {"committed": 30}
        for bad in ("limit=0", "limit=abc", "offset=-1", "limit=999999", "limit=%D9%A3", "offset=%EF%BC%97"):  # ٣, ７: not 0-9
            answer = client.get(f"/api/sessions/{sid}?{bad}")
            assert answer.status_code == 400 and bad.split("=")[0] in answer.json()["error"]
