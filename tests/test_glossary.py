"""Every code the assembler can emit has plain words in toollatch.web.pages.glossary (pages: tests/test_web_summary.py).

The codes are read from the assembler's own source, not listed by hand: reason codes from
:class:`~toollatch.core.model.Reason`, stream end kinds from ``StreamEndKind``, quirk names from
each ``Quirk("...")`` op, each ``self._quirk("...")`` and each SSE framing deviation
(``_framing.add("...")``, ``framing=("...",)``), diagnosis kinds from each ``{"kind": "..."}``
dict, and naive strategies from each ``_action("...")`` in :mod:`toollatch.redaction.naive`.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from toollatch.core.model import Reason, StreamEndKind
from toollatch.web.pages import glossary

ASSEMBLER = Path(__file__).resolve().parent.parent / "assembler"


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _strings(node: ast.expr | None) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


def emitted_codes() -> dict[str, set[str]]:
    """Codes by family, read from the assembler package's source and types."""
    codes: dict[str, set[str]] = {
        "reason": {r.value for r in Reason},
        "end": set(typing.get_args(StreamEndKind)),
        "quirk": set(),
        "diagnosis": set(),
        "strategy": set(),
    }
    for path in sorted(ASSEMBLER.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = _name(node.func)
                first = node.args[0] if node.args else None
                if name in ("Quirk", "_quirk"):
                    codes["quirk"].update(_strings(first))
                elif name == "add" and isinstance(node.func, ast.Attribute) and _name(node.func.value) == "_framing":
                    codes["quirk"].update(_strings(first))
                elif name == "_action" and path.name == "naive.py":
                    codes["strategy"].update(_strings(first))
                for kw in node.keywords:
                    if kw.arg == "framing":
                        codes["quirk"].update(_strings(kw.value))
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "variant" for t in node.targets):
                codes["quirk"].update(_strings(node.value.body if isinstance(node.value, ast.IfExp) else node.value))
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and key.value == "kind":
                        codes["diagnosis"].update(_strings(value))
    return codes


def test_the_code_scan_finds_each_family() -> None:
    codes = emitted_codes()
    assert {"role_repeated", "op_after_stream_end", "comment_line", "truncated_frame", "done_variant"} <= codes["quirk"]
    assert {"cut_off", "invalid", "incomplete", "schema"} <= codes["diagnosis"]
    assert {"execute_when_parses", "merge_by_position"} <= codes["strategy"]
    assert "invalid_json" in codes["reason"] and "truncated" in codes["end"]


@pytest.mark.parametrize("family", ["reason", "end", "quirk", "diagnosis", "strategy"])
def test_every_code_the_assembler_can_emit_has_plain_words(family: str) -> None:
    missing = sorted(code for code in emitted_codes()[family] if not glossary.plain(code, family))
    assert not missing, f"{family} codes without plain words in web/pages/glossary.py: {missing}"
