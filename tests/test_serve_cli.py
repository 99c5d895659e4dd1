"""``toollatch serve`` / ``mock`` / ``export`` as a newcomer meets them: the start banner, a
port in use or out of range, the mock's ``GET /``, and ``export`` redacting by default."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from toollatch import cli
from toollatch.web.banner import port_problem, serve_banner
from toollatch.web.live.mock import MockProvider, create_mock_app
from toollatch.web.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import toollatch.web.app
    import toollatch.web.banner

    seen: dict[str, Any] = {}
    monkeypatch.setattr(toollatch.web.app, "run", lambda settings: seen.setdefault("settings", settings))
    monkeypatch.setattr(toollatch.web.banner, "port_problem", lambda host, port: None)
    return seen


def test_serve_prints_a_banner_of_urls_and_folders(no_server: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["serve", "--port", "9123", "--data-dir", str(tmp_path / "data"), "--captures", str(tmp_path),
            "--upstream", "gw=https://user:pw@gateway.example/v1?key=sk-secret"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "toollatch dashboard: http://127.0.0.1:9123/" in out
    assert f"data dir:      {tmp_path / 'data'}" in out and f"captures dir:  {tmp_path}" in out
    assert "http://127.0.0.1:9123/proxy/openai/v1" in out and "http://127.0.0.1:9123/proxy/anthropic " in out
    assert "http://127.0.0.1:9123/proxy/gw" in out and "-> https://gateway.example/v1" in out
    assert "sk-secret" not in out and "pw@" not in out  # a configured URL is shown without its credentials
    assert "--upstream openai=https://api.openai.com" in out  # how to reach the real providers
    assert no_server["settings"].port == 9123


def test_the_banner_names_an_upstream_that_replaces_the_mock() -> None:
    text = serve_banner(Settings(port=8000, upstreams={"openai": "https://api.openai.com"}))
    lines = {line.split()[0]: line for line in text.splitlines()[4:] if line.startswith("    ")}
    assert lines["openai"].endswith("-> https://api.openai.com") and "/proxy/openai/v1" in lines["openai"]
    assert "-> built-in mock" in lines["anthropic"]  # anthropic still goes to the mock
    assert "real providers:" not in text


def test_a_port_in_use_is_one_line_suggesting_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert port_problem("127.0.0.1", port) == f"port {port} on 127.0.0.1 is in use (another server listens there)"
        for command in (["serve", "--data-dir", str(tmp_path)], ["mock"]):
            done = subprocess.run([sys.executable, "-m", "toollatch.cli", *command, "--port", str(port)],
                                  cwd=ROOT, capture_output=True, text=True, timeout=60)
            assert done.returncode == 2, done.stderr
            assert done.stderr == f"toollatch: error: port {port} on 127.0.0.1 is in use (another server listens there); pick another with --port N\n"
            assert "Traceback" not in done.stdout


def test_a_free_port_has_no_problem() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert port_problem("127.0.0.1", port) is None


@pytest.mark.parametrize("command", ["serve", "mock"])
@pytest.mark.parametrize("port", ["99999", "0", "-1", "http"])
def test_a_port_out_of_range_is_refused_by_the_parser(command: str, port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main([command, "--port", port])
    assert exited.value.code == 2
    assert "is not a port number (1-65535)" in capsys.readouterr().err


def test_the_mock_answers_its_root_with_its_endpoints() -> None:
    app = create_mock_app(MockProvider(None, 0.0), ["testserver"])
    with TestClient(app) as client:
        doc = client.get("/").json()
    paths = {(e["method"], e["path"]) for e in doc["endpoints"]}
    assert {("POST", "/v1/chat/completions"), ("POST", "/v1/responses"), ("POST", "/v1/messages"), ("GET", "/v1/models")} <= paths
    assert "parallel" in doc["scenarios"] and set(doc["query"]) == {"delay", "chunk", "drop", "status"}


def test_export_redacts_without_being_asked(tmp_path: Path) -> None:
    from .test_fixture_classes import wire

    source = tmp_path / "bug.sse"
    source.write_bytes(wire("anthropic", [("t1", "login", ['{"pw": "sk-', 'canary-42"}'])]))
    plain, flagged = tmp_path / "plain.sse", tmp_path / "flagged.sse"
    assert cli.main(["export", str(source), "-o", str(plain)]) == 0
    assert cli.main(["export", "--redact", str(source), "-o", str(flagged)]) == 0  # still accepted
    assert b"canary" not in plain.read_bytes() and plain.read_bytes() == flagged.read_bytes()
