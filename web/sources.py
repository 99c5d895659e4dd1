"""Where sessions come from: built-in demos, capture files on disk, uploads.

Every source is loaded into a :class:`LoadedSource` — raw bytes parsed to provider events,
plus the ``tools`` array when one is known — and checked with a dry run of the assembler
before a session is created, so an unreadable input becomes a message on the page
(:class:`SourceError`) instead of a failed session.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from assembler.capture import CaptureError, ProviderEvent, read_capture
from assembler.config import AssembleConfig
from assembler.demos import DEMOS, Demo
from assembler.pipeline import assemble_events
from assembler.registry import RegistryError, ToolRegistry

log = logging.getLogger("toollatch.web")

SourceKind = Literal["demo", "capture", "upload"]
#: File name suffixes listed from the captures directory.
CAPTURE_SUFFIXES = (".sse", ".jsonl")
#: Beside ``x.sse``, an optional ``x.tools.json`` holds the request's ``tools`` array.
TOOLS_SUFFIX = ".tools.json"


def tools_path(capture: Path) -> Path:
    """Where the tools array of ``capture`` lives: ``x.sse`` -> ``x.tools.json``."""
    return capture.with_name(capture.name.rsplit(".", 1)[0] + TOOLS_SUFFIX)


class SourceError(Exception):
    """An input cannot be used; ``str(exc)`` is a message fit for the page.

    ``status`` is the HTTP status the page is served with (400, 404, 413 or 422).
    """

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class LoadedSource:
    """A readable input, ready for a session.

    ``name`` is the demo name, the capture's path relative to the captures directory,
    or the uploaded file name. ``size`` is in bytes. ``cancel_after`` (demos only) is the
    number of provider events after which the replay presses Stop.
    """

    kind: SourceKind
    name: str
    title: str
    description: str
    events: list[ProviderEvent]
    size: int
    dialect: str | None
    tools: list[dict[str, Any]] | None = None
    cancel_after: int | None = None

    def registry(self) -> ToolRegistry | None:
        return ToolRegistry.from_tools(self.tools) if self.tools is not None else None

    def meta(self) -> dict[str, Any]:
        """JSON description (no capture content)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "title": self.title,
            "dialect": self.dialect,
            "size": self.size,
            "events": len(self.events),
            "tools": [_tool_name(t) for t in self.tools] if self.tools is not None else None,
            "cancel_after": self.cancel_after,
        }


@dataclass(frozen=True)
class CaptureInfo:
    """A capture file found under the captures directory; ``size`` in bytes."""

    path: str
    size: int
    has_tools: bool


def _tool_name(tool: dict[str, Any]) -> str:
    spec = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    return str(spec.get("name", "?"))


# ------------------------------------------------------------------ listing


def demo_list() -> list[Demo]:
    """Built-in demos in a stable order: by scenario, OpenAI then Anthropic, canary last."""
    return list(DEMOS.values())


def capture_list(root: Path | None) -> list[CaptureInfo]:
    """Every ``*.sse`` / ``*.jsonl`` under ``root`` (recursively), sorted by relative path."""
    if root is None or not root.is_dir():
        return []
    found: list[CaptureInfo] = []
    for path in sorted(root.rglob("*")):
        if path.suffix in CAPTURE_SUFFIXES and path.is_file():
            rel = path.relative_to(root).as_posix()
            found.append(CaptureInfo(rel, path.stat().st_size, tools_path(path).is_file()))
    return found


# ------------------------------------------------------------------ loading


def check(events: list[ProviderEvent], name: str, config: AssembleConfig, registry: ToolRegistry | None) -> str | None:
    """Dry-run ``events`` through a pipeline; return the dialect or raise :class:`SourceError`."""
    try:
        results = assemble_events(events, config=config, registry=registry, name=name)
    except CaptureError as exc:
        raise SourceError(f"Not a readable provider stream. {exc}") from None
    except Exception as exc:  # a bug must still not become a 500 or a traceback on screen
        log.error("dry run of %s raised %s", name, type(exc).__name__)
        raise SourceError(f"Cannot assemble {name}: the assembler failed ({type(exc).__name__}).") from None
    return results[0].dialect if results else None


def parse_tools(raw: bytes, name: str) -> list[dict[str, Any]]:
    """A ``tools`` array (OpenAI or Anthropic shape) from JSON bytes, or raise :class:`SourceError`."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SourceError(f"Tools file {name} is not UTF-8 text.") from None
    except json.JSONDecodeError as exc:
        raise SourceError(f"Tools file {name} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.") from None
    if isinstance(doc, dict) and "tools" in doc:
        doc = doc["tools"]
    try:
        ToolRegistry.from_tools(doc)
    except RegistryError as exc:
        raise SourceError(f"Tools file {name}: {exc}") from None
    return list(doc)


def load_demo(name: str, config: AssembleConfig) -> LoadedSource:
    """A built-in demo by name, or :class:`SourceError` (404)."""
    demo = DEMOS.get(name)
    if demo is None:
        raise SourceError(f"There is no demo called {name!r}.", status=404)
    events = read_capture(demo.wire, name=f"demo:{name}")
    return LoadedSource("demo", name, demo.title, demo.description, events, len(demo.wire), demo.dialect, demo.tools, demo.cancel_after)


def load_capture(root: Path | None, rel: str, config: AssembleConfig) -> LoadedSource:
    """A capture by path relative to ``root``; only listed files are served (no traversal)."""
    listed = {c.path: c for c in capture_list(root)}
    if root is None or rel not in listed:
        raise SourceError(f"There is no capture {rel!r} in the captures directory.", status=404)
    path = root / rel
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"Cannot read capture {rel}: {exc.strerror}.", status=422) from None
    tools = None
    if listed[rel].has_tools:
        beside = tools_path(path)
        tools = parse_tools(beside.read_bytes(), beside.name)
    return _from_bytes("capture", rel, data, tools, config, title=rel)


def load_upload(filename: str, data: bytes, tools_raw: bytes | None, tools_name: str, config: AssembleConfig) -> LoadedSource:
    """An uploaded capture (raw SSE or JSON Lines) and optional tools file."""
    name = Path(filename or "upload").name[:200] or "upload"
    if not data.strip():
        raise SourceError(f"{name} is empty: upload a raw SSE capture or JSON Lines of provider events.", status=400)
    tools = parse_tools(tools_raw, tools_name) if tools_raw else None
    return _from_bytes("upload", name, data, tools, config, title=f"Upload: {name}")


def _from_bytes(
    kind: SourceKind, name: str, data: bytes, tools: list[dict[str, Any]] | None, config: AssembleConfig, *, title: str
) -> LoadedSource:
    try:
        events = read_capture(data, name=name)
    except CaptureError as exc:
        raise SourceError(f"Not a readable capture. {exc}") from None
    registry = ToolRegistry.from_tools(tools) if tools is not None else None
    dialect = check(events, name, config, registry)
    description = f"{len(events)} provider events, {len(data):,} bytes" + (f", {len(tools)} tools" if tools else "")
    return LoadedSource(kind, name, title, description, events, len(data), dialect, tools)
