"""Tools and configuration files of every wrong shape: one line naming the file and what is
wrong (exit 2 from the CLI, a 400 page from an upload), never a traceback; a proxied
request's unusable tools are named on its session, the stream still forwarded.

Before, ``"parameters": {"type": 5, "$schema": 7}`` crashed jsonschema's ``validator_for``
(exit 1 with a traceback), an unknown ``$schema`` fell back to the newest draft with a
``DeprecationWarning``, and a YAML alias that expands to billions of items printed all of
them in the error line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from toollatch.cli import main
from toollatch.web import Settings

from .test_web_app import BASE, make_client

OK_SSE = (
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"x","arguments":"{}"}}]}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
    b"data: [DONE]\n\n"
)

#: (id, parameters, what the line must say)
SHAPES: list[tuple[str, Any, str]] = [
    ("type-and-schema-numbers", {"type": 5, "$schema": 7}, "/$schema must be a string"),
    ("type-number", {"type": 5}, "/type breaks"),
    ("type-list-of-number", {"type": ["object", 3]}, "/type breaks"),
    ("schema-null", {"$schema": None, "type": "object"}, "/$schema must be a string"),
    ("schema-array", {"$schema": ["x"], "type": "object"}, "/$schema must be a string"),
    ("schema-unknown", {"$schema": "http://example.com/my-draft", "type": "object"}, "is not a JSON Schema draft this checker knows"),
    ("schema-not-an-object", [1, 2], "schema must be an object, not an array"),
    ("schema-a-string", "object", "schema must be an object, not a string"),
    ("ref-unresolved", {"$ref": "#/$defs/missing"}, "$ref at /$ref does not resolve"),
    ("ref-remote", {"$ref": "https://evil.example/schema.json"}, "$ref at /$ref does not resolve"),
    ("ref-number", {"$ref": 5}, "/$ref must be of type string"),
    ("pattern-invalid", {"type": "object", "properties": {"q": {"type": "string", "pattern": "("}}}, "/properties/q/pattern breaks"),
]
IDS = [s[0] for s in SHAPES]


def tools_file(tmp_path: Path, parameters: Any) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"type": "function", "function": {"name": "x", "parameters": parameters}}]))
    return path


@pytest.mark.parametrize(("kind", "parameters", "says"), SHAPES, ids=IDS)
def test_the_cli_names_the_tools_file_and_the_fault_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, parameters: Any, says: str
) -> None:
    capture = tmp_path / "ok.sse"
    capture.write_bytes(OK_SSE)
    path = tools_file(tmp_path, parameters)
    with _no_warnings():
        code = main(["assemble", "--tools", str(path), str(capture)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith((f"toollatch: error: {path}: tool 'x'", f"toollatch: error: {path}: tools[0]")), err
    assert says in err, err


class _no_warnings:
    """Fails the test if a warning (such as jsonschema's DeprecationWarning) is raised."""

    def __enter__(self) -> None:
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc: object) -> None:
        self._catch.__exit__(*exc)


def test_the_reported_tools_file_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    capture = tmp_path / "ok.sse"
    capture.write_bytes(OK_SSE)
    path = tools_file(tmp_path, {"type": 5, "$schema": 7})
    done = subprocess.run([sys.executable, "-m", "toollatch.cli", "assemble", "--tools", str(path), str(capture)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == f"toollatch: error: {path}: tool 'x': invalid JSON Schema: /$schema must be a string (a meta-schema URI), not a number\n"


def test_a_draft_spelled_with_the_other_scheme_is_known(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = tmp_path / "ok.sse"
    capture.write_bytes(OK_SSE)
    path = tools_file(tmp_path, {"$schema": "https://json-schema.org/draft-07/schema#", "type": "object"})
    with _no_warnings():
        assert main(["assemble", "--tools", str(path), str(capture), "--json"]) == 0
    (call,) = json.loads(capsys.readouterr().out)["streams"][0]["calls"]
    assert call["state"] == "committed"


BOMB = """agent_stream_assemble:
  allow_pipelined_execute:
    - &a ["x","x","x","x","x","x","x","x","x"]
    - &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
    - &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
    - &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
    - &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
    - &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
    - &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
"""

CONFIGS = [
    ("yaml-syntax", "agent_stream_assemble: [1\n", "not valid YAML at line 2, column 1"),
    ("yaml-tab", "\t: x\n", "not valid YAML at line 1"),
    ("yaml-python-tag", "agent_stream_assemble:\n  max_tool_argument_bytes: !!python/object:os.system x\n", "not valid YAML at line 2"),
    ("not-a-mapping", "- 1\n", "expected a mapping"),
    ("section-not-a-mapping", "agent_stream_assemble: 5\n", "agent_stream_assemble must be a mapping"),
    ("wrong-type", "agent_stream_assemble:\n  max_tool_argument_bytes: \"x\"\n", "max_tool_argument_bytes: 'x' is not a whole number"),
    ("alias-bomb", BOMB, "allow_pipelined_execute: [["),
    ("long-value", "agent_stream_assemble:\n  finalize_order: " + "k" * 100_000 + "\n", "finalize_order: 'kkk"),
]


@pytest.mark.parametrize(("kind", "text", "says"), CONFIGS, ids=[c[0] for c in CONFIGS])
def test_a_config_file_of_a_wrong_shape_is_one_short_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, text: str, says: str) -> None:
    capture = tmp_path / "ok.sse"
    capture.write_bytes(OK_SSE)
    config = tmp_path / "c.yaml"
    config.write_text(text)
    for command in (["assemble", "--config", str(config), str(capture)], ["serve", "--config", str(config)]):
        assert main(command) == 2
        out, err = capsys.readouterr()
        assert err.startswith(f"toollatch: error: {config}: ") and err.count("\n") == 1, err[:300]
        assert says in err and len(err) < 400, err[:300]


# ------------------------------------------------------------------ the dashboard


@pytest.mark.parametrize(("kind", "parameters", "says"), SHAPES, ids=IDS)
def test_an_upload_names_the_tools_file_and_the_fault(tmp_path: Path, kind: str, parameters: Any, says: str) -> None:
    tools = json.dumps([{"type": "function", "function": {"name": "x", "parameters": parameters}}]).encode()
    with make_client(Settings(data_dir=tmp_path)) as client:
        quiet = TestClient(client.app, base_url=BASE, raise_server_exceptions=False)
        files = {"file": ("ok.sse", OK_SSE, "text/plain"), "tools": ("mine.json", tools, "application/json")}
        response = quiet.post("/sessions/upload", files=files, data={"rate": "max"}, follow_redirects=False)
        stored = quiet.get("/api/stored").json()
    assert response.status_code == 422
    assert "Tools file mine.json: " in response.text and says.replace("'", "&#39;") in response.text.replace("&#x27;", "&#39;")
    assert stored["total"] == 0


@pytest.mark.parametrize(("kind", "parameters", "says"), [s for s in SHAPES if not s[0].startswith("ref-u") and s[0] != "ref-remote"])
def test_a_proxied_request_names_its_unusable_tools(tmp_path: Path, kind: str, parameters: Any, says: str) -> None:
    request = {"model": "single", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    request["tools"] = [{"type": "function", "function": {"name": "x", "parameters": parameters}}]
    with make_client(Settings(data_dir=tmp_path, mock_delay=0.0)) as client:
        response = client.post("/proxy/openai/v1/chat/completions", json=request)
        (live,) = client.get("/api/live").json()["sessions"]
        doc = client.get(f"/api/sessions/{live['id']}").json()
        page = client.get(f"/sessions/{live['id']}")
    assert response.status_code == 200 and b"[DONE]" in response.content
    assert page.status_code == 200
    assert says in json.dumps(doc), "the session names why the request's tools are not checked"
