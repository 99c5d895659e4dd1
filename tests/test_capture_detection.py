"""Auto-detection: every recorded capture is recognised as its folder's dialect, with no
``--dialect``, through ``toollatch assemble`` (and the Bedrock captures also in their raw
binary event-stream form)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toollatch import Pipeline, iter_file
from toollatch.cli import main

from .conftest import CAPTURES, require_shared
from .test_eventstream import frames_of_jsonl

FOLDER_DIALECT = {
    "openai-chat": "openai-chat",
    "openai-responses": "openai-responses",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "other": "cohere",
}


def expected_dialect(path: Path) -> str:
    folder = path.parent.name
    if folder == "bedrock":
        # bedrock-*: ConverseStream or InvokeModelWithResponseStream, as the file names say
        return {"converse": "bedrock-converse", "invoke": "bedrock-invoke"}[path.name.split("-", 1)[0]]
    return FOLDER_DIALECT[folder]


def all_captures() -> list[Path]:
    if not CAPTURES.is_dir():
        return []
    return sorted(p for p in CAPTURES.glob("*/*") if p.suffix in (".sse", ".jsonl"))


FILES = all_captures()
PARAMS = [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in FILES] or [pytest.param(None, id="no-captures")]


def need(path: Path | None) -> Path:
    if path is None:
        require_shared(CAPTURES)
        pytest.skip("no captures found")
    return path


def test_every_folder_is_known_and_present() -> None:
    require_shared(CAPTURES)
    folders = {p.parent.name for p in FILES}
    assert folders == {*FOLDER_DIALECT, "bedrock"}


@pytest.mark.parametrize("path", PARAMS)
def test_capture_is_detected_as_its_folders_dialect(path: Path | None, capsys: pytest.CaptureFixture[str]) -> None:
    path = need(path)
    assert main(["assemble", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    streams = json.loads(out)["streams"]
    assert streams and {s["dialect"] for s in streams} == {expected_dialect(path)}
    # detection is made from the first events, not by looking at the whole file
    pipeline = Pipeline()
    for event in iter_file(path):
        pipeline.feed(event)
        if pipeline.dialect is not None:
            break
    assert pipeline.dialect == expected_dialect(path)


@pytest.mark.parametrize("path", [p for p in PARAMS if p.values[0] is None or p.values[0].parent.name == "bedrock"])
def test_binary_bedrock_capture_is_detected(path: Path | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = need(path)
    target = tmp_path / (path.stem + ".eventstream")
    target.write_bytes(b"".join(frames_of_jsonl(path)))
    assert main(["assemble", str(target), "--json"]) == 0
    (stream,) = json.loads(capsys.readouterr().out)["streams"]
    assert stream["dialect"] == expected_dialect(path) and stream["end"] == "complete"
