"""``benchmarks/assemble.py`` compares like with like: every implementation it times finds
the same argument text in the same input. (Its timings are never tested here.)"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from types import ModuleType
from typing import Any

import pytest

from toollatch.core.model import ArgsFragment, CallState

from .conftest import CAPTURES, ROOT, require_shared


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_assemble", ROOT / "benchmarks" / "assemble.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _committed(results: list[Any]) -> Counter[str]:
    return Counter(
        json.dumps(c.arguments, sort_keys=True) for r in results for c in r.calls if c.state is CallState.COMMITTED and c.bytes
    )


def _parsed(texts: dict[Any, str]) -> Counter[str]:
    return Counter(json.dumps(json.loads(t), sort_keys=True) for t in texts.values())


def _adapter_texts(ops: list[Any]) -> dict[Any, str]:
    parts: dict[Any, list[str]] = {}
    for op in ops:
        if isinstance(op, ArgsFragment):
            parts.setdefault(op.key, []).append(op.text)
    return {k: "".join(v) for k, v in parts.items()}


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_every_implementation_finds_the_synthetic_arguments(bench: ModuleType, dialect: str) -> None:
    build = bench.openai_stream if dialect == "openai" else bench.anthropic_stream
    floor = bench.floor_openai if dialect == "openai" else bench.floor_anthropic
    data = build(2, 3000, frag=7)
    wanted = Counter(json.dumps(json.loads(bench.synthetic_args(3000, c)), sort_keys=True) for c in range(2))
    assert _parsed(floor(data)) == wanted
    assert _parsed(bench.naive_split(data)) == wanted
    assert _committed(bench.toollatch(data)) == wanted
    adapter = "openai-chat" if dialect == "openai" else "anthropic"
    assert _parsed(_adapter_texts(bench.reader_and_adapter(data, adapter))) == wanted


@pytest.mark.parametrize("folder", ["openai-chat", "anthropic"])
def test_on_the_captures_toollatch_commits_what_the_floor_joins(bench: ModuleType, folder: str) -> None:
    require_shared(CAPTURES)
    floor = bench.floor_openai if folder == "openai-chat" else bench.floor_anthropic
    paths = sorted((CAPTURES / folder).glob("*.sse"))
    assert paths, f"no .sse captures in {CAPTURES / folder}"
    for path in paths:
        data = path.read_bytes()
        texts = {k: t for k, t in floor(data).items() if t.strip()}
        adapter_texts = {k: t for k, t in _adapter_texts(bench.reader_and_adapter(data, folder)).items() if t.strip()}
        assert sorted(adapter_texts.values()) == sorted(texts.values()), path.name
        results = bench.toollatch(data)
        if all(c.state is CallState.COMMITTED for r in results for c in r.calls):
            assert _committed(results) == _parsed(texts), path.name

