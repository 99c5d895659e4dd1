"""Tests for toollatch.wire.envelope: the envelope parse is ``json.loads``, value, type and error."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch.wire.envelope import LARGE_PAYLOAD_CHARS, parse_envelope, parse_plain, read_is_plain


def same(a: Any, b: Any) -> bool:
    """Equal values of the same types all the way down (``1 == 1.0`` is not enough; nor is ``0.0 == -0.0``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return bool(a == b)


def outcome(parse: Any, text: str) -> Any:
    try:
        return ("value", parse(text))
    except (ValueError, RecursionError) as exc:
        return ("error", type(exc), str(exc))


def plain_route(text: str) -> Any:
    """A payload read as the SSE reader reads one cut from a read :func:`read_is_plain`
    accepted: :func:`parse_plain`, and :func:`parse_envelope` where it refuses."""
    try:
        return ("value", parse_plain(text))
    except ValueError:
        return outcome(parse_envelope, text)


def assert_as_json_loads(text: str) -> None:
    want = outcome(json.loads, text)
    routes = [parse_envelope]
    # the text as a read of its own, and inside a read of other bytes
    for read in (text.encode("utf-8", "surrogatepass"), b"data: " + text.encode("utf-8", "surrogatepass") + b"\n\n"):
        if read_is_plain(read):
            routes.append(plain_route)
    for route in routes:
        got = outcome(route, text) if route is parse_envelope else route(text)
        assert got[0] == want[0], (text, got, want)
        if got[0] == "value":
            assert same(got[1], want[1]), (text, got, want)
        else:
            assert got == want


@pytest.mark.parametrize(
    "read",
    [
        b'data: {"index": 1234567890123456789}\n\n',  # 19 digits
        b'data: {"id": "call_12345678901234567890123"}\n\n',
        b"data: " + b"[" * 199 + b"{}" + b"]" * 199 + b"\n\n",  # 200 openers
        b'data: {"a": [1]}\n\n' * 100,  # 200 openers over 100 payloads
    ],
)
def test_a_read_with_a_long_digit_run_or_many_openers_is_not_plain(read: bytes) -> None:
    assert not read_is_plain(read)


def test_a_read_that_could_hold_a_large_payload_is_not_plain() -> None:
    # such a payload is parsed by the scanner that lets other threads run (parse_envelope)
    assert not read_is_plain(b'data: "' + b"x" * LARGE_PAYLOAD_CHARS + b'"\n\n')


def test_a_small_read_is_plain() -> None:
    assert read_is_plain(b'data: {"id": "call_1", "n": 123456789012345678, "a": [[1]]}\n\n' * 3)


@pytest.mark.parametrize(
    "text",
    [
        '{"index": 18446744073709551616}',  # beyond 64 bits: orjson would give a float
        '{"index": 18446744073709551615}',
        '{"n": -9223372036854775809}',
        '{"n": 123456789012345678901234567890}',
        '{"id": "call_12345678901234567890123"}',  # a long digit run in a string
        '{"x": NaN}',
        '{"x": Infinity, "y": -Infinity}',
        '{"x": 1e400}',
        '{"x": -1e400}',
        '{"s": "\\ud800"}',  # a lone surrogate escape
        '{"s": "\\udc00x"}',
        '{"s": "\ud800"}',  # a lone surrogate in the text itself
        '{"s": "\\ud83d\\ude00"}',
        '{"a": 1, "b": 2, "a": 3}',  # duplicate keys: the last value, the first position
        '{"x": -0, "y": -0.0, "z": 0.1, "w": 5e-324}',
        ' \t{"a": [1, 2.5, true, null]} \r\n',
        '{"a": 1} x',
        '{"a": 1}\u00a0',
        "",
        "[1,]",
        '{"a" 1}',
        '"\t"',
        "[" * 5000 + "]" * 5000,  # deeper than orjson nests
        "[" * 1010 + "]" * 1010,  # deeper than json.loads nests, not orjson
        '{"a":' * 1010 + "1" + "}" * 1010,
        "[" * 199 + "]" * 199,
        "[" * 100000,
    ],
)
def test_the_cases_orjson_would_read_differently(text: str) -> None:
    assert_as_json_loads(text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_any_json_value(value: Any) -> None:
    assert_as_json_loads(json.dumps(value))


@settings(max_examples=400, deadline=None)
@given(st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,24})?([eE][+-]?[0-9]{1,3})?", fullmatch=True))
def test_any_number_literal(number: str) -> None:
    assert_as_json_loads('{"n": %s}' % number)
    assert_as_json_loads(number)


# ---------------------------------------------------------------------- payloads of megabytes


def many_objects(count: int) -> str:
    calls = [{"index": i, "id": f"c{i}", "function": {"name": "f", "arguments": '{"a":1}', "n": [1.5, None, True, -7]}} for i in range(count)]
    return json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]})


def test_a_payload_over_the_large_limit_parses_as_json_loads() -> None:
    from toollatch.wire.envelope import LARGE_PAYLOAD_CHARS

    text = many_objects(8000)
    assert len(text) > LARGE_PAYLOAD_CHARS
    assert parse_envelope(text) == json.loads(text)
    padded = " " + text + " \n"
    assert parse_envelope(padded) == json.loads(padded)
    for bad in (text[:-1], text + "x", text.replace('"index"', "'index'", 1), "\ufeff" + text):
        with pytest.raises(json.JSONDecodeError) as ours:
            parse_envelope(bad)
        with pytest.raises(json.JSONDecodeError) as theirs:
            json.loads(bad)
        assert (ours.value.msg, ours.value.pos) == (theirs.value.msg, theirs.value.pos)
    deep = "[" * 900 + " " * LARGE_PAYLOAD_CHARS + "]" * 900  # deeper than Python code recurses: parsed without it
    assert parse_envelope(deep) == json.loads(deep)
    with pytest.raises(RecursionError):  # beyond deepjson.MAX_DEPTH
        parse_envelope("[" * 901 + " " * LARGE_PAYLOAD_CHARS + "]" * 901)


@pytest.mark.parametrize("digit", ["\u0661", "\u0663", "\uff17"])
@pytest.mark.parametrize("layout", ["[1{d}]", "[{d}]", '{{"n":-{d}}}', "[1.{d}]", "[2e{d}]", '["{d}", 1]'])
def test_a_large_payload_with_other_digits_than_ascii_parses_as_json_loads(layout: str, digit: str) -> None:
    """json.loads takes 0-9 only; the pure-Python scanner's pattern would read ``[1١]`` as ``[11]``."""
    text = layout.format(d=digit) + " " * LARGE_PAYLOAD_CHARS
    assert outcome(parse_envelope, text) == outcome(json.loads, text)  # value, or error message and position


def test_other_threads_run_while_a_payload_of_megabytes_is_parsed() -> None:
    # json.loads in C holds the GIL for the whole parse: no other thread runs meanwhile
    assert ticks_while(lambda: parse_envelope(many_objects(60000))) >= 5
    assert ticks_while(lambda: parse_envelope(many_objects(60000).replace('"f"', '"\u00e9"'))) >= 5  # non-ASCII


def ticks_while(work: Any) -> int:
    """How many times this thread woke (every millisecond) while ``work()`` ran in another."""
    import threading
    import time

    span: list[float] = []

    def run() -> None:
        span.append(time.perf_counter())
        work()
        span.append(time.perf_counter())

    worker = threading.Thread(target=run)
    ticks: list[float] = []
    worker.start()
    while worker.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    worker.join()
    return len([t for t in ticks if span[0] < t < span[1]])
