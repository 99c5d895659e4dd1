"""toollatch mock --recording: a recording served at its recorded pace (toollatch.web.live.mock)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from toollatch.cli import main
from toollatch.wire.har import write_har
from toollatch.observe.timing import ChunkTimes
from toollatch.web.live.mock import MockProvider, MockTransport

from .test_timing import CALL, _chunks


@pytest.fixture(autouse=True)
def _default_ports_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests never listen: the default port being taken on this machine is not theirs to judge."""
    monkeypatch.setattr("toollatch.web.banner.port_problem", lambda host, port: None)


TIMES = [0.0, 0.1, 0.5, 0.6]


def recording(tmp_path: Path, times: list[float] | None = TIMES) -> Path:
    path = tmp_path / "rec.har"
    chunk_times = ChunkTimes.from_chunks(_chunks(times)) if times is not None else None
    path.write_bytes(write_har(CALL, chunk_times, url="http://u/v1/chat/completions"))
    return path


def fetch(provider: MockProvider, model: str, query: str = "") -> tuple[int, list[tuple[float, bytes]]]:
    """Status and ``(seconds since the first chunk, chunk)`` as the client reads them."""

    async def go() -> tuple[int, list[tuple[float, bytes]]]:
        async with httpx.AsyncClient(transport=MockTransport(provider), base_url="http://mock") as client:
            body = {"model": model, "stream": True, "messages": []}
            async with client.stream("POST", f"/v1/chat/completions{query}", json=body) as response:
                got = [(time.monotonic(), chunk) async for chunk in response.aiter_raw()]
        t0 = got[0][0] if got else 0.0
        return response.status_code, [(t - t0, c) for t, c in got]

    return asyncio.run(go())


def test_a_timed_recording_is_served_at_its_recorded_pace_for_any_model(tmp_path: Path) -> None:
    provider = MockProvider()
    assert provider.add_recording(recording(tmp_path)) == ["rec.har#entry0"]
    status, got = fetch(provider, "gpt-4o")  # the agent's own model name
    assert status == 200 and b"".join(c for _, c in got) == CALL and len(got) == 4
    assert 0.8 < got[-1][0] / TIMES[-1] < 2.0  # a ratio: the recorded gaps are kept
    assert got[2][0] - got[1][0] > got[1][0] - got[0][0]  # the long gap stays the long one
    _, even = fetch(provider, "rec.har#entry0", "?delay=0")  # ?delay= paces it evenly instead
    assert even[-1][0] < got[-1][0] / 2


def test_scenarios_still_win_and_the_recording_is_listed(tmp_path: Path) -> None:
    provider = MockProvider()
    provider.add_recording(recording(tmp_path))
    assert "rec.har#entry0" in provider.scenarios()
    status, got = fetch(provider, "single", "?delay=0")
    assert status == 200 and b"".join(c for _, c in got) != CALL


def test_the_wrong_endpoint_is_refused(tmp_path: Path) -> None:
    provider = MockProvider()
    provider.add_recording(recording(tmp_path))

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=MockTransport(provider), base_url="http://mock") as client:
            return await client.post("/v1/messages", json={"model": "x", "stream": True, "max_tokens": 1, "messages": []})

    response = asyncio.run(go())
    assert response.status_code == 400 and "openai-chat stream" in response.text


def test_mock_cli_names_an_unreadable_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.har"
    bad.write_text('{"log": {"entries": [,]}}')
    assert main(["mock", "--recording", str(bad)]) == 2
    assert f"--recording {bad}" in capsys.readouterr().err
    assert main(["mock", "--recording", str(tmp_path / "missing.har")]) == 2
