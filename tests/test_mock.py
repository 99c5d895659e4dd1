"""The built-in mock provider and :mod:`toollatch.demo.mockwire`: every scenario in every dialect,
captures at their own endpoint only, provider-exact errors, pacing options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from toollatch.wire.capture import read_capture
from toollatch.demo.demos import DEMOS
from toollatch.demo.bodies import final_response
from toollatch.demo.mockwire import (
    MOCK_DIALECTS,
    rechunk,
    scenario_events,
    scenario_names,
    scenario_script,
    split_events,
)
from toollatch.wire.retell import synthesize_stream
from toollatch.core.pipeline import assemble_events
from toollatch.web.live.mock import ENDPOINTS, MockProvider, create_mock_app

SCENARIOS = scenario_names()
PATH = {dialect: path for path, dialect in ENDPOINTS.items()}


def expected(scenario: str) -> tuple[tuple[str, ...], str]:
    demo = DEMOS.get(f"openai-{scenario}") or DEMOS[scenario]
    states = tuple(e.split(":")[0] for e in demo.expected)
    # The mock serves the whole recording; the demo's scripted Stop is the replay's, not the wire's.
    return (("committed",) * len(states), "complete") if demo.cancel_after is not None else (states, demo.expected_end)


def test_every_demo_is_a_scenario() -> None:
    assert SCENARIOS == ["single", "parallel", "noargs", "oversized", "cancel", "truncated", "invalid", "canary"]


@pytest.mark.parametrize("dialect", MOCK_DIALECTS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_assembles_to_its_verdicts_in_every_dialect(scenario: str, dialect: str) -> None:
    wire = b"".join(scenario_events(scenario, dialect))  # type: ignore[arg-type]
    (result,) = assemble_events(read_capture(wire))
    states, end = expected(scenario)
    assert result.dialect == dialect
    assert tuple(c.state.value for c in result.calls) == states and result.end == end
    calls = scenario_script(scenario).calls
    assert [c.name for c in result.calls] == [c.name for c in calls]
    assert [c.fragments for c in result.calls] == [len(c.fragments) for c in calls]  # the same fragment boundaries


@pytest.mark.parametrize("name", [n for n in DEMOS if DEMOS[n].dialect in MOCK_DIALECTS])
def test_a_demo_is_served_verbatim_in_its_own_dialect(name: str) -> None:
    demo = DEMOS[name]
    scenario = name.split("-", 1)[1] if "-" in name else name
    assert b"".join(scenario_events(scenario, demo.dialect)) == demo.wire
    assert len(split_events(demo.wire)) == demo.events


def test_rechunking_keeps_every_byte_and_is_seeded() -> None:
    wire = DEMOS["openai-parallel"].wire
    pieces = rechunk(wire, seed=3)
    assert b"".join(pieces) == wire and max(map(len, pieces)) <= 64 and len(pieces) > len(split_events(wire))
    assert rechunk(wire, seed=3) == pieces and rechunk(wire, seed=4) != pieces


@pytest.mark.parametrize("dialect", MOCK_DIALECTS)
@pytest.mark.parametrize("scenario", ["single", "parallel", "noargs", "truncated"])
def test_non_streaming_bodies_retell_as_the_same_verdicts(scenario: str, dialect: str) -> None:
    doc = final_response(scenario_script(scenario), dialect)  # type: ignore[arg-type]
    (result,) = assemble_events(read_capture(synthesize_stream(dialect, doc, scenario)))  # type: ignore[arg-type]
    states, end = expected(scenario)
    assert tuple(c.state.value for c in result.calls) == states and result.end == end


@pytest.mark.parametrize(
    ("dialect", "reason", "end"),
    [
        ("openai-chat", "content_filter", "error"), ("openai-chat", "length", "truncated"), ("openai-chat", "stop", "complete"),
        ("anthropic", "refusal", "error"), ("anthropic", "max_tokens", "truncated"), ("anthropic", "end_turn", "complete"),
        ("openai-responses", "content_filter", "error"), ("openai-responses", "max_output_tokens", "truncated"),
    ],
)
def test_a_non_streaming_bodys_stop_reason_ends_its_retold_stream_as_a_stream_would(dialect: str, reason: str, end: str) -> None:
    doc = final_response(scenario_script("single"), dialect)  # type: ignore[arg-type]
    if dialect == "openai-chat":
        doc["choices"][0]["finish_reason"] = reason
    elif dialect == "anthropic":
        doc["stop_reason"] = reason
    else:
        doc["status"], doc["incomplete_details"] = "incomplete", {"reason": reason}
    (result,) = assemble_events(read_capture(synthesize_stream(dialect, doc, "single")))  # type: ignore[arg-type]
    assert result.end == end
    assert end == "complete" or reason in (result.end_detail or "")
    committed = [c for c in result.calls if c.state.value == "committed"]
    assert bool(committed) == (end == "complete")


def test_a_non_streaming_body_without_a_stop_reason_is_told_as_cut_off() -> None:
    doc = final_response(scenario_script("single"), "openai-chat")
    doc["choices"][0]["finish_reason"] = None
    (result,) = assemble_events(read_capture(synthesize_stream("openai-chat", doc, "single")))
    assert result.end == "truncated" and not [c for c in result.calls if c.state.value == "committed"]


# ------------------------------------------------------------------ HTTP


@pytest.fixture
def captures(tmp_path: Path) -> Path:
    root = tmp_path / "caps"
    (root / "anthropic").mkdir(parents=True)
    (root / "anthropic" / "two.sse").write_bytes(DEMOS["anthropic-parallel"].wire)
    jsonl = b"".join(json.dumps(e.data).encode() + b"\n" for e in read_capture(DEMOS["openai-single"].wire) if e.data != "[DONE]")
    (root / "single.jsonl").write_bytes(jsonl + b'"[DONE]"\n')
    (root / "notes.txt").write_text("not a capture")
    return root


@pytest.fixture
def client(captures: Path) -> TestClient:
    return TestClient(create_mock_app(MockProvider(captures, delay=0.0), ["testserver"]))


def test_scenarios_are_listed_as_a_json_array(client: TestClient) -> None:
    listed = client.get("/api/scenarios").json()
    assert listed == [*SCENARIOS, "anthropic/two.sse", "single.jsonl"]
    assert [m["id"] for m in client.get("/v1/models").json()["data"]] == listed


@pytest.mark.parametrize("dialect", MOCK_DIALECTS)
def test_a_scenario_is_served_in_the_endpoints_dialect(client: TestClient, dialect: str) -> None:
    response = client.post(PATH[dialect], json={"model": "parallel", "stream": True})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert response.content == b"".join(scenario_events("parallel", dialect))  # type: ignore[arg-type]
    plain = client.post(PATH[dialect], json={"model": "parallel"})
    assert plain.headers["content-type"] == "application/json"
    assert plain.json() == final_response(scenario_script("parallel"), dialect)  # type: ignore[arg-type]


def test_a_capture_is_served_at_its_own_endpoint_only(client: TestClient, captures: Path) -> None:
    served = client.post("/v1/messages", json={"model": "anthropic/two.sse", "stream": True})
    assert served.status_code == 200 and served.content == (captures / "anthropic" / "two.sse").read_bytes()
    wrong = client.post("/v1/chat/completions", json={"model": "anthropic/two.sse", "stream": True})
    assert wrong.status_code == 400
    assert "anthropic stream: ask for it at /v1/messages" in wrong.json()["error"]["message"]
    as_sse = client.post("/v1/chat/completions", json={"model": "single.jsonl", "stream": True})
    (result,) = assemble_events(read_capture(as_sse.content))
    assert as_sse.content.startswith(b"data: {") and [c.state.value for c in result.calls] == ["committed"]
    assert client.post("/v1/messages", json={"model": "anthropic/two.sse"}).status_code == 400  # a recording streams


def test_errors_are_in_each_providers_shape(client: TestClient) -> None:
    openai_404 = client.post("/v1/chat/completions", json={"model": "gpt-9", "stream": True})
    assert openai_404.status_code == 404
    assert openai_404.json()["error"]["code"] == "model_not_found" and "parallel" in openai_404.json()["error"]["message"]
    anthropic_404 = client.post("/v1/messages", json={"model": "claude-9"}).json()
    assert anthropic_404["type"] == "error" and anthropic_404["error"]["type"] == "not_found_error"
    assert client.post("/v1/responses", content=b"{nope").status_code == 400
    limited = client.post("/v1/messages?status=529", json={"model": "single"})
    assert limited.status_code == 529 and limited.json()["error"]["type"] == "api_error"


def test_query_options_rechunk_and_drop(client: TestClient) -> None:
    whole = DEMOS["openai-single"].wire
    rechunked = client.post("/v1/chat/completions?chunk=9", json={"model": "single", "stream": True})
    assert rechunked.content == whole
    with client.stream("POST", "/v1/chat/completions?drop=3", json={"model": "single", "stream": True}) as response:
        got = b"".join(response.iter_raw())
    assert got == b"".join(split_events(whole)[:3])


def test_the_mock_checks_the_host_header(captures: Path) -> None:
    client = TestClient(create_mock_app(MockProvider(captures), ["127.0.0.1"]), base_url="http://127.0.0.1")
    assert client.get("/api/scenarios").status_code == 200
    assert client.get("/api/scenarios", headers={"Host": "rebound.example"}).status_code == 400
