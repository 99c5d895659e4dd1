"""``toollatch assemble -`` reads standard input as it arrives; gzip-compressed captures are
read; every command's ``--help`` names the input formats and the defaults."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from toollatch.cli import build_parser, main
from toollatch.demo.mockwire import scenario_events

ROOT = Path(__file__).resolve().parent.parent
WIRE = b"".join(scenario_events("parallel", "openai-chat"))


def _assemble(*argv: str, stdin: bytes) -> dict:
    done = subprocess.run([sys.executable, "-m", "toollatch.cli", "assemble", *argv, "--json"], input=stdin, capture_output=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_dash_reads_standard_input_like_the_file(tmp_path: Path) -> None:
    path = tmp_path / "parallel.sse"
    path.write_bytes(WIRE)
    from_stdin = _assemble("-", stdin=WIRE)
    from_file = _assemble(str(path), stdin=b"")
    assert from_stdin["source"] == "<stdin>"
    assert from_stdin["streams"][0]["calls"] == from_file["streams"][0]["calls"]
    assert [c["state"] for c in from_stdin["streams"][0]["calls"]] == ["committed", "committed"]


def test_dash_reads_a_har_export_from_standard_input() -> None:
    har = {"log": {"entries": [{"request": {"method": "POST", "url": "https://api.openai.com/v1/chat/completions", "postData": {"text": "{}"}},
                                "response": {"status": 200, "content": {"mimeType": "text/event-stream", "text": WIRE.decode()}}}]}}
    doc = _assemble("-", stdin=json.dumps(har, indent=1).encode())
    assert [c["state"] for c in doc["streams"][0]["calls"]] == ["committed", "committed"]


def test_unreadable_standard_input_exits_2(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"<html>oops</html>\n")))
    assert main(["assemble", "-"]) == 2
    assert capsys.readouterr().err.startswith("toollatch: error: <stdin>")


def test_a_gzip_compressed_capture_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "parallel.sse.gz"
    path.write_bytes(gzip.compress(WIRE))
    assert main(["assemble", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["state"] for c in doc["streams"][0]["calls"]] == ["committed", "committed"]


@pytest.mark.parametrize("command", ["assemble", "serve", "mock", "export"])
def test_help_names_input_formats_and_defaults(command: str) -> None:
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    text = " ".join(sub.format_help().split())
    for action in sub._actions:
        if action.option_strings and action.dest not in ("help", "redact", "output", "json", "history") and action.help:
            assert "default" in action.help or action.required, f"{command} {action.option_strings[0]} names no default"
    if command in ("assemble", "serve"):
        for fmt in ("raw SSE", "JSON Lines", "JSON array", "HAR", "AWS event stream", "gzip"):
            assert fmt in text, fmt
    if command == "assemble":
        assert "- to read standard input" in text


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out.startswith("toollatch ")


@pytest.mark.parametrize("command", ["assemble", "export"])
def test_an_empty_or_unreadable_input_says_so_and_where(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As the dashboard words it: an empty file is empty; bytes no event can be read from
    fail at byte 0, not with a bare "no known provider stream found"."""
    for name, data, said in (
        ("empty.sse", b"", "empty.sse is empty"),
        ("junk.bin", b"\xff\xfe junk, no event\n\n", "junk.bin (byte 0): no known provider stream (no event could be read)"),
        ("cut.sse", b'data: {"object": "chat.completion.chunk", "choices": []}\n', "cut.sse (byte 0): no event could be read: the input ends inside its first SSE event"),
    ):
        (tmp_path / name).write_bytes(data)
        argv = [command, str(tmp_path / name)] + (["-o", str(tmp_path / "out.sse")] if command == "export" else [])
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err, err
