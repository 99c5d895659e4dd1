"""``toollatch mock`` and the serve command's proxy options: ``--upstream``, ``--api-key-env``,
``--mock-delay`` and the YAML sections ``upstreams``, ``api_key_env``, ``mock``."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from toollatch import cli, serve_config
from toollatch.core.config import ConfigError

from .test_live_server import free_port


@pytest.fixture(autouse=True)
def _default_ports_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests never listen: the default port being taken on this machine is not theirs to judge."""
    monkeypatch.setattr("toollatch.web.banner.port_problem", lambda host, port: None)


ROOT = Path(__file__).resolve().parent.parent


def test_serve_sections_are_read_beside_the_assembler_settings(tmp_path: Path) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text(
        "agent_stream_assemble:\n  max_tool_argument_bytes: 1024\n"
        "upstreams:\n  openai: https://api.openai.com\n"
        "api_key_env:\n  openai: OPENAI_API_KEY\n"
        "mock:\n  delay: 0.1\n  rechunk: 3\n"
    )
    config, extra = serve_config.read_serve_config(str(path))
    assert config.max_tool_argument_bytes == 1024
    assert extra == {"upstreams": {"openai": "https://api.openai.com"}, "api_key_env": {"openai": "OPENAI_API_KEY"}, "mock": {"delay": 0.1, "rechunk": 3}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("upstreams: [a]\n", "upstreams must map names to strings"),
        ("mock:\n  speed: 2\n", "mock takes delay"),
        ("mock:\n  delay: -1\n", "is not a number of seconds"),
        ("upstreams: {}\nextras: {}\n", "unknown section 'extras'"),
        ("upstreams: {}\nagent_stream_assemble:\n  max_tool_argument_byte: 1\n", "did you mean 'max_tool_argument_bytes'"),
        ("agent_stream_assemble:\n  nope: 1\n", "unknown key 'nope'"),
    ],
)
def test_bad_serve_sections_are_refused_by_name(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        serve_config.read_serve_config(str(path))


def test_serve_passes_upstreams_and_keys_to_the_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import toollatch.web.app

    seen: dict[str, Any] = {}
    monkeypatch.setattr(toollatch.web.app, "run", lambda settings: seen.setdefault("settings", settings))
    path = tmp_path / "serve.yaml"
    path.write_text("upstreams:\n  gw: http://127.0.0.1:4000\nmock:\n  delay: 0.5\n")
    argv = ["serve", "--config", str(path), "--upstream", "openai=https://api.openai.com/v1", "--api-key-env", "openai=OPENAI_API_KEY", "--mock-delay", "0"]
    assert cli.main(argv) == 0
    settings = seen["settings"]
    assert settings.upstreams == {"gw": "http://127.0.0.1:4000", "openai": "https://api.openai.com/v1"}
    assert settings.api_key_env == {"openai": "OPENAI_API_KEY"} and settings.mock_delay == 0.0


@pytest.mark.parametrize("option", ["--upstream=openai", "--upstream=openai=ftp://x", "--api-key-env==X"])
def test_malformed_options_exit_2(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", option]) == 2
    assert capsys.readouterr().err.startswith("toollatch: error:")


def test_binding_another_address_warns(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import uvicorn

    from toollatch.web import Settings, app

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    app.run(Settings(host="0.0.0.0"))
    assert "binding 0.0.0.0: the dashboard is meant for loopback only" in caplog.text


def test_toollatch_mock_runs_the_mock_alone(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "toollatch.cli", "mock", "--port", str(port), "--delay", "0", "--captures", str(tmp_path)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                scenarios = httpx.get(base + "/api/scenarios").json()
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline and process.poll() is None, "toollatch mock did not start"
                time.sleep(0.05)
        assert "parallel" in scenarios
        response = httpx.post(base + "/v1/responses", json={"model": "single", "stream": True})
        assert response.status_code == 200 and b"event: response.completed" in response.content
    finally:
        process.terminate()
        process.wait(timeout=10)
        assert process.stderr is not None
        process.stderr.close()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mock:\n  dealy: 0.1\n", r"bad.yaml: mock: unknown key 'dealy'; did you mean 'delay'\?"),
        ("api_key_env:\n  opnai: NC_KEY\n", r"bad.yaml: api_key_env: 'opnai' is not an upstream; did you mean 'openai'\?"),
        ("upstreams:\n  openai: not-a-url\n", r"bad.yaml: upstream openai=not-a-url: expected NAME=http"),
    ],
)
def test_serve_refuses_typos_in_its_sections_by_name_and_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    import re

    import toollatch.web.app

    monkeypatch.setattr(toollatch.web.app, "run", lambda settings: pytest.fail("the server must not start"))
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert cli.main(["serve", "--config", str(path)]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_an_upstream_named_like_a_built_in_one_is_warned_about(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import toollatch.web.app

    seen: dict[str, Any] = {}
    monkeypatch.setattr(toollatch.web.app, "run", lambda settings: seen.setdefault("settings", settings))
    path = tmp_path / "serve.yaml"
    path.write_text("upstreams:\n  opneai: http://127.0.0.1:4000\n")
    assert cli.main(["serve", "--config", str(path)]) == 0
    err = capsys.readouterr().err
    assert "upstream 'opneai' is configured, and 'openai' still goes to the built-in mock; did you mean 'openai'?" in err
    assert seen["settings"].upstreams == {"opneai": "http://127.0.0.1:4000"}


def test_assemble_reads_a_serve_configuration_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from .test_fixture_classes import openai_sse, openai_tool_chunks

    cap = tmp_path / "cap.sse"
    cap.write_bytes(openai_sse(openai_tool_chunks([("call_1", "f", ['{"a": "' + "x" * 50 + '"}'])])))
    path = tmp_path / "serve.yaml"
    path.write_text("agent_stream_assemble:\n  max_tool_argument_bytes: 16\nupstreams:\n  openai: https://api.openai.com\n")
    assert cli.main(["assemble", str(cap), "--config", str(path)]) == 0
    assert "arguments_exceed_max_bytes" in capsys.readouterr().out
