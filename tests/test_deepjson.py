"""Tests for toollatch.wire.deepjson: json.loads without recursion, value and error alike."""

from __future__ import annotations

import json
import json.scanner
import random
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch.wire.deepjson import MAX_DEPTH, loads

from .test_envelope import json_values, outcome, same, ticks_while


def py_scanner_loads(text: str) -> Any:
    """json.loads by the standard library's pure-Python scanner (the reference deepjson follows)."""
    decoder = json.JSONDecoder()
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    if text.startswith("\ufeff"):
        return json.loads(text)
    return decoder.decode(text)


#: Digits other than 0-9 (Arabic-Indic, Devanagari, fullwidth): the pure-Python scanner's
#: number pattern (``\\d``) reads them, json.loads in C does not, so only json.loads judges them.
OTHER_DIGITS = "\u0661\u0663\u0969\uff17"


def assert_as_json_loads(text: str) -> None:
    got = outcome(loads, text)
    references = (json.loads,) if any(d in text for d in OTHER_DIGITS) else (json.loads, py_scanner_loads)
    for reference in references:
        want = outcome(reference, text)
        assert got[0] == want[0], (text, got, want)
        if got[0] == "value":
            assert same(got[1], want[1]), (text, got, want)
        else:
            assert got == want, text
            if got[1] is json.JSONDecodeError:
                ours, theirs = _error(loads, text), _error(reference, text)
                assert (ours.msg, ours.pos) == (theirs.msg, theirs.pos), text


def _error(parse: Any, text: str) -> json.JSONDecodeError:
    with pytest.raises(json.JSONDecodeError) as caught:
        parse(text)
    return caught.value


ODD = [
    "", " ", "\ufeff[]", "{", "[", "}", "]", "[1,]", "[,1]", "[1 2]", "{,}", '{"a" 1}', '{"a":}', '{"a":1,}',
    '{"a":1 "b":2}', '{"a":1,"a":2}', "{ }", "[ ]", "[\n]", " {\t} ", "[1] x", "[1]\u00a0", "nul", "tru", "fals",
    "NaN", "-Infinity", "Infinity", "-", "01", "1.", "1e", "-0", "1E+2", '"\\ud800x"', '"\\x"', '"\t"', '"ab',
    '{"a":[1,{"b":[{}]}],"c":{"d":null}}', "[[[]]] ", '{"a" : [ 1 , 2 ] , "b" : { } }', "[1,\n 2,\t3\r]",
    '{"a":1,', "[1,", '{"a"', '{"a":', "[" + "9" * 5000 + "]", "[1,2" + " " * 3, '{"\\u00e9":"\\ud83d\\ude00"}',
    "[1\u0663]", "[\u0661]", "[-\u0661]", "[1.\u0661]", "[1e\u0661]", '{"a":\uff17}', "[0\u0969]", '["\u0661", 1]',
]


@pytest.mark.parametrize("text", ODD)
def test_odd_texts_as_json_loads(text: str) -> None:
    assert_as_json_loads(text)


@settings(max_examples=300, deadline=None)
@given(json_values, st.sampled_from([None, 0, 2]), st.sampled_from([(",", ":"), (", ", ": "), (" , ", " : ")]))
def test_any_json_value_in_any_layout(value: Any, indent: int | None, separators: tuple[str, str]) -> None:
    assert_as_json_loads(json.dumps(value, indent=indent, separators=separators))


@settings(max_examples=500, deadline=None)
@given(json_values, st.data())
def test_any_broken_text_gives_json_loads_error(value: Any, data: st.DataObject) -> None:
    """Cut, doubled or overwritten at one place: the same error (message, position) or value."""
    text = json.dumps(value, indent=data.draw(st.sampled_from([None, 1])))
    at = data.draw(st.integers(0, len(text)))
    how = data.draw(st.sampled_from(["cut", "insert", "overwrite", "delete"]))
    char = data.draw(st.sampled_from(list('{}[],:" \t\n0-1eE.atfnuNI\\x' + OTHER_DIGITS)))
    if how == "cut":
        text = text[:at]
    elif how == "insert":
        text = text[:at] + char + text[at:]
    elif how == "overwrite":
        text = text[:at] + char + text[at + 1 :]
    else:
        text = text[:at] + text[at + 1 :]
    assert_as_json_loads(text)


@pytest.mark.parametrize("depth", [300, 600, MAX_DEPTH])
def test_nesting_far_deeper_than_python_recursion_parses_without_recursing(depth: int) -> None:
    arrays = "[" * depth + "]" * depth
    objects = '{"a": ' * depth + "1" + "}" * depth
    mixed = '{"a": [' * (depth // 2) + "null" + "]}" * (depth // 2)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100)  # loads must not need the stack: it would raise at once here
    try:
        values = [loads(text) for text in (arrays, objects, mixed)]
    finally:
        sys.setrecursionlimit(limit)
    for text, value in zip((arrays, objects, mixed), values):
        assert value == json.loads(text)


@pytest.mark.parametrize(("text", "kind"), [("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "array"), ('{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1), "object"), ("[" * 1_000_000, "array")])
def test_nesting_beyond_the_limit_is_a_recursion_error_as_json_loads_words_it(text: str, kind: str) -> None:
    with pytest.raises(RecursionError, match=f"maximum recursion depth exceeded while decoding a JSON {kind} from a unicode string"):
        loads(text)


def test_a_syntax_error_before_the_limit_is_reported_as_such() -> None:
    assert_as_json_loads("[" * 50 + "x" + "[" * 2000)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**32))
def test_random_deep_mixes_as_json_loads(depth: int, seed: int) -> None:
    rng = random.Random(seed)
    opened = [rng.choice("[{") for _ in range(depth)]
    text = "".join("[" if o == "[" else '{"k%d": ' % i for i, o in enumerate(opened)) + "0"
    text += "".join("]" if o == "[" else "}" for o in reversed(opened))
    assert_as_json_loads(text)
    assert_as_json_loads(text[: rng.randrange(len(text))])


def test_other_threads_run_while_a_deep_payload_of_megabytes_is_parsed() -> None:
    """Pure Python from end to end: the thread gives the GIL up while it parses."""
    text = "[" * 800 + ",".join(['{"a": [1, 2.5, "x", null, true]}'] * 150_000) + "]" * 800
    assert ticks_while(lambda: loads(text)) >= 5
