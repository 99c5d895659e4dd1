"""Where sessions come from: built-in demos, capture files on disk, uploads.

Every source is loaded into a :class:`LoadedSource` — the raw bytes, the number of provider
events in them, and the ``tools`` array when one is known — and checked with a dry run of
the assembler before a session is created, so an unreadable input becomes a message on the
page (:class:`SourceError`) instead of a failed session.

Provider events are parsed lazily, in 64 KiB pieces, each time a replay runs
(:meth:`LoadedSource.iter_events`): a session holds its input's bytes, never a list of
parsed events (a 100,000-event capture is ~20 MB of SSE but ~250 MB as parsed objects).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from toollatch.wire.capture import CaptureError, ProviderEvent
from toollatch.core.config import AssembleConfig
from toollatch.demo.demos import DEMOS, Demo
from toollatch.wire.intake import PushDecoder, iter_pushed
from toollatch.core.jsontext import rebuild
from toollatch.core.model import escape_surrogates
from toollatch.core.large import LARGE_PAYLOAD_CHARS, CappedPipeline
from toollatch.core.registry import RegistryError, ToolRegistry
from toollatch.observe.timing import ChunkTimes
from toollatch.wire.untrusted import parse_json

log = logging.getLogger("toollatch.web")

SourceKind = Literal["demo", "capture", "upload", "recording"]
#: File name suffixes listed from the captures directory.
CAPTURE_SUFFIXES = (".sse", ".jsonl")
#: Beside ``x.sse``, an optional ``x.tools.json`` holds the request's ``tools`` array.
TOOLS_SUFFIX = ".tools.json"
#: Bytes handed to the capture reader at a time when replaying.
READ_CHUNK = 64 * 1024
#: Bytes of input in one slice of a replay (:func:`iter_sliced`): a slice of the densest
#: input (a comment line, or an event that is not JSON, per few bytes) parses in tens of
#: milliseconds (benchmarks/stall_probe.py).
REPLAY_SLICE = 16 * 1024


class Slice:
    """The marker :func:`iter_sliced` yields after each slice of input it read."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SLICE"


#: See :class:`Slice`.
SLICE = Slice()


def tools_path(capture: Path) -> Path:
    """Where the tools array of ``capture`` lives: ``x.sse`` -> ``x.tools.json``."""
    return capture.with_name(capture.name.rsplit(".", 1)[0] + TOOLS_SUFFIX)


def registry_from_tools(tools: Any) -> ToolRegistry:
    """:meth:`ToolRegistry.from_tools` for a tools array of any JSON shape: every fault,
    including one the schema library trips over (a ``$schema`` that is not a string...),
    is raised as :class:`RegistryError` naming the entry, never as another exception."""
    try:
        return ToolRegistry.from_tools(tools)
    except RegistryError:
        raise
    except Exception as exc:  # jsonschema on a hostile schema: TypeError, AttributeError, RecursionError...
        raise RegistryError(f"a tool's JSON Schema cannot be compiled ({type(exc).__name__})") from None


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
    or the uploaded file name. ``data`` is the raw capture; ``count`` the number of
    provider events in it. ``cancel_after`` (demos only) is the number of provider
    events after which the replay presses Stop. ``stored_id`` is the id of the
    :class:`toollatch.web.store.StoredSource` it was loaded from or saved as, if any.
    """

    kind: SourceKind
    name: str
    title: str
    description: str
    data: bytes
    count: int
    dialect: str | None
    tools: list[dict[str, Any]] | None = None
    cancel_after: int | None = None
    stored_id: str | None = None
    #: When each chunk of ``data`` arrived (a recording, or a HAR with ``_chunks``); None: not recorded.
    times: ChunkTimes | None = None

    @property
    def size(self) -> int:
        """Bytes of the raw capture."""
        return len(self.data)

    @property
    def stream_data(self) -> bytes:
        """The stream a session of this source assembles (the exports and the triage read
        it): the capture itself. A live source re-tells a non-streaming body here."""
        return self.data

    def iter_events(self) -> Iterator[ProviderEvent]:
        """The provider events, parsed as they are read (a fresh iterator each call)."""
        return iter_events(self.data, self.name)

    def iter_slices(self) -> Iterator[ProviderEvent | Slice]:
        """The provider events with :data:`SLICE` after each slice of input read
        (:func:`iter_sliced`): what a replay on the event loop steps through."""
        return iter_sliced(self.data, self.name)

    def registry(self) -> ToolRegistry | None:
        """The registry of ``tools`` (None without tools); raises :class:`RegistryError`."""
        return registry_from_tools(self.tools) if self.tools is not None else None

    def meta(self) -> dict[str, Any]:
        """JSON description (no capture content)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "title": self.title,
            "dialect": self.dialect,
            "size": self.size,
            "events": self.count,
            "tools": [_tool_name(t) for t in self.tools] if isinstance(self.tools, list) else None,
            "cancel_after": self.cancel_after,
            "stored_id": self.stored_id,
        }


@dataclass(frozen=True)
class CaptureInfo:
    """A capture file found under the captures directory; ``size`` in bytes."""

    path: str
    size: int
    has_tools: bool


def _tool_name(tool: Any) -> str:
    """A tool's name, or ``?`` for an entry that has none (or is not an object)."""
    if not isinstance(tool, dict):
        return "?"
    spec = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    name = spec.get("name")
    return name if isinstance(name, str) and name else "?"


# ------------------------------------------------------------------ listing


def demo_list() -> list[Demo]:
    """Built-in demos in a stable order: by scenario, OpenAI then Anthropic, canary last."""
    return list(DEMOS.values())


def capture_list(root: Path | None) -> list[CaptureInfo]:
    """Every ``*.sse`` / ``*.jsonl`` under ``root`` (recursively), sorted by relative path.

    A file whose name is not UTF-8 (Python holds its bytes as lone surrogates) is left out:
    no page, link or form can name it."""
    if root is None or not root.is_dir():
        return []
    found: list[CaptureInfo] = []
    for path in sorted(root.rglob("*")):
        if path.suffix in CAPTURE_SUFFIXES and path.is_file():
            rel = path.relative_to(root).as_posix()
            if escape_surrogates(rel) is not rel:
                continue
            found.append(CaptureInfo(rel, path.stat().st_size, tools_path(path).is_file()))
    return found


# ------------------------------------------------------------------ loading


def iter_events(data: bytes, name: str, defer_over: int | None = None) -> Iterator[ProviderEvent]:
    """Provider events of ``data``, read in :data:`READ_CHUNK` pieces (bounded memory).
    ``defer_over``: a payload over that many characters is left unparsed
    (:data:`~toollatch.wire.capture.UNPARSED`), for a
    :class:`~toollatch.core.large.CappedPipeline` to parse and read at once
    (:func:`capped_events`)."""
    view = memoryview(data)
    return iter_pushed((bytes(view[i : i + READ_CHUNK]) for i in range(0, len(data), READ_CHUNK)), name, defer_over)


def capped_events(data: bytes, name: str) -> Iterator[ProviderEvent]:
    """:func:`iter_events` for a :class:`~toollatch.core.large.CappedPipeline`: a large
    payload is parsed where the pipeline reads it (with the garbage collector paused
    until its objects are let go, :func:`~toollatch.core.large.read_large_event`), not
    by the decoder, whose parse would leave them alive for the next collection to walk."""
    return iter_events(data, name, LARGE_PAYLOAD_CHARS)


def iter_sliced(data: bytes, name: str, size: int = REPLAY_SLICE) -> Iterator[ProviderEvent | Slice]:
    """The provider events of ``data`` (as :func:`iter_events`), with :data:`SLICE` after
    each ``size`` bytes of input read: a caller on the event loop stops at a marker and yields,
    so no input holds the loop for more than one slice's parsing, whatever its shape
    (megabytes of blank or comment lines before one event, say)."""
    decoder = PushDecoder(name, defer_over=LARGE_PAYLOAD_CHARS)  # a large event: read in a worker thread (web/replay/held.py)
    view = memoryview(data)
    for i in range(0, len(data), size):
        yield from decoder.feed(bytes(view[i : i + size]))
        yield SLICE
    yield from decoder.close()


def check(data: bytes, name: str, config: AssembleConfig, registry: ToolRegistry | None) -> tuple[int, str | None]:
    """Dry-run ``data`` through a pipeline; return ``(events, dialect)`` or raise :class:`SourceError`."""
    pipeline = CappedPipeline(config=config, registry=registry, name=name)  # as the session will assemble it
    count = 0
    try:
        for event in capped_events(data, name):
            count += 1
            pipeline.feed(event)
        pipeline.close()
    except CaptureError as exc:
        raise SourceError(f"Not a readable provider stream. {exc}") from None
    except Exception as exc:  # a bug must still not become a 500 or a traceback on screen
        log.error("dry run of %s raised %s", name, type(exc).__name__)
        raise SourceError(f"Cannot assemble {name}: the assembler failed ({type(exc).__name__}).") from None
    return count, pipeline.dialect


def parse_tools(raw: bytes, name: str) -> list[dict[str, Any]]:
    """A ``tools`` array (OpenAI or Anthropic shape) from JSON bytes, or raise :class:`SourceError`."""
    doc, problem = parse_json(raw)
    if problem is not None:
        raise SourceError(f"Tools file {name} is {problem}.")
    if isinstance(doc, dict) and "tools" in doc:
        doc = doc["tools"]
    try:
        registry_from_tools(doc).ensure_usable()  # a $ref that does not resolve is refused here
    except RegistryError as exc:
        raise SourceError(f"Tools file {name}: {exc}") from None
    return escaped_strings(list(doc))


def escaped_strings(value: Any) -> Any:
    """A copy of a JSON value with every lone surrogate in its strings and keys escaped
    (:func:`~toollatch.core.model.escape_surrogates`), as a stream's ops escape theirs: request
    tools and the like are stored and shown."""
    return rebuild(value, lambda v: escape_surrogates(v) if isinstance(v, str) else v, escape_surrogates)


def from_demo(demo: Demo) -> LoadedSource:
    """A demo (built in, or generated like :func:`toollatch.demo.stress.stress_demo`) as a source."""
    return LoadedSource("demo", demo.name, demo.title, demo.description, demo.wire, demo.events, demo.dialect, demo.tools, demo.cancel_after)


def load_demo(name: str, config: AssembleConfig) -> LoadedSource:
    """A built-in demo by name, or :class:`SourceError` (404)."""
    demo = DEMOS.get(name)
    if demo is None:
        raise SourceError(f"There is no demo called {name!r}.", status=404)
    return from_demo(demo)


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
    registry = registry_from_tools(tools) if tools is not None else None
    count, dialect = check(data, name, config, registry)
    kind_text = "Uploaded" if kind == "upload" else "Recorded"
    description = f"{kind_text} {dialect or 'provider'} stream, replayed through the assembler" + (
        "; arguments are checked against the tools file's schemas." if tools else "; no tools file, so names and schemas are not checked."
    )
    return LoadedSource(kind, name, title, description, data, count, dialect, tools)
