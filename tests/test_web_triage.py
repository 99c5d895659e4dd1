"""Triage on the session page: diagnoses, token classes around a break, Reveal text, the
naive-client lane, exports (redacted reproducer, JSON report, Markdown) and compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from toollatch.wire.capture import read_capture
from toollatch.demo.demos import CANARY_SECRET, DEMOS
from toollatch.core.pipeline import assemble_events
from toollatch.web.triage.breakpoint import break_context, call_fragments, char_class, describe, tokens
from toollatch.web.triage.compare import compare

from .conftest import CAPTURES, CASES, require_shared, tools_file
from .test_web_app import make_client

B11 = CASES / "b11-parsable-early-then-more.sse"  # parses early, then more text: invalid_json
B07 = CASES / "b07-finish-tool-calls-but-json-unterminated.sse"  # incomplete: depth 1
ALL_INPUTS = sorted(p for folder in (CAPTURES, CASES) if folder.is_dir() for p in folder.rglob("*") if p.suffix in (".sse", ".jsonl"))
SCHEMA_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "required": ["zip"], "properties": {"city": {"type": "integer"}}}}}
]


def upload(client: TestClient, name: str, data: bytes, tools: bytes | None = None, *, finish: bool = True) -> str:
    files = {"file": (name, data, "text/plain")}
    if tools is not None:
        files["tools"] = ("tools.json", tools, "application/json")
    response = client.post("/sessions/upload", files=files, data={"rate": "12"}, follow_redirects=False)
    assert response.status_code == 303, response.text[:400]
    sid = response.headers["location"].rsplit("/", 1)[1]
    client.post(f"/sessions/{sid}/control", data={"action": "pause"})
    if finish:
        total = client.get(f"/api/sessions/{sid}").json()["total"]
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": str(total)})
    return sid


def doc(client: TestClient, sid: str) -> dict[str, Any]:
    return dict(client.get(f"/api/sessions/{sid}").json())


# ------------------------------------------------------------------ diagnosis units


def test_tokens_and_char_classes_never_carry_text() -> None:
    text = '{"q": "alpha", "n": 12, "ok": true} tail'
    classes = [t.cls for t in tokens(text)]
    assert classes == ["{", "key", ":", "string", ",", "key", ":", "number", ",", "key", ":", "literal", "}", "word"]
    data = text.encode()
    assert char_class(data, 0) == "'{'" and char_class(data, 2) == "letter" and char_class(data, len(data)) == "end of input"
    assert char_class(b"\x01", 0) == "control character" and char_class("é".encode(), 0) == "non-ASCII character"


def test_describe_each_diagnosis_kind() -> None:
    assert describe({"kind": "invalid", "fragment_index": 2, "byte_offset": 40, "expected": "value"}) == "broke in fragment 2 at byte 40, expected value"
    assert "depth 3" in describe({"kind": "incomplete", "depth": 3, "expected": "',' or '}'"})
    assert describe({"kind": "schema", "errors": [{"pointer": "", "keyword": "required"}, {"pointer": "/city", "keyword": "type"}]}) == (
        "schema errors at (root) (required), /city (type)"
    )


def test_break_context_is_checked_against_the_diagnosis() -> None:
    require_shared(CASES)
    events = read_capture(B11.read_bytes())
    [result] = assemble_events(events)
    call = result.calls[0]
    fragments = call_fragments(events, "openai-chat", 0, call.key)
    assert fragments is not None and len(fragments) == call.fragments
    context = break_context(fragments, call.diagnosis or {})
    assert context is not None and context.found == "'{'" and context.before[-1] == "}"
    assert break_context(fragments, {**(call.diagnosis or {}), "byte_offset": 3}) is None  # a mismatch shows nothing
    assert call_fragments(events, "openai-chat", 1, call.key) is None


# ------------------------------------------------------------------ the session page


def test_invalid_json_diagnosis_with_token_classes_and_no_text() -> None:
    require_shared(CASES)
    with make_client() as client:
        sid = upload(client, B11.name, B11.read_bytes())
        page = client.get(f"/sessions/{sid}").text
        twin = doc(client, sid)
        panel = client.get(f"/sessions/{sid}/triage").text
    assert "Diagnosis:</span> broke in fragment 1 at byte 14, expected end of input" in page
    [dx] = twin["triage"]["diagnoses"]
    assert dx["diagnosis"] == {"kind": "invalid", "fragment_index": 1, "byte_offset": 14, "expected": "end of input"}
    assert dx["context"]["before"] == ["{", "key", ":", "string", "}"] and dx["context"]["found"] == "'{'"
    assert twin["streams"][0]["calls"][0]["diagnosis"] == dx["diagnosis"]
    for text in (page, json.dumps(twin), panel):
        assert "alpha" not in text  # argument text stays hidden
    assert "Reveal text" in page and 'aria-pressed="false"' in page


def test_incomplete_diagnosis_names_the_depth() -> None:
    require_shared(CASES)
    with make_client() as client:
        sid = upload(client, B07.name, B07.read_bytes())
        page = client.get(f"/sessions/{sid}").text
        [dx] = doc(client, sid)["triage"]["diagnoses"]
    assert dx["diagnosis"]["kind"] == "incomplete" and dx["diagnosis"]["depth"] == 1
    assert "cut off at depth 1" in page and dx["context"]["found"] == "end of input"
    assert dx["context"]["before"][-1] == "unterminated string"


def test_schema_invalid_lists_every_json_pointer() -> None:
    with make_client() as client:
        sid = upload(client, "w.sse", DEMOS["openai-single"].wire, json.dumps(SCHEMA_TOOLS).encode())
        twin = doc(client, sid)
        page = client.get(f"/sessions/{sid}").text
    [dx] = twin["triage"]["diagnoses"]
    assert dx["reason"] == "schema_invalid"
    assert sorted((e["pointer"], e["keyword"]) for e in dx["diagnosis"]["errors"]) == [("/", "required"), ("/city", "type")]
    assert "schema errors at" in page and "/city (type)" in page and "/ (required)" in page
    assert "Oslo" not in page  # not committed: no argument text


def test_reveal_text_is_a_deliberate_per_session_action() -> None:
    require_shared(CASES)
    with make_client() as client:
        sid = upload(client, B11.name, B11.read_bytes())
        other = upload(client, B11.name, B11.read_bytes())
        response = client.post(f"/sessions/{sid}/reveal", data={"reveal": "on"}, follow_redirects=False)
        assert response.status_code == 303
        revealed = doc(client, sid)["triage"]["diagnoses"][0]["revealed"]
        assert revealed == {"before": '{"q": "alpha"}', "after": '{"q": "alpha", "limit": 5}'}
        assert "alpha" in client.get(f"/sessions/{sid}").text
        assert "alpha" not in client.get(f"/sessions/{other}").text  # per session
        inline = client.post(f"/sessions/{sid}/reveal", data={"reveal": "off"}, headers={"HX-Request": "true"})
        assert inline.status_code == 200 and 'id="triage"' in inline.text and "alpha" not in inline.text
        assert "revealed" not in doc(client, sid)["triage"]["diagnoses"][0]


def test_reveal_is_refused_before_the_end_and_for_demos() -> None:
    require_shared(CASES)
    with make_client() as client:
        playing = upload(client, B11.name, B11.read_bytes(), finish=False)
        client.post(f"/sessions/{playing}/control", data={"action": "seek", "position": "1"})
        assert doc(client, playing)["status"] == "paused"
        assert client.post(f"/sessions/{playing}/reveal", data={"reveal": "on"}).status_code == 409
        assert doc(client, playing)["triage"]["reveal"] == {"allowed": False, "on": False}
        demo = client.post("/api/sessions", json={"demo": "openai-invalid", "autoplay": False}).json()["id"]
        client.post(f"/sessions/{demo}/control", data={"action": "seek", "position": str(DEMOS["openai-invalid"].events)})
        assert client.post(f"/sessions/{demo}/reveal", data={"reveal": "on"}).status_code == 409
        assert client.post("/sessions/nope/reveal", data={"reveal": "on"}).status_code == 404


def test_triage_panel_waits_for_the_end_and_names_the_state_it_shows() -> None:
    require_shared(CASES)
    with make_client() as client:
        sid = upload(client, B11.name, B11.read_bytes(), finish=False)
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": "1"})
        panel = client.get(f"/sessions/{sid}/triage").text
        state = doc(client, sid)["triage"]["state"]
        assert f'data-state="{state}"' in panel and state.endswith(":open") and "hx-get" not in panel
        assert panel.count("Shown when the replay is over.") == 2
        assert doc(client, sid)["triage"]["naive_lane"] is None
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": "5"})
        panel = client.get(f"/sessions/{sid}/triage").text
        assert "Shown when the replay is over." not in panel and "would have executed" in panel
        assert 'data-state="' + doc(client, sid)["triage"]["state"] + '"' in panel


# ------------------------------------------------------------------ naive lane


def test_naive_lane_shows_bytes_for_text_the_latch_refused() -> None:
    require_shared(CASES)
    with make_client() as client:
        sid = upload(client, B11.name, B11.read_bytes())
        lane = doc(client, sid)["triage"]["naive_lane"]
        page = client.get(f"/sessions/{sid}").text
    assert {(a["strategy"], a["kind"], a["fragment"], a["bytes"], a["arguments"]) for a in lane} == {
        ("execute_when_parses", "executed", 0, 14, None),
        ("count_brackets", "executed", 0, 14, None),
    }
    assert "would have executed <code>search</code> on 14 bytes at fragment 0" in page


def test_naive_lane_shows_arguments_equal_to_the_committed_ones() -> None:
    with make_client() as client:
        sid = upload(client, "ok.sse", DEMOS["openai-single"].wire)
        twin = doc(client, sid)
    committed = twin["streams"][0]["calls"][0]["arguments"]
    lane = twin["triage"]["naive_lane"]
    assert lane and all(a["arguments"] in (None, committed) for a in lane)
    assert any(a["arguments"] == committed and not a["differs_from_latch"] for a in lane)


def test_naive_lane_reports_merges_and_renames() -> None:
    require_shared(CASES)
    with make_client() as client:
        merged = doc(client, upload(client, "b02.sse", (CASES / "b02-parallel-same-index-distinct-ids.sse").read_bytes()))
        renamed = doc(client, upload(client, "b10.sse", (CASES / "b10-name-repeated-every-chunk.sse").read_bytes()))
        page = client.get(f"/sessions/{renamed['id']}").text
    assert ("merge_by_position", "merged", "write_note") in {(a["strategy"], a["kind"], a["name"]) for a in merged["triage"]["naive_lane"]}
    assert ("concatenate_names", "renamed", "read_fileread_fileread_file") in {(a["strategy"], a["kind"], a["name"]) for a in renamed["triage"]["naive_lane"]}
    assert "would have renamed to <code>read_fileread_fileread_file</code>" in page


# ------------------------------------------------------------------ exports


def test_exports_download_without_argument_text() -> None:
    with make_client() as client:
        sid = client.post("/api/sessions", json={"demo": "canary", "autoplay": False}).json()["id"]
        reproducer = client.get(f"/sessions/{sid}/export.sse")
        report = client.get(f"/sessions/{sid}/export.report.json")
        markdown = client.get(f"/sessions/{sid}/export.md")
        page = client.get(f"/sessions/{sid}").text
    assert reproducer.headers["content-disposition"] == 'attachment; filename="canary.redacted.sse"'
    assert reproducer.headers["content-type"].startswith("text/event-stream")
    assert report.json()["streams"][0]["calls"][0]["state"] == "committed"
    assert "arguments" not in report.json()["streams"][0]["calls"][0]
    assert markdown.text.startswith("### toollatch:") and "| # | tool |" in markdown.text
    for body in (reproducer.text, report.text, markdown.text):
        assert CANARY_SECRET not in body
    assert f'href="/sessions/{sid}/export.sse"' in page and "Export redacted reproducer" in page


def test_exports_of_an_unknown_session_are_404() -> None:
    with make_client() as client:
        for suffix in ("export.sse", "export.report.json", "export.md", "triage"):
            assert client.get(f"/sessions/nope/{suffix}").status_code == 404


def _calls(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (s["end"], c["name"], c["call_id"], c["state"], (c["reason"] or "").split(":", 1)[0], c["bytes"], c["fragments"], c["diagnosis"])
        for s in report["streams"]
        for c in s["calls"]
    ]


@pytest.mark.parametrize("path", ALL_INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_exported_reproducer_reuploads_to_the_same_verdicts(path: Path) -> None:
    tools = tools_file(path)
    tools_raw = tools.read_bytes() if tools else None
    with make_client() as client:
        sid = upload(client, path.name, path.read_bytes(), tools_raw, finish=False)
        original = client.get(f"/sessions/{sid}/export.report.json").json()
        exported = client.get(f"/sessions/{sid}/export.sse")
        assert exported.status_code == 200
        name = exported.headers["content-disposition"].split('filename="', 1)[1].rstrip('"')
        again = upload(client, name, exported.content, tools_raw, finish=False)
        reimported = client.get(f"/sessions/{again}/export.report.json").json()
    assert _calls(reimported) == _calls(original)


def test_every_shared_input_is_covered() -> None:
    require_shared(CASES)
    assert len(ALL_INPUTS) >= 50


# ------------------------------------------------------------------ compare


def test_compare_two_sessions_side_by_side() -> None:
    require_shared(CASES)
    with make_client() as client:
        a = upload(client, "b11.sse", B11.read_bytes())
        b = upload(client, "b11-again.sse", B11.read_bytes())
        c = upload(client, "ok.sse", DEMOS["openai-single"].wire)
        same = client.get("/api/compare", params={"a": a, "b": b}).json()
        diff = client.get("/api/compare", params={"a": a, "b": c}).json()
        page = client.get("/compare", params={"a": a, "b": c}).text
        stored_id = doc(client, c)["source"]["stored_id"]
        by_source = client.get("/api/compare", params={"a": c, "b": stored_id}).json()
        assert client.get("/api/compare", params={"a": a, "b": "nope"}).status_code == 404
        assert client.get("/api/compare", params={"a": a}).status_code == 400
        assert client.get("/compare", params={"a": a}).status_code == 400
        assert client.get("/compare").status_code == 200
    assert same["summary"]["identical"] is True and same["summary"]["calls"] == 1
    assert diff["summary"]["identical"] is False
    [call] = diff["streams"][0]["calls"]
    assert {"name", "call_id", "verdict", "reason", "bytes", "fragments"} <= set(call["differs"])
    assert call["a"]["verdict"] == "failed" and call["b"]["verdict"] == "committed"
    assert 'class="row-differs"' in page and "≠" in page and "FAILED" in page and "COMMITTED" in page
    assert by_source["summary"]["identical"] is True and by_source["b"]["kind"] == "stored"


def test_compare_marks_quirk_differences() -> None:
    plain = assemble_events(read_capture(DEMOS["openai-single"].wire))
    quirky = assemble_events(read_capture(b": comment\n\n" + DEMOS["openai-single"].wire.replace(b"\n", b"\r\n")))
    [pair] = compare(plain, quirky)
    assert not any(c.differs for c in pair.calls)
    assert {q["quirk"] for q in pair.quirks if q["differs"]} == {"comment_line", "crlf_line_ends"}
    assert pair.differences == 2


def test_reveal_is_never_offered_for_live_streams_or_their_recordings() -> None:
    from dataclasses import replace

    from toollatch.core.config import AssembleConfig
    from toollatch.web.live.session import LiveSession, LiveSource
    from toollatch.web.replay.session import Session, Status
    from toollatch.web.triage.sources import from_demo
    from toollatch.web.triage.diagnosis import reveal_allowed, set_reveal

    live = LiveSession("l1", LiveSource("live", upstream="mock", endpoint="/v1/chat/completions", dialect=None, request=None), AssembleConfig())
    live.status = Status.FINISHED
    assert not reveal_allowed(live) and set_reveal(live, True) is False
    demo = from_demo(DEMOS["openai-invalid"])
    recording = Session("r1", replace(demo, kind="capture", name="recording abc"), AssembleConfig(), 12.0)
    recording.status = Status.FINISHED
    assert not reveal_allowed(recording)
    upload = Session("u1", replace(demo, kind="upload"), AssembleConfig(), 12.0)
    assert not reveal_allowed(upload)  # not before the replay is over
    upload.status = Status.FINISHED
    assert reveal_allowed(upload)
