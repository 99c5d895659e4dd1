"""Conformance cases: a recorded stream and the outcome a correct assembler gives it.

A case is a capture file (raw SSE ``*.sse`` or JSON Lines ``*.jsonl``) with
``FILE.expected.json`` beside it::

    {"class": "strict JSON",              # bug class (packaged cases; shared ones are mapped)
     "end": "complete",                   # how the stream ends (informational)
     "cancel_after": 2,                   # optional: the user stops after this many provider events
     "calls": [{"id": "call_A" | null, "name": "lookup",
                "state": "committed" | "failed" | "cancelled",   # default committed
                "arguments": {...},                              # committed calls only
                "reason": "invalid_json",                        # optional
                "executor": "client" | "server"}],               # default client
     "note": "why"}

and an optional ``FILE.tools.json`` (the request's ``tools`` array). The packaged cases live
in ``assembler/conformance/cases/``; the shared ones are ``$TOOLLATCH_SHARED/cases`` (bug
reports) and ``$TOOLLATCH_SHARED/captures/*/`` (real provider captures), read where present.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

#: Bug classes, in table order.
CLASSES: tuple[str, ...] = (
    "index alignment",
    "ids and names",
    "strict JSON",
    "truncation and ends",
    "cancellation and results owed",
    "limits",
    "framing",
    "dialect items",
    "real captures",
)

#: Shared bug-report cases by file-name prefix (``$TOOLLATCH_SHARED/cases``).
SHARED_CLASSES: dict[str, str] = {
    "b01": "index alignment",
    "b02": "index alignment",
    "b04": "index alignment",
    "n03": "index alignment",
    "b10": "ids and names",
    "n04": "ids and names",
    "n13": "ids and names",
    "b06": "strict JSON",
    "b07": "strict JSON",
    "b11": "strict JSON",
    "b12": "strict JSON",
    "n01": "strict JSON",
    "n02": "strict JSON",
    "n08": "strict JSON",
    "n09": "strict JSON",
    "b20": "truncation and ends",
    "n07": "truncation and ends",
    "n11": "truncation and ends",
    "n12": "truncation and ends",
    "n14": "truncation and ends",
    "b15": "framing",
    "b18": "framing",
    "n05": "framing",
    "n06": "framing",
    "n16": "framing",
    "b14": "dialect items",
    "n10": "dialect items",
    "n15": "dialect items",
}

_SUFFIXES = (".sse", ".jsonl")


@dataclass(frozen=True)
class ExpectedCall:
    """One call of a case's expected outcome."""

    id: str | None
    name: str
    state: str
    arguments: Any
    reason: str | None
    executor: str


@dataclass(frozen=True)
class Case:
    """One conformance case. ``origin`` is ``packaged``, ``shared case`` or ``capture``."""

    name: str
    origin: str
    klass: str
    body: bytes
    calls: tuple[ExpectedCall, ...]
    end: str | None = None
    cancel_after: int | None = None
    tools: list[dict[str, Any]] | None = None
    note: str = ""
    path: str = field(default="", compare=False)

    @property
    def committed(self) -> list[ExpectedCall]:
        """The client calls an agent may execute, in order."""
        return [c for c in self.calls if c.state == "committed" and c.executor == "client"]


class CaseError(ValueError):
    """A case file or its expected outcome cannot be read; the message names the file."""


def load_case(path: Path, origin: str, klass: str | None = None) -> Case:
    """Read ``path`` and ``path.expected.json`` (and ``PATH_STEM.tools.json`` if present).

    Raises :class:`CaseError` naming the file when either cannot be read or parsed.
    """
    expected_path = path.with_name(path.name + ".expected.json")
    try:
        body = path.read_bytes()
        doc = json.loads(expected_path.read_text(encoding="utf-8"))
        calls = tuple(
            ExpectedCall(
                id=c.get("id"),
                name=c["name"],
                state=c.get("state", "committed"),
                arguments=c.get("arguments"),
                reason=c.get("reason"),
                executor=c.get("executor", "client"),
            )
            for c in doc["calls"]
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CaseError(f"{expected_path}: cannot read the case: {exc}") from None
    tools = None
    tools_path = path.with_name(path.name.rsplit(".", 1)[0] + ".tools.json")
    if tools_path.is_file():
        try:
            tools = json.loads(tools_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CaseError(f"{tools_path}: cannot read the tools: {exc}") from None
    return Case(
        name=path.name,
        origin=origin,
        klass=klass or doc.get("class") or "unclassified",
        body=body,
        calls=calls,
        end=doc.get("end"),
        cancel_after=doc.get("cancel_after"),
        tools=tools,
        note=doc.get("note", ""),
        path=str(path),
    )


def _case_files(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.iterdir() if p.suffix in _SUFFIXES and p.with_name(p.name + ".expected.json").is_file()
    )


def packaged_cases() -> list[Case]:
    """The synthetic cases installed with the package, at least one per bug class."""
    folder = Path(str(resources.files(__package__).joinpath("cases")))
    return [load_case(p, "packaged") for p in _case_files(folder)]


def shared_root() -> Path:
    """``$TOOLLATCH_SHARED``, default ``../shared`` (relative to the working directory)."""
    return Path(os.environ.get("TOOLLATCH_SHARED") or "../shared")


def shared_cases(root: Path | None = None) -> tuple[list[Case], list[str]]:
    """The shared bug-report cases and real captures under ``root`` (default
    :func:`shared_root`), and notes naming what was absent and so skipped."""
    root = root if root is not None else shared_root()
    cases: list[Case] = []
    notes: list[str] = []
    folder = root / "cases"
    if folder.is_dir():
        for p in _case_files(folder):
            cases.append(load_case(p, "shared case", SHARED_CLASSES.get(p.name[:3], "unclassified")))
    else:
        notes.append(f"{folder}: absent, shared bug-report cases skipped (set TOOLLATCH_SHARED)")
    captures = root / "captures"
    if captures.is_dir():
        for sub in sorted(p for p in captures.iterdir() if p.is_dir()):
            for p in _case_files(sub):
                cases.append(load_case(p, "capture", "real captures"))
    else:
        notes.append(f"{captures}: absent, real captures skipped (set TOOLLATCH_SHARED)")
    return cases, notes


def all_cases(root: Path | None = None) -> tuple[list[Case], list[str]]:
    """Packaged cases, then shared ones; with the skip notes of :func:`shared_cases`."""
    shared, notes = shared_cases(root)
    return packaged_cases() + shared, notes
