"""The persistent source store (web/store.py): SQLite under a temporary data dir."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from toollatch.web.settings import Settings
from toollatch.web.store import DB_NAME, Store, tool_names

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def test_save_get_list_delete(tmp_path: Path) -> None:
    store = Store(tmp_path / "nested" / "data")
    assert (tmp_path / "nested" / "data" / DB_NAME).is_file()
    a = store.save(kind="upload", name="a.sse", body=b"data: {}\n\n", tools=TOOLS, meta={"format": "sse"})
    b = store.save(kind="recording", name="live", body=b"\x00\x01")
    assert a != b
    got = store.get(a)
    assert got is not None
    assert (got.kind, got.name, got.size, got.body, got.tools, got.meta) == ("upload", "a.sse", 10, b"data: {}\n\n", TOOLS, {"format": "sse"})
    listed = store.list()
    assert [s.id for s in listed] == [a, b]
    assert all(s.body is None for s in listed)
    assert [s.id for s in store.list(kind="recording")] == [b]
    assert store.delete(a) is True
    assert store.delete(a) is False
    assert store.get(a) is None
    assert store.get("nope") is None
    store.close()


def test_rejects_unknown_kind(tmp_path: Path) -> None:
    store = Store(tmp_path)
    with pytest.raises(ValueError):
        store.save(kind="weird", name="x", body=b"")
    store.close()


def test_wal_mode_and_survives_reopen(tmp_path: Path) -> None:
    store = Store(tmp_path)
    sid = store.save(kind="capture", name="c.jsonl", body=b"{}\n")
    store.close()
    with sqlite3.connect(tmp_path / DB_NAME) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    again = Store(tmp_path)
    assert [s.id for s in again.list()] == [sid]
    again.close()


def test_search_by_tool_verdict_quirk(tmp_path: Path) -> None:
    store = Store(tmp_path)
    a = store.save(kind="upload", name="a", body=b"a", tools=TOOLS)
    b = store.save(kind="upload", name="b", body=b"b")
    store.set_summary(b, {"tools": ["search_docs"], "verdicts": ["invalid_json", "committed"], "quirks": ["comment_line"]})
    assert [s.id for s in store.search(tool="WEATHER")] == [a]
    assert [s.id for s in store.search(tool="search")] == [b]
    assert [s.id for s in store.search(verdict="invalid_json")] == [b]
    assert [s.id for s in store.search(verdict="invalid")] == []
    assert [s.id for s in store.search(quirk="comment_line", verdict="committed")] == [b]
    assert [s.id for s in store.search()] == [a, b]
    # A new summary replaces the old one but keeps the request tools searchable.
    store.set_summary(a, {"tools": ["get_weather"], "verdicts": ["committed"], "quirks": []})
    store.set_summary(a, {"verdicts": ["schema_invalid"]})
    assert [s.id for s in store.search(verdict="committed")] == [b]
    assert [s.id for s in store.search(tool="get_weather", verdict="schema_invalid")] == [a]
    assert store.get(a).summary == {"verdicts": ["schema_invalid"]}  # type: ignore[union-attr]
    store.delete(b)
    assert store.search(quirk="comment_line") == []
    store.set_summary("missing", {"verdicts": ["committed"]})  # no such source: a no-op
    store.close()


def test_threads_share_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ids: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        for i in range(20):
            sid = store.save(kind="upload", name=f"n{i}", body=bytes(i))
            with lock:
                ids.append(sid)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(s.id for s in store.list()) == sorted(ids)
    assert len(ids) == 80
    store.close()


def test_tool_names_of_every_dialect() -> None:
    tools = [
        {"type": "function", "function": {"name": "a"}},
        {"name": "b", "input_schema": {}},
        {"functionDeclarations": [{"name": "c"}, {"name": "a"}]},
        "junk",
    ]
    assert tool_names(tools) == ["a", "b", "c"]
    assert tool_names(None) == []


def test_settings_data_dir_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOOLLATCH_DATA_DIR", str(tmp_path / "x"))
    assert Settings().data_dir == tmp_path / "x"
    monkeypatch.delenv("TOOLLATCH_DATA_DIR")
    assert Settings().data_dir.name.lower() == "toollatch"
