"""The recording proxy with the official SDKs: OpenAI Chat, Responses and Anthropic through
``/proxy/...`` to the built-in mock, on a real uvicorn server.

Each test checks the SDK's own final result against toollatch's committed calls, and the
bytes the client read against the bytes the mock wrote.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from toollatch.demo.demos import DEMOS
from toollatch.demo.mockwire import scenario_events
from toollatch.web import Settings, create_app
from toollatch.web.live.connect import convert_tools

from .test_live_server import (
    finished,
    live_count,
    newest_live,
    serve,
    sessions,
    tee_transport,
)

KEY = "sk-test-not-a-real-key-0000"
ALL_COMMIT = ("single", "parallel", "noargs", "canary", "cancel")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = Settings(mock_delay=0.0, data_dir=tmp_path_factory.mktemp("proxy-data"), replay_rate=1000.0)
    with serve(create_app(settings)) as url:
        yield url


def chat_tools(model: str) -> list[dict[str, Any]]:
    return list((DEMOS.get(f"openai-{model}") or DEMOS[model]).tools)


def committed(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(call id, name, arguments) of every committed call, in provider order."""
    return [(c["call_id"], c["name"], c["arguments"]) for c in doc["streams"][0]["calls"] if c["state"] == "committed"]


def openai_client(base: str, tee: Any = None, **query: str) -> openai.OpenAI:
    http = httpx.Client(transport=tee) if tee is not None else None
    return openai.OpenAI(base_url=f"{base}/proxy/openai/v1", api_key=KEY, http_client=http, default_query=query or None, max_retries=0)


@pytest.mark.parametrize("model", ALL_COMMIT)
def test_openai_chat_sdk_final_completion_equals_the_committed_calls(base: str, model: str) -> None:
    tee = tee_transport()
    before = live_count(base)
    with openai_client(base, tee) as client, client.chat.completions.stream(model=model, messages=[{"role": "user", "content": "go"}], tools=chat_tools(model)) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    sdk = [(tc.id, tc.function.name, json.loads(tc.function.arguments or "{}")) for tc in final.choices[0].message.tool_calls or []]
    doc = finished(base, newest_live(base, before))
    assert doc["streams"][0]["end"] == "complete"
    assert committed(doc) == sdk and sdk
    assert tee.body == b"".join(scenario_events(model, "openai-chat"))
    assert doc["live"]["size"] == len(tee.body)


@pytest.mark.parametrize("model", ALL_COMMIT)
def test_openai_responses_sdk_final_response_equals_the_committed_calls(base: str, model: str) -> None:
    tee = tee_transport()
    before = live_count(base)
    tools = convert_tools(chat_tools(model), "responses")
    with openai_client(base, tee) as client, client.responses.stream(model=model, input="go", tools=tools) as stream:  # type: ignore[arg-type]
        for _ in stream:
            pass
        final = stream.get_final_response()
    sdk = [(item.call_id, item.name, json.loads(item.arguments or "{}")) for item in final.output if item.type == "function_call"]
    doc = finished(base, newest_live(base, before))
    assert doc["dialect"] == "openai-responses"
    assert committed(doc) == sdk and sdk
    assert tee.body == b"".join(scenario_events(model, "openai-responses"))


@pytest.mark.parametrize("model", ALL_COMMIT)
def test_anthropic_sdk_final_message_equals_the_committed_calls(base: str, model: str) -> None:
    tee = tee_transport(httpx2)
    before = live_count(base)
    client = anthropic.Anthropic(base_url=f"{base}/proxy/anthropic", api_key=KEY, http_client=httpx2.Client(transport=tee), max_retries=0)
    tools = convert_tools(chat_tools(model), "messages")
    with client, client.messages.stream(model=model, max_tokens=1024, messages=[{"role": "user", "content": "go"}], tools=tools) as stream:  # type: ignore[arg-type]
        final = stream.get_final_message()
    sdk = [(block.id, block.name, block.input) for block in final.content if block.type == "tool_use"]
    doc = finished(base, newest_live(base, before))
    assert doc["dialect"] == "anthropic"
    assert committed(doc) == sdk and sdk
    assert tee.body == b"".join(scenario_events(model, "anthropic"))


def test_the_latch_refuses_what_the_sdk_hands_over(base: str) -> None:
    before = live_count(base)
    with openai_client(base) as client, client.chat.completions.stream(model="invalid", messages=[{"role": "user", "content": "go"}], tools=chat_tools("invalid")) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.tool_calls  # the SDK returns the call, trailing comma and all
    doc = finished(base, newest_live(base, before))
    assert committed(doc) == []
    assert doc["streams"][0]["calls"][0]["reason"].startswith("invalid_json")


def test_non_streaming_requests_pass_through_and_are_recorded(base: str) -> None:
    tee = tee_transport()
    before = live_count(base)
    with openai_client(base, tee) as client:
        completion = client.chat.completions.create(model="parallel", messages=[{"role": "user", "content": "go"}], tools=chat_tools("parallel"))  # type: ignore[arg-type]
    sdk = [(tc.id, tc.function.name, json.loads(tc.function.arguments)) for tc in completion.choices[0].message.tool_calls or []]  # type: ignore[union-attr]
    doc = finished(base, newest_live(base, before))
    assert doc["live"]["streaming"] is False and doc["live"]["content_type"] == "application/json"
    assert committed(doc) == sdk and len(sdk) == 2
    recording = httpx.get(f"{base}/sessions/{doc['id']}/recording")
    assert recording.status_code == 200 and recording.content == tee.body


def test_twenty_concurrent_streams_all_assemble(tmp_path: Path) -> None:
    settings = Settings(mock_delay=0.002, data_dir=tmp_path)
    errors: list[BaseException] = []
    results: dict[int, list[tuple[str, str, dict[str, Any]]]] = {}
    with serve(create_app(settings)) as url, openai_client(url) as client:

        def one(n: int) -> None:
            model = ("parallel", "single", "canary", "noargs")[n % 4]
            try:
                api = client.chat.completions.stream(model=model, messages=[{"role": "user", "content": str(n)}], tools=chat_tools(model))
                with api as stream:
                    final = stream.get_final_completion()
                calls = final.choices[0].message.tool_calls or []
                results[n] = [(tc.id, tc.function.name, json.loads(tc.function.arguments or "{}")) for tc in calls]
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(n,)) for n in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors and len(results) == 20
        live = [s for s in sessions(url) if s["source"]["kind"] == "live"]
        assert len(live) == 20
        docs = [finished(url, s["id"]) for s in live]
    got = sorted(tuple(map(repr, committed(d))) for d in docs)
    assert got == sorted(tuple(map(repr, r)) for r in results.values())
    assert all(d["streams"][0]["end"] == "complete" for d in docs)


def test_sessions_twin_is_an_array_oldest_first(base: str) -> None:
    listed = sessions(base)
    assert isinstance(listed, list) and all("id" in s for s in listed)
    started = [s["source"].get("upstream") for s in listed]
    assert started and all(u in ("openai", "anthropic", None) for u in started)


# ------------------------------------------------------------------ local-only guards on the proxy


def test_the_host_check_covers_the_proxy(base: str) -> None:
    body = {"model": "single", "stream": True, "messages": []}
    refused = httpx.post(f"{base}/proxy/openai/v1/chat/completions", json=body, headers={"Host": "attacker.example"})
    assert refused.status_code == 400


def test_agents_need_no_origin_but_a_foreign_origin_is_refused(base: str) -> None:
    body = {"model": "single", "stream": True, "messages": []}
    url = f"{base}/proxy/openai/v1/chat/completions"
    assert httpx.post(url, json=body).status_code == 200
    assert httpx.post(url, json=body, headers={"Origin": "http://attacker.example"}).status_code == 403
    assert httpx.post(f"{base}/connect", data={"model": "single"}, headers={"Origin": "http://attacker.example"}).status_code == 403


def test_an_unknown_upstream_is_a_clear_404(base: str) -> None:
    response = httpx.post(f"{base}/proxy/nowhere/v1/chat/completions", json={"model": "single"})
    assert response.status_code == 404
    assert "no upstream 'nowhere'" in response.json()["error"]["message"]
