"""An agent pointed at the proxy with a real model name and no upstream configured: the
built-in mock answers what to do, in the provider's error shape, and a 4xx answer is kept
neither as a session nor as a recording (an error asked for with ``?status=`` still is)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from toollatch.demo.mockwire import scenario_names
from toollatch.web import Settings, create_app

BASE = "http://127.0.0.1"


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    with TestClient(create_app(Settings(data_dir=tmp_path, mock_delay=0.0)), base_url=BASE) as client:
        yield client


@pytest.mark.parametrize(
    ("path", "provider"),
    [("/proxy/openai/v1/chat/completions", "openai"), ("/proxy/openai/v1/responses", "openai"), ("/proxy/anthropic/v1/messages", "anthropic")],
)
def test_a_real_model_name_gets_what_to_do_in_the_providers_shape(client: TestClient, path: str, provider: str) -> None:
    response = client.post(path, json={"model": "gpt-4o", "stream": True, "messages": []})
    assert response.status_code == 404
    doc = response.json()
    if provider == "anthropic":
        assert doc["type"] == "error" and doc["error"]["type"] == "not_found_error"
    else:
        assert doc["error"]["code"] == "model_not_found" and doc["error"]["param"] == "model"
    message = doc["error"]["message"]
    url = "https://api.anthropic.com" if provider == "anthropic" else "https://api.openai.com"
    assert "'gpt-4o' is not a mock scenario" in message
    assert f"toollatch serve --upstream {provider}={url}" in message
    assert "single, parallel" in message and "GET /v1/models" in message
    names = scenario_names()
    assert not all(name in message for name in names)  # a few, not every one
    assert len(message) < 400


def test_a_refused_request_leaves_no_session_and_no_recording(client: TestClient, tmp_path: Path) -> None:
    assert client.post("/proxy/openai/v1/chat/completions", json={"model": "gpt-4o", "stream": True}).status_code == 404
    assert client.post("/proxy/anthropic/v1/messages", json={"stream": True}).status_code == 400  # no model
    assert client.post("/proxy/mock/v1/embeddings", json={"model": "single"}).status_code == 404  # no such endpoint
    assert client.get("/api/live").json()["sessions"] == []
    assert client.get("/api/stored").json()["total"] == 0


def test_an_error_asked_for_still_shows_as_a_session(client: TestClient) -> None:
    assert client.post("/proxy/openai/v1/chat/completions?status=429", json={"model": "single", "stream": True}).status_code == 429
    sessions = client.get("/api/live").json()["sessions"]
    assert len(sessions) == 1


def test_a_scenario_still_streams_and_is_recorded(client: TestClient) -> None:
    response = client.post("/proxy/openai/v1/chat/completions", json={"model": "single", "stream": True})
    assert response.status_code == 200 and b"[DONE]" in response.content
    assert len(client.get("/api/live").json()["sessions"]) == 1
