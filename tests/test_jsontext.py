"""assembler/core/jsontext.py: JSON depth measured and JSON written without recursion limits."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from typing import Any

import pytest

from toollatch.core.jsontext import dumps, rebuild, text_depth, value_depth


def deep_list(depth: int) -> list[Any]:
    root: list[Any] = []
    cur = root
    for _ in range(depth - 1):
        nxt: list[Any] = []
        cur.append(nxt)
        cur = nxt
    return root


def random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 5 or roll < 0.3:
        return rng.choice([0, 1, -2.5, 1e300, 1e-7, True, False, None, "", "a\"b\\c", "é\n\t\u2028", "\ud800", "[{"])
    if roll < 0.65:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["k", "é", "x y", "", "[", '"']) + str(i): random_value(rng, depth + 1) for i in range(rng.randint(0, 3))}


def on_a_deep_stack(fn: Callable[[], Any], spare: int = 60) -> Any:
    """Run ``fn`` with only about ``spare`` frames left before the recursion limit."""

    def down(n: int) -> Any:
        return fn() if n == 0 else down(n - 1)

    frame, used = sys._getframe(), 0
    while frame is not None:
        frame, used = frame.f_back, used + 1
    return down(sys.getrecursionlimit() - used - spare)


# ------------------------------------------------------------------ depth


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('"[[["', 0),
        ("{}", 1),
        ("[1, 2]", 1),
        ('{"a": [1]}', 2),
        ('{"a": "]]]", "b": [[{"c": "{{{"}]]}', 4),
        ('["\\"[", ["\\\\"], [[]]]', 3),
        ('{"a": "[[[ open string', 1),  # a string left open hides the rest
        ('{"a": "x\\', 1),
        ("]]]}", 0),
        ("", 0),
        ("[" * 5000, 5000),
    ],
)
def test_text_depth(text: str, depth: int) -> None:
    assert text_depth(text) == depth


def test_text_depth_agrees_with_the_parsed_value() -> None:
    rng = random.Random(7)
    for _ in range(500):
        value = random_value(rng)
        for text in (json.dumps(value), json.dumps(value, indent=2, ensure_ascii=False)):
            assert text_depth(text) == value_depth(value) == value_depth(json.loads(text))


def test_value_depth_of_any_depth() -> None:
    assert value_depth(None) == 0 and value_depth({}) == 1 and value_depth({"a": (1, [2])}) == 3
    assert value_depth({"a": deep_list(20_000)}) == 20_001


# ------------------------------------------------------------------ rebuild


def test_rebuild_is_a_deep_copy_with_keys_in_order() -> None:
    value = {"b": [1, {"c": "x"}], "a": {"d": [None, True]}, "e": (1, 2)}
    copy = rebuild(value)
    assert copy == {**value, "e": [1, 2]} and list(copy) == ["b", "a", "e"]
    copy["b"][1]["c"] = "changed"
    assert value["b"][1]["c"] == "x"


def test_rebuild_applies_leaf_to_every_leaf_only() -> None:
    value = {"k": ["s", 1, {"k2": "t"}], "n": None}
    assert rebuild(value, lambda v: v.upper() if isinstance(v, str) else v) == {"k": ["S", 1, {"k2": "T"}], "n": None}
    assert rebuild("s", str.upper) == "S"


def test_rebuild_of_any_depth() -> None:
    copy = rebuild({"a": deep_list(20_000)})
    assert value_depth(copy) == 20_001


# ------------------------------------------------------------------ dumps


@pytest.mark.parametrize(
    "options",
    [{}, {"indent": 2}, {"indent": 0}, {"indent": 1, "ensure_ascii": True}, {"separators": (",", ":")}, {"allow_nan": False}],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default",
)
def test_dumps_is_json_dumps(options: dict[str, Any]) -> None:
    rng = random.Random(11)
    expected_options = {"ensure_ascii": False, **options}
    for _ in range(300):
        value = random_value(rng)
        assert dumps(value, **options) == json.dumps(value, **expected_options)


@pytest.mark.parametrize("indent", [None, 2])
def test_dumps_at_any_depth_gives_what_json_dumps_would(indent: int | None) -> None:
    value = {"a": deep_list(5000), "b": {"é": [1.5, None, {}]}}
    shallow = {"a": deep_list(3), "b": {"é": [1.5, None, {}]}}
    text = dumps(value, indent=indent)
    assert text_depth(text) == 5001
    # the same layout as json.dumps, level for level
    head = json.dumps(shallow, indent=indent, ensure_ascii=False)
    if indent is None:
        assert text == head.replace("[[[]]]", "[" * 5000 + "]" * 5000)
    else:
        assert text.startswith('{\n  "a": [\n    [\n      [\n') and text.endswith(head[head.index('\n  "b"') - 1 :])


def test_dumps_from_a_deep_call_stack() -> None:
    value = {"a": deep_list(200)}
    with pytest.raises(RecursionError):
        on_a_deep_stack(lambda: json.dumps(value, indent=2))
    assert on_a_deep_stack(lambda: dumps(value, indent=2)) == json.dumps(value, indent=2)
    assert on_a_deep_stack(lambda: dumps(value, separators=(",", ":"))) == json.dumps(value, separators=(",", ":"))


def test_dumps_fails_as_json_dumps_does() -> None:
    loop: list[Any] = []
    loop.append(loop)
    deep_loop = deep_list(3000)
    innermost = deep_loop
    while innermost:
        innermost = innermost[0]
    innermost.append(deep_loop)  # a cycle json.dumps cannot reach before its stack runs out
    for value in (loop, deep_loop):
        with pytest.raises(ValueError, match="Circular reference"):
            dumps(value)
    with pytest.raises(ValueError):
        dumps([deep_list(3000), float("nan")], allow_nan=False)
    with pytest.raises(TypeError):
        dumps([deep_list(3000), {(1, 2): 3}])
    with pytest.raises(TypeError):
        dumps([deep_list(3000), object()])
    assert dumps([deep_list(3000), {1: 2, None: 3, 1.5: True}]).endswith('{"1": 2, "null": 3, "1.5": true}]')


def test_rebuild_maps_keys_too_and_keeps_their_order() -> None:
    value = {"Key": [{"Inner": "v"}], "b": 1}
    assert rebuild(value, key=str.lower) == {"key": [{"inner": "v"}], "b": 1}
    assert list(rebuild(value, key=str.upper)) == ["KEY", "B"]
    assert value == {"Key": [{"Inner": "v"}], "b": 1}  # the original is untouched


def test_copy_json_copies_nested_subclasses_as_rebuild_does() -> None:
    from collections import OrderedDict, namedtuple

    from toollatch.core.jsontext import copy_json, rebuild

    pair = namedtuple("pair", "a b")
    value = {"a": OrderedDict(b=1), "t": pair(1, [2]), "l": [OrderedDict(c=[3])]}
    copied = copy_json(value)
    assert copied == rebuild(value) == {"a": {"b": 1}, "t": [1, [2]], "l": [{"c": [3]}]}
    assert type(copied["a"]) is dict and type(copied["t"]) is list and type(copied["l"][0]) is dict
    copied["a"]["b"] = 2
    assert value["a"]["b"] == 1  # a copy, never the original's container
