"""The incremental JSON prefix checker: validity of every prefix, break points, masking."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch.core.jsonprefix import JSONPrefixScanner, diagnose

from .conftest import CASES, require_shared
from .test_captures import assemble

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


def cuts(text: str, points: list[int]) -> list[str]:
    marks = sorted({min(p, len(text)) for p in points} | {0, len(text)})
    return [text[a:b] for a, b in zip(marks, marks[1:])] or [""]


@settings(max_examples=200, deadline=None)
@given(json_values, st.booleans(), st.lists(st.integers(0, 200), max_size=6))
def test_valid_json_is_complete_and_every_prefix_is_valid(value: Any, ascii_only: bool, points: list[int]) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    scanner = JSONPrefixScanner()
    for piece in cuts(text, points):
        scanner.feed(piece)
        assert scanner.error is None
    assert scanner.complete
    for end in range(len(text)):
        prefix = JSONPrefixScanner()
        prefix.feed(text[:end])
        assert prefix.error is None, text[:end]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[]:,"\\ 0123456789.-+eEtrufalsn\nx', max_size=14))
def test_agrees_with_a_strict_parser(text: str) -> None:
    def strict(t: str) -> bool:
        try:
            json.loads(t, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError:
            return False
        return True

    scanner = JSONPrefixScanner()
    scanner.feed(text)
    assert scanner.complete == strict(text), text
    if scanner.error is not None:
        # once broken, no continuation can repair it
        assert not any(strict(text + tail) for tail in ("", "}", "]", '"', "0", '"}', "]}", "}]"))


@settings(max_examples=200, deadline=None)
@given(json_values, st.lists(st.integers(0, 200), max_size=6))
def test_masking_keeps_structure_keys_and_byte_lengths(value: Any, points: list[int]) -> None:
    text = json.dumps(value, ensure_ascii=False)
    pieces = cuts(text, points)
    scanner = JSONPrefixScanner(mask=True)
    masked = [scanner.feed(p) for p in pieces]
    assert [len(m.encode("utf-8", "surrogatepass")) for m in masked] == [len(p.encode("utf-8", "surrogatepass")) for p in pieces]
    again = json.loads("".join(masked))

    def shape(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: shape(x) for k, x in v.items()}
        if isinstance(v, list):
            return [shape(x) for x in v]
        if isinstance(v, str):
            assert set(v) <= {"x"}
            return "str"
        return v

    def shape_of_original(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: shape_of_original(x) for k, x in v.items()}
        if isinstance(v, list):
            return [shape_of_original(x) for x in v]
        return "str" if isinstance(v, str) else v

    assert shape(again) == shape_of_original(json.loads(text))


def test_masking_hides_string_values_and_escapes() -> None:
    scanner = JSONPrefixScanner(mask=True)
    out = "".join(scanner.feed(p) for p in ['{"token": "sk-', 'live-é\\"\\u00e9', '", "n": 5}'])
    assert "sk-" not in out and "live" not in out and "\\u00e9" not in out
    assert json.loads(out) == {"token": "x" * len('sk-live-é\\"\\u00e9'.encode()), "n": 5}


@pytest.mark.parametrize(
    ("fragments", "expected"),
    [
        (['{"q": ', "alpha}"], {"kind": "invalid", "fragment_index": 1, "byte_offset": 6, "expected": "value"}),
        (['{"q": "é"', "}{"], {"kind": "invalid", "fragment_index": 1, "byte_offset": 11, "expected": "end of input"}),
        (['{"a":1,', "}"], {"kind": "invalid", "fragment_index": 1, "byte_offset": 7, "expected": "string key"}),
        (['{"a": [1, {"b": "x'], {"kind": "incomplete", "depth": 3, "expected": "string character or '\"'"}),
        (['{"a": nul'], {"kind": "incomplete", "depth": 1, "expected": "literal (true, false, null)"}),
        (["[1, 2]"], {"kind": "complete"}),
    ],
)
def test_diagnose(fragments: list[str], expected: dict[str, Any]) -> None:
    assert diagnose(fragments) == expected


@pytest.mark.parametrize(
    ("case", "diagnosis"),
    [
        ("b07-finish-tool-calls-but-json-unterminated.sse", {"kind": "incomplete", "depth": 1, "expected": "string character or '\"'"}),
        ("b11-parsable-early-then-more.sse", {"kind": "invalid", "fragment_index": 1, "byte_offset": 14, "expected": "end of input"}),
        ("b12-anthropic-invalid-json.sse", {"kind": "invalid", "fragment_index": 1, "byte_offset": 6, "expected": "value"}),
    ],
)
def test_every_invalid_json_case_shows_where_it_broke(case: str, diagnosis: dict[str, Any]) -> None:
    require_shared(CASES)
    (result,) = assemble(Path(CASES / case))
    assert result.calls[0].diagnosis == diagnosis


def test_semantic_and_schema_diagnoses_name_no_argument_text() -> None:
    from toollatch import ToolRegistry

    from .test_fixture_classes import assemble_bytes, wire

    (dup,) = assemble_bytes(wire("openai-chat", [("c1", "f", ['{"k":"sk-1",', '"k":"sk-2"}'])]))
    assert dup.calls[0].diagnosis == {"kind": "semantic", "problem": "duplicate object key"}
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "tags": {"items": {"type": "string"}}}, "required": ["n"]}
    registry = ToolRegistry.from_tools([{"name": "f", "input_schema": schema}])
    (bad,) = assemble_bytes(wire("anthropic", [("t1", "f", ['{"tags": ["ok", 7, "sk-3"]}'])]), registry=registry)
    assert bad.calls[0].diagnosis == {
        "kind": "schema",
        "errors": [{"pointer": "/", "keyword": "required"}, {"pointer": "/tags/1", "keyword": "type"}],
    }
    assert "sk-" not in json.dumps([dup.to_json(), bad.to_json()])


def test_a_call_cut_off_by_the_stream_says_where_its_text_stood() -> None:
    require_shared(CASES)
    (result,) = assemble(Path(CASES / "b20-connection-drop-mid-call.sse"))
    assert result.calls[0].diagnosis == {
        "kind": "cut_off",
        "stream_end": "truncated",
        "bytes": 27,
        "fragments": 1,
        "text": {"kind": "incomplete", "depth": 1, "expected": "string character or '\"'"},
    }


_PIECES = st.sampled_from(['{"', '"a', 'bc"', ":", "1", "2.5e", "-", '"\\u00e9', "\\n", '\\"', "é", "😀", "\t", ",", "}", "]", "[", "tru", "e", "null", '"', "\x01", "x", " "])


@given(st.lists(st.lists(_PIECES, max_size=6).map("".join), max_size=12))
@settings(max_examples=400, deadline=None)
def test_scanning_with_and_without_masking_reads_the_same(fragments: list[str]) -> None:
    # The unmasked scanner passes runs of plain string content in one step; the masked one
    # reads character by character: both must agree on every verdict and position.
    plain, masked = JSONPrefixScanner(), JSONPrefixScanner(mask=True)
    for fragment in fragments:
        assert plain.feed(fragment) == fragment
        masked.feed(fragment)
        assert (plain.error, plain.complete, plain.depth, plain._offset) == (masked.error, masked.complete, masked.depth, masked._offset)
    if plain.error is None:
        assert plain.expected == masked.expected
