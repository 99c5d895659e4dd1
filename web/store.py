"""Persistent sources: uploads, pastes, recordings and captures kept in SQLite.

One database file, ``<data_dir>/toollatch.sqlite3``, in WAL mode. A single connection is
shared by every thread and guarded by a lock; each method is one short transaction, so
the store is safe to call from request handlers, replay tasks and worker threads alike.

A source is the raw bytes of a stream (never parsed events) plus a little metadata.
Request headers and cookies are never stored: callers pass only the body and the tools.
``set_summary`` records what a replay found (tool names, verdicts, quirks) so that
:meth:`Store.search` can filter without re-reading the bytes.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

_T = TypeVar("_T")

#: The file name of the database inside the data directory.
DB_NAME = "toollatch.sqlite3"
#: Accepted values of ``StoredSource.kind``.
KINDS = ("upload", "recording", "capture")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sources (
    id      TEXT PRIMARY KEY,
    kind    TEXT NOT NULL,
    name    TEXT NOT NULL,
    created REAL NOT NULL,
    size    INTEGER NOT NULL,
    tools   TEXT,
    meta    TEXT NOT NULL,
    summary TEXT,
    body    BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS sources_created ON sources (created);
CREATE TABLE IF NOT EXISTS source_terms (
    source_id TEXT NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    field     TEXT NOT NULL,
    value     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS source_terms_lookup ON source_terms (field, value);
CREATE INDEX IF NOT EXISTS source_terms_source ON source_terms (source_id);
"""

#: Summary keys indexed for search, and the field name each is stored under.
_SUMMARY_FIELDS = {"tools": "tool", "verdicts": "verdict", "quirks": "quirk"}


@dataclass
class StoredSource:
    """One stored stream. ``body`` is ``None`` in listings and search results.

    ``kind``: ``"upload"`` (file or paste), ``"recording"`` (a live stream recorded by
    the proxy) or ``"capture"``. ``created``: unix seconds. ``size``: body length in
    bytes. ``tools``: the request's tools array when known. ``meta``: free-form JSON
    object (e.g. detected format, HAR entry). ``summary``: the last :meth:`Store.set_summary`.
    """

    id: str
    kind: str
    name: str
    created: float
    size: int
    tools: list[Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    body: bytes | None = None
    summary: dict[str, Any] | None = None


class Store:
    """SQLite-backed source store under ``data_dir`` (created if missing)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.data_dir / DB_NAME
        self._lock = threading.Lock()
        #: The threads the event loop's calls run in (:meth:`off_loop`): the store's own, so
        #: that requests waiting for it (a save of 50 MiB holds its lock) never take up the
        #: loop's default pool, which other work (the proxy's) needs meanwhile.
        self._threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="toollatch-store")
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA busy_timeout=5000")
            self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the connection; the store is unusable afterwards."""
        self._threads.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            self._conn.close()

    async def off_loop(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``fn(*args, **kwargs)`` (a call that reaches this store: its queries wait for its
        lock) run in one of the store's own threads, awaited: how the event loop calls it."""
        return await asyncio.get_running_loop().run_in_executor(self._threads, partial(fn, *args, **kwargs))

    def save(
        self,
        *,
        kind: str,
        name: str,
        body: bytes,
        tools: list[Any] | None = None,
        meta: dict[str, Any] | None = None,
        summary: dict[str, Any] | None = None,
    ) -> str:
        """Store ``body`` (with its ``summary``, as :meth:`set_summary` takes it) and return its new id.

        One transaction: the row, its search terms and its summary are stored together or
        not at all, so a crash or a failure in between never leaves a row search cannot
        find. Raises :class:`ValueError` for an unknown ``kind``; a string that cannot be
        stored (text is UTF-8) raises :class:`UnicodeEncodeError` and stores nothing.
        """
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        source_id = uuid.uuid4().hex[:16]
        row = (
            source_id,
            kind,
            name,
            time.time(),
            len(body),
            None if tools is None else json.dumps(tools),
            json.dumps(meta or {}),
            None if summary is None else json.dumps(summary),
            sqlite3.Binary(bytes(body)),
        )
        terms = [(source_id, "request_tool", n) for n in tool_names(tools)]
        if summary is not None:
            terms += _summary_terms(source_id, summary)
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.execute(
                    "INSERT INTO sources (id, kind, name, created, size, tools, meta, summary, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
                self._conn.executemany("INSERT INTO source_terms (source_id, field, value) VALUES (?, ?, ?)", terms)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return source_id

    def get(self, source_id: str, *, with_body: bool = True) -> StoredSource | None:
        """The source with its body (``body`` None when ``with_body`` is false), or ``None``."""
        columns = "id, kind, name, created, size, tools, meta, summary" + (", body" if with_body else "")
        with self._lock:
            row = self._conn.execute(f"SELECT {columns} FROM sources WHERE id = ?", (source_id,)).fetchone()
        if row is None:
            return None
        return _source(row[:8], body=bytes(row[8]) if with_body else None)

    def list(self, *, kind: str | None = None) -> list[StoredSource]:
        """Every source (of ``kind``, if given), oldest first, without bodies."""
        sql = "SELECT id, kind, name, created, size, tools, meta, summary FROM sources"
        params: tuple[Any, ...] = ()
        if kind is not None:
            sql += " WHERE kind = ?"
            params = (kind,)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY created, rowid", params).fetchall()
        return [_source(r) for r in rows]

    def delete(self, source_id: str) -> bool:
        """Remove a source; ``True`` if it existed."""
        with self._lock:
            cur = self._conn.execute("DELETE FROM sources WHERE id = ?", (source_id,))
        return cur.rowcount > 0

    def set_summary(self, source_id: str, summary: dict[str, Any]) -> None:
        """Record what a replay found, for search.

        ``summary`` is a JSON object; its ``tools``, ``verdicts`` and ``quirks`` lists of
        strings are indexed (tool names, verdicts such as ``"invalid_json"``, quirk
        names). Other keys are kept but not indexed. Replaces any earlier summary.
        """
        terms = _summary_terms(source_id, summary)
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                cur = self._conn.execute("UPDATE sources SET summary = ? WHERE id = ?", (json.dumps(summary), source_id))
                if cur.rowcount:
                    self._conn.execute("DELETE FROM source_terms WHERE source_id = ? AND field != 'request_tool'", (source_id,))
                    self._conn.executemany("INSERT INTO source_terms (source_id, field, value) VALUES (?, ?, ?)", terms)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def search(self, *, tool: str | None = None, verdict: str | None = None, quirk: str | None = None) -> list[StoredSource]:
        """Sources matching every given filter, oldest first, without bodies.

        ``tool`` matches a tool name case-insensitively as a substring (a name in the
        summary's ``tools`` or in the stored request tools); ``verdict`` and ``quirk`` match
        exactly (case-insensitive). No filter: the same as :meth:`list`.
        """
        clauses: list[str] = []
        params: list[Any] = []
        if tool:
            clauses.append(
                "EXISTS (SELECT 1 FROM source_terms t WHERE t.source_id = s.id"
                " AND t.field IN ('tool', 'request_tool') AND instr(lower(t.value), ?) > 0)"
            )
            params.append(tool.lower())
        for fld, value in (("verdict", verdict), ("quirk", quirk)):
            if value:
                clauses.append(
                    "EXISTS (SELECT 1 FROM source_terms t WHERE t.source_id = s.id AND t.field = ? AND lower(t.value) = ?)"
                )
                params += [fld, value.lower()]
        sql = "SELECT s.id, s.kind, s.name, s.created, s.size, s.tools, s.meta, s.summary FROM sources s"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY s.created, s.rowid", params).fetchall()
        return [_source(r) for r in rows]


def tool_names(tools: object) -> list[str]:
    """Tool names in a request's tools array (OpenAI Chat/Responses, Anthropic, Gemini).

    ``tools`` is whatever JSON the request carried: anything that is not a list gives no
    names, and an entry that is not a tool (not an object, a name that is not a string, a
    ``functionDeclarations`` that is not a list) is skipped. Never raises.
    """
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
        elif isinstance(tool.get("name"), str):
            names.append(tool["name"])
        for field_name in ("functionDeclarations", "function_declarations"):
            declarations = tool.get(field_name)
            for decl in declarations if isinstance(declarations, list) else []:
                if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                    names.append(decl["name"])
    return list(dict.fromkeys(n for n in names if n))


def _summary_terms(source_id: str, summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(source_id, fld, str(v)) for key, fld in _SUMMARY_FIELDS.items() for v in _strings(summary.get(key))]


def _strings(values: object) -> Iterable[str]:
    if isinstance(values, (list, tuple, set)):
        return [v for v in values if isinstance(v, str) and v]
    return []


def _source(row: tuple[Any, ...], *, body: bytes | None = None) -> StoredSource:
    source_id, kind, name, created, size, tools, meta, summary = row
    return StoredSource(
        id=source_id,
        kind=kind,
        name=name,
        created=float(created),
        size=int(size),
        tools=None if tools is None else json.loads(tools),
        meta=json.loads(meta) if meta else {},
        body=body,
        summary=None if summary is None else json.loads(summary),
    )
