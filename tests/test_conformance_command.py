"""toollatch conformance --command: the stdin/stdout protocol, with a Python and a Node assembler."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from toollatch.cli import main

ROOT = Path(__file__).resolve().parents[1]

#: Hands every call it sees to execute, from any dialect's tool_calls: no latch at all.
EAGER = r'''
import json, sys
case = json.load(sys.stdin)
if case["dialect"] != "openai-chat":
    print(json.dumps({"unsupported": "openai-chat only"})); sys.exit()
calls = {}
for e in case["events"]:
    for ch in (e["data"] or {}).get("choices", []) if isinstance(e["data"], dict) else []:
        for tc in (ch.get("delta") or {}).get("tool_calls") or []:
            c = calls.setdefault((ch["index"], tc.get("index")), {"id": None, "name": None, "arguments": ""})
            c["id"] = c["id"] or tc.get("id")
            f = tc.get("function") or {}
            c["name"] = c["name"] or f.get("name")
            c["arguments"] += f.get("arguments") or ""
print(json.dumps({"calls": [dict(c, verdict="execute") for c in calls.values()]}))
'''


def _run(capsys: pytest.CaptureFixture[str], command: str) -> dict:
    assert main(["conformance", "--command", command, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(autouse=True)
def _packaged_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLLATCH_SHARED", str(tmp_path / "absent"))


def test_a_python_command_is_scored_through_the_protocol(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    script = tmp_path / "eager.py"
    script.write_text(EAGER)
    doc = _run(capsys, f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    status = {r["case"]: r["status"] for r in doc["cases"]}
    assert status["anthropic-server-tool-then-client-tool.sse"] == "n/a"  # answered {"unsupported": ...}
    assert status["index-interleaved-parallel.sse"] == "right"
    assert status["length-cut-parsable.sse"] == "wrong"  # runs a call cut for length
    assert status["user-stop-two-calls.sse"] == "wrong"  # runs calls after the user stop
    assert 0 < doc["score"] < 1
    assert doc["adapter"].startswith("command: ")


def test_the_request_carries_events_tools_and_the_user_stop(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    script = tmp_path / "record.py"
    script.write_text(
        "import json, sys, pathlib\n"
        "case = json.load(sys.stdin)\n"
        f"pathlib.Path({str(seen)!r}, case['case'] + '.json').write_text(json.dumps(case))\n"
        "print(json.dumps({'calls': []}))\n"
    )
    _run(capsys, f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    stop = json.loads((seen / "user-stop-two-calls.sse.json").read_text())
    assert stop["cancelled"] is True and stop["dialect"] == "openai-chat"
    assert len(stop["events"]) == 2  # cut at cancel_after
    first = stop["events"][0]
    assert set(first) == {"event", "data", "text"} and json.loads(first["text"]) == first["data"]
    server = json.loads((seen / "anthropic-server-tool-then-client-tool.sse.json").read_text())
    assert server["cancelled"] is False and server["events"][0]["event"] == "message_start"


def test_a_command_that_fails_or_answers_nonsense_makes_its_cases_wrong(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text("import sys; sys.stdin.read(); print('not json')\n")
    doc = _run(capsys, f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    assert doc["score"] == 0 and all("adapter failed" in r["why"] for r in doc["cases"])
    doc = _run(capsys, f"{shlex.quote(sys.executable)} -c 'import sys; sys.exit(3)'")
    assert all("exited 3" in r["why"] for r in doc["cases"])


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_node_example_in_docs(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _run(capsys, f"node {shlex.quote(str(ROOT / 'docs' / 'conformance-adapter.mjs'))}")
    status = {r["case"]: r["status"] for r in doc["cases"]}
    assert status["bytes-stop-parsable.sse"] == "right"  # it waits for finish_reason
    assert status["duplicate-keys.sse"] == "wrong"  # JSON.parse keeps the last duplicate key
    assert status["anthropic-server-tool-then-client-tool.sse"] == "n/a"
    assert 0 < doc["score"] < 1
