"""The ``toollatch assemble`` command, in-process (capsys) and once as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toollatch.cli import main

from .test_fixture_classes import anthropic_sse, anthropic_tool_events, openai_sse, openai_tool_chunks

ROOT = Path(__file__).resolve().parent.parent
SECRET = "sk-cli-SECRETVALUE-42x"

CALL_KEYS = {"call_id", "name", "state", "reason", "arguments", "bytes", "fragments", "executor", "diagnosis"}


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["assemble", *argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return json.loads(out)


def fail_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["assemble", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("toollatch: error: ")
    return err


MIXED = openai_sse(
    openai_tool_chunks(
        [
            ("call_ok", "get_weather", ['{"city":', ' "Oslo"}']),
            ("call_bad", "get_weather", ['{"city": "Rome", "unit": "', SECRET, '"}']),
            ("call_inv", "invented_tool", ["{}"]),
            ("call_json", "get_weather", ['{"city": "', SECRET, '",}']),
        ]
    )
)
TOOLS = {
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                    "required": ["city"],
                },
            },
        }
    ]
}


def test_json_document_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "two.sse", anthropic_sse(anthropic_tool_events([("toolu_1", "f", ['{"a":', "1}"]), ("toolu_2", "g", [])])))
    doc = run_json(capsys, str(cap))
    assert doc["source"] == str(cap)
    (stream,) = doc["streams"]
    assert {"dialect", "end", "calls", "results"} <= set(stream)
    assert (stream["dialect"], stream["end"], stream["results"]) == ("anthropic", "complete", [])
    assert all(set(c) == CALL_KEYS for c in stream["calls"])
    assert stream["calls"] == [
        {"call_id": "toolu_1", "name": "f", "state": "committed", "reason": None, "arguments": {"a": 1}, "bytes": 7, "fragments": 2, "executor": "client", "diagnosis": None},
        {"call_id": "toolu_2", "name": "g", "state": "committed", "reason": None, "arguments": {}, "bytes": 0, "fragments": 0, "executor": "client", "diagnosis": None},
    ]


def test_arguments_only_for_committed_calls_and_results_for_the_rest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "mixed.sse", MIXED)
    tools = write(tmp_path, "tools.json", json.dumps(TOOLS))
    doc = run_json(capsys, str(cap), "--tools", str(tools))
    calls = doc["streams"][0]["calls"]
    assert [(c["call_id"], c["state"], (c["reason"] or "").split(":")[0]) for c in calls] == [
        ("call_ok", "committed", ""),
        ("call_bad", "failed", "schema_invalid"),
        ("call_inv", "failed", "unknown_tool"),
        ("call_json", "failed", "invalid_json"),
    ]
    assert [c["arguments"] for c in calls] == [{"city": "Oslo"}, None, None, None]
    results = doc["streams"][0]["results"]
    assert [(r["tool_call_id"], r["is_error"]) for r in results] == [("call_bad", True), ("call_inv", True), ("call_json", True)]
    assert [r["content"] for r in results] == [c["reason"] for c in calls[1:]]


def test_reasons_do_not_quote_argument_text_without_reveal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "mixed.sse", MIXED)
    tools = write(tmp_path, "tools.json", json.dumps(TOOLS))
    assert main(["assemble", str(cap), "--tools", str(tools), "--json"]) == 0
    out, _ = capsys.readouterr()
    assert SECRET not in out
    assert main(["assemble", str(cap), "--tools", str(tools)]) == 0
    out, _ = capsys.readouterr()
    assert SECRET not in out


def test_reveal_lets_reasons_quote_argument_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "mixed.sse", MIXED)
    tools = write(tmp_path, "tools.json", json.dumps(TOOLS))
    doc = run_json(capsys, str(cap), "--tools", str(tools), "--reveal")
    bad = doc["streams"][0]["calls"][1]
    assert bad["reason"].startswith("schema_invalid") and SECRET in bad["reason"]
    assert bad["arguments"] is None  # reveal widens reasons, not the latch


def test_table_lists_names_and_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "mixed.sse", MIXED)
    tools = write(tmp_path, "tools.json", json.dumps(TOOLS))
    assert main(["assemble", str(cap), "--tools", str(tools)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines[0].startswith("stream 0  openai-chat  end=complete")
    rows = {cid: line for line in lines for cid in ("call_ok", "call_bad", "call_inv", "call_json") if cid in line and "result ->" not in line}
    assert "get_weather" in rows["call_ok"] and "COMMITTED" in rows["call_ok"]
    assert "FAILED" in rows["call_bad"] and "schema_invalid" in rows["call_bad"]
    assert "invented_tool" in rows["call_inv"] and "unknown_tool" in rows["call_inv"]
    assert "FAILED" in rows["call_json"] and "invalid_json" in rows["call_json"]
    assert sum(1 for line in lines if "result -> " in line) == 3
    assert '"Oslo"' not in out  # the table never shows argument text, even of committed calls


def test_table_for_a_stream_without_calls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "text.sse", openai_sse(openai_tool_chunks([])))
    assert main(["assemble", str(cap)]) == 0
    assert "(no tool calls)" in capsys.readouterr().out


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = fail_line(capsys, str(tmp_path / "absent.sse"))
    assert "absent.sse" in err


@pytest.mark.parametrize(
    "content",
    [b"Hello, this is just some text.\nNothing to see here.\n", b'{"just": "json"}\n', b"\x00\x01\x02binary"],
    ids=["plain-text", "foreign-json", "binary"],
)
def test_unrecognised_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes) -> None:
    cap = write(tmp_path, "notes.txt", content)
    err = fail_line(capsys, str(cap))
    assert "notes.txt" in err


def test_pretty_printed_json_is_unrecognised_not_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "pretty.json", json.dumps({"choices": [{"index": 0}]}, indent=2))
    err = fail_line(capsys, str(cap))
    assert "pretty.json" in err


@pytest.mark.parametrize(
    ("tools_content", "needle"),
    [
        ("{not json", "tools.json"),
        (json.dumps([{"name": "t", "input_schema": {"type": "nope"}}]), "'t'"),
        (json.dumps([{"input_schema": {}}]), "missing 'name'"),
        (json.dumps({"no": "tools"}), "tools"),
    ],
    ids=["not-json", "invalid-schema", "no-name", "wrong-shape"],
)
def test_bad_tools_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], tools_content: str, needle: str) -> None:
    cap = write(tmp_path, "ok.sse", MIXED)
    tools = write(tmp_path, "tools.json", tools_content)
    err = fail_line(capsys, str(cap), "--tools", str(tools))
    assert needle in err


def test_missing_tools_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "ok.sse", MIXED)
    err = fail_line(capsys, str(cap), "--tools", str(tmp_path / "gone.json"))
    assert "gone.json" in err


def test_bad_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "ok.sse", MIXED)
    config = write(tmp_path, "c.yaml", "agent_stream_assemble:\n  max_tool_argument_bytes: -1\n")
    err = fail_line(capsys, str(cap), "--config", str(config))
    assert "max_tool_argument_bytes" in err


def test_config_limit_applies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "ok.sse", MIXED)
    config = write(tmp_path, "c.yaml", "agent_stream_assemble:\n  max_tool_argument_bytes: 16\n")
    doc = run_json(capsys, str(cap), "--config", str(config))
    states = [(c["state"], (c["reason"] or "").split(":")[0]) for c in doc["streams"][0]["calls"]]
    assert states[0] == ("committed", "")  # {"city": "Oslo"} is 16 bytes
    assert states[1] == ("failed", "arguments_exceed_max_bytes")


def test_dialect_option_skips_detection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "ok.sse", MIXED)
    doc = run_json(capsys, str(cap), "--dialect", "openai-chat")
    assert doc["streams"][0]["dialect"] == "openai-chat"


def test_truncated_stream_still_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "cut.sse", openai_sse(openai_tool_chunks([("c1", "f", ['{"a":1}'])], finish=False), done=False))
    doc = run_json(capsys, str(cap))
    stream = doc["streams"][0]
    assert stream["end"] == "truncated"
    assert stream["calls"][0]["state"] == "failed" and stream["calls"][0]["arguments"] is None
    assert stream["results"] == [{"tool_call_id": "c1", "is_error": True, "content": stream["calls"][0]["reason"]}]


def test_subprocess_entry_point(tmp_path: Path) -> None:
    cap = write(tmp_path, "two.sse", MIXED)
    exe = Path(sys.executable).parent / "toollatch"
    if not exe.exists():
        exe = ROOT / ".venv" / "bin" / "toollatch"
    done = subprocess.run([str(exe), "assemble", str(cap), "--json"], capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [c["call_id"] for c in doc["streams"][0]["calls"]] == ["call_ok", "call_bad", "call_inv", "call_json"]
    missing = subprocess.run([str(exe), "assemble", str(tmp_path / "nope.sse")], capture_output=True, timeout=60, check=False)
    assert missing.returncode == 2
    assert missing.stdout == b""
    assert missing.stderr.decode().count("\n") == 1 and b"nope.sse" in missing.stderr


def test_lone_surrogate_escape_in_arguments_does_not_crash_json_output(tmp_path: Path) -> None:
    cap = write(tmp_path, "sur.sse", openai_sse(openai_tool_chunks([("c1", "f", ['{"a":"\\ud800"}'])])))
    exe = Path(sys.executable).parent / "toollatch"
    done = subprocess.run([str(exe), "assemble", str(cap), "--json"], capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-300:]
    doc = json.loads(done.stdout)
    call = doc["streams"][0]["calls"][0]
    # either the latch refuses the text, or the document carries the escape faithfully
    assert call["state"] == "failed" or call["arguments"] == {"a": "\ud800"}


def _strict_json(text: str) -> Any:
    def no_constant(name: str) -> Any:
        raise ValueError(f"non-standard constant {name}")

    return json.loads(text, parse_constant=no_constant)


def test_json_output_is_strict_json_even_for_overflowing_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "inf.sse", openai_sse(openai_tool_chunks([("c1", "f", ['{"a":1e999}'])])))
    assert main(["assemble", str(cap), "--json"]) == 0
    out, _ = capsys.readouterr()
    _strict_json(out)


def test_json_output_is_strict_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = write(tmp_path, "mixed.sse", MIXED)
    assert main(["assemble", str(cap), "--json"]) == 0
    assert _strict_json(capsys.readouterr().out)["streams"]
