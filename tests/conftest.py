"""Shared fixtures: where the recorded captures and handed cases live."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TOOLLATCH_SHARED", ROOT.parent / "shared")).resolve()
CAPTURES = SHARED / "captures"
CASES = SHARED / "cases"


@pytest.fixture(scope="session", autouse=True)
def _session_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A temporary default ``Settings.data_dir`` for fixtures set up before any test's own
    (module-scoped servers): never the user's real data directory."""
    data_dir = tmp_path_factory.mktemp("session-data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOOLLATCH_DATA_DIR", str(data_dir))
        yield data_dir


@pytest.fixture(autouse=True)
def _tmp_data_dir(_session_data_dir: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test's default ``Settings.data_dir`` is a fresh temporary folder, never the user's."""
    data_dir = tmp_path_factory.mktemp("data")
    monkeypatch.setenv("TOOLLATCH_DATA_DIR", str(data_dir))
    return data_dir


def expected_files(folder: Path, *subdirs: str) -> list[Path]:
    """Capture/case files that have a ``.expected.json`` beside them (empty when absent)."""
    roots = [folder / s for s in subdirs] if subdirs else [folder]
    found: list[Path] = []
    for root in roots:
        if root.is_dir():
            found.extend(
                p for p in sorted(root.rglob("*")) if p.suffix in (".sse", ".jsonl") and p.with_name(p.name + ".expected.json").exists()
            )
    return found


def load_expected(path: Path) -> dict[str, Any]:
    return json.loads(path.with_name(path.name + ".expected.json").read_text(encoding="utf-8"))


def tools_file(path: Path) -> Path | None:
    tools = path.with_name(path.name.rsplit(".", 1)[0] + ".tools.json")
    return tools if tools.exists() else None


def require_shared(path: Path) -> None:
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set TOOLLATCH_SHARED to the folder holding captures/ and cases/)")
