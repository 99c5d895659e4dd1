"""Strict JSON (RFC 8259), the object rule, the registry and schema checks of the latch."""

from __future__ import annotations

import json

import pytest

from toollatch.core.finalize import StrictJSONError, check_arguments, strict_loads
from toollatch.core.registry import ToolRegistry

SECRET = "sk-live-Zq81mWx4NoLeak"

# ------------------------------------------------------------------ strict_loads


@pytest.mark.parametrize(
    "text",
    [
        '{"a": NaN}',
        '{"a": Infinity}',
        '{"a": -Infinity}',
        "NaN",
        "[Infinity]",
    ],
)
def test_non_standard_constants_are_rejected(text: str) -> None:
    with pytest.raises(StrictJSONError):
        strict_loads(text)


@pytest.mark.parametrize("text", ['{"a":1e999}', '{"a":-1E400}', "[1e309]", '{"a":{"b":[0, 2e308]}}'])
def test_numbers_that_overflow_to_infinity_are_rejected(text: str) -> None:
    with pytest.raises(StrictJSONError):
        strict_loads(text)


def test_large_but_finite_numbers_are_fine() -> None:
    assert strict_loads('{"a":1e308,"b":-1.7e308,"c":1e-400}') == {"a": 1e308, "b": -1.7e308, "c": 0.0}


@pytest.mark.parametrize(
    ("text", "fault_at"),
    [
        ('{"a":1} x', 8),  # trailing data after the object
        ('{"a":1}{"b":2}', 7),  # two values glued together
        ("[1] []", 4),
        ('{"a":1}\x00', 7),
    ],
)
def test_trailing_data_is_rejected(text: str, fault_at: int) -> None:
    with pytest.raises(StrictJSONError) as info:
        strict_loads(text)
    assert info.value.byte_offset == fault_at


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1,"a":2}',
        '{"a":1,"b":{"c":1,"c":1}}',  # nested, even with the same value
        '[{"x":true},{"y":1,"y":1}]',  # inside an array
    ],
)
def test_duplicate_keys_are_rejected(text: str) -> None:
    with pytest.raises(StrictJSONError) as info:
        strict_loads(text)
    assert "duplicate" in info.value.problem


def test_same_key_in_sibling_objects_is_fine() -> None:
    assert strict_loads('[{"a":1},{"a":2}]') == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1 /* c */}',
        '{"a":1} // c',
        '// c\n{"a":1}',
        '{"a":1,}',
        "[1,2,]",
        "{'a':1}",
        '{"a":\'x\'}',
        "{a:1}",
        "",
        "   ",
        '{"a":"x',
        "\ufeff{}",
    ],
)
def test_no_repair(text: str) -> None:
    with pytest.raises(StrictJSONError):
        strict_loads(text)


@pytest.mark.parametrize("text", [' {"a":1}', '{"a":1} ', '\n\t {"a":1}\r\n '])
def test_surrounding_whitespace_is_accepted(text: str) -> None:
    assert strict_loads(text) == {"a": 1}


def test_valid_values_parse() -> None:
    assert strict_loads('{"a":[1,2.5,-3e2,true,false,null,"é\\u00e9"]}') == {"a": [1, 2.5, -300.0, True, False, None, "éé"]}
    assert strict_loads('"x"') == "x"


@pytest.mark.parametrize(
    "prefix",
    ["é", "日本語", "🙂🙂", "aé日🙂"],
)
def test_byte_offset_counts_utf8_bytes(prefix: str) -> None:
    # the fault comes after multibyte characters: the offset is in bytes, not characters
    text = '{"k":"' + prefix + '",}'
    with pytest.raises(StrictJSONError) as info:
        strict_loads(text)
    good = '{"k":"' + prefix + '",'
    assert info.value.byte_offset == len(good.encode("utf-8"))
    assert info.value.byte_offset != len(good)
    assert f"at byte {info.value.byte_offset}" in str(info.value)


def test_trailing_data_offset_after_multibyte() -> None:
    text = '{"k":"日本"} x'
    with pytest.raises(StrictJSONError) as info:
        strict_loads(text)
    assert info.value.byte_offset == len('{"k":"日本"} '.encode())


def test_error_message_does_not_quote_the_text() -> None:
    for text in ['{"k":"' + SECRET + '",}', '{"k":"' + SECRET + '"} ' + SECRET, '{"' + SECRET + '":1,"' + SECRET + '":2}']:
        with pytest.raises(StrictJSONError) as info:
            strict_loads(text)
        assert SECRET not in str(info.value)


def test_strict_json_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        strict_loads("{")


# ------------------------------------------------------------------ check_arguments

TOOLS = ToolRegistry.from_tools(
    [
        {
            "type": "function",
            "function": {
                "name": "transfer",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "amount": {"type": "integer"},
                        "currency": {"enum": ["EUR", "USD"]},
                        "meta": {"type": "object", "properties": {"note": {"type": "integer"}}},
                    },
                    "required": ["amount"],
                    "additionalProperties": False,
                },
            },
        },
        {"type": "function", "function": {"name": "ping"}},
    ]
)


def test_empty_text_is_an_empty_object() -> None:
    verdict = check_arguments("", "ping", registry=None)
    assert verdict.arguments == {} and verdict.reason is None


def test_empty_text_still_meets_the_schema() -> None:
    verdict = check_arguments("", "transfer", registry=TOOLS)
    assert verdict.arguments is None
    assert verdict.reason is not None and verdict.reason.startswith("schema_invalid")
    assert "required" in verdict.reason


@pytest.mark.parametrize(("text", "kind"), [("[1]", "array"), ('"s"', "string"), ("1", "number"), ("null", "null"), ("true", "boolean")])
def test_non_object_is_rejected(text: str, kind: str) -> None:
    verdict = check_arguments(text, "ping", registry=None)
    assert verdict.arguments is None
    assert verdict.reason == f"arguments_not_object: got a JSON {kind}"


def test_non_object_allowed_when_rule_is_off() -> None:
    verdict = check_arguments("[1]", "ping", registry=None, must_be_object=False)
    assert verdict.arguments == [1] and verdict.reason is None


def test_invalid_json_reason() -> None:
    verdict = check_arguments('{"a":1', "ping", registry=None)
    assert verdict.arguments is None
    assert verdict.reason is not None and verdict.reason.startswith("invalid_json: ")
    assert "at byte 6" in verdict.reason


def test_unknown_tool() -> None:
    verdict = check_arguments("{}", "rm_rf", registry=TOOLS)
    assert verdict.arguments is None
    assert verdict.reason is not None and verdict.reason.startswith("unknown_tool")
    assert "rm_rf" in verdict.reason


def test_any_name_is_accepted_without_a_registry() -> None:
    assert check_arguments('{"x":1}', "anything", registry=None).arguments == {"x": 1}


def test_tool_without_schema_accepts_any_object() -> None:
    assert check_arguments('{"x":[1]}', "ping", registry=TOOLS).arguments == {"x": [1]}


def test_valid_arguments_pass() -> None:
    verdict = check_arguments('{"amount": 5, "currency": "EUR"}', "transfer", registry=TOOLS)
    assert verdict == type(verdict)({"amount": 5, "currency": "EUR"}, None)


@pytest.mark.parametrize(
    ("args", "pointer", "keyword"),
    [
        ({"amount": SECRET}, "/amount", "type"),
        ({"amount": 1, "currency": SECRET}, "/currency", "enum"),
        ({"amount": 1, "meta": {"note": SECRET}}, "/meta/note", "type"),
    ],
)
def test_schema_invalid_names_pointer_and_keyword_not_the_value(args: dict, pointer: str, keyword: str) -> None:
    text = json.dumps(args)
    verdict = check_arguments(text, "transfer", registry=TOOLS)
    assert verdict.arguments is None
    reason = verdict.reason
    assert reason is not None and reason.startswith("schema_invalid: ")
    assert pointer in reason
    assert keyword in reason
    assert SECRET not in reason


@pytest.mark.parametrize(
    "args",
    [{"amount": SECRET}, {"amount": 1, "currency": SECRET}, {"amount": 1, "meta": {"note": SECRET}}],
)
def test_schema_invalid_may_quote_the_value_with_reveal(args: dict) -> None:
    verdict = check_arguments(json.dumps(args), "transfer", registry=TOOLS, reveal=True)
    assert verdict.reason is not None and verdict.reason.startswith("schema_invalid: ")
    assert SECRET in verdict.reason


def test_schema_invalid_counts_further_issues() -> None:
    verdict = check_arguments(json.dumps({"amount": "x", "currency": "GBP"}), "transfer", registry=TOOLS)
    assert verdict.reason is not None and verdict.reason.endswith("(+1 more)")


def test_additional_property_is_reported_without_the_value() -> None:
    verdict = check_arguments(json.dumps({"amount": 1, "extra": SECRET}), "transfer", registry=TOOLS)
    assert verdict.reason is not None and verdict.reason.startswith("schema_invalid: /: additionalProperties")
    assert SECRET not in verdict.reason


def test_invalid_json_reason_never_quotes_the_text() -> None:
    for text in ['{"k":"' + SECRET + '",}', '{"k":"' + SECRET + '"', "[" + SECRET + "]"]:
        verdict = check_arguments(text, "ping", registry=None)
        assert verdict.reason is not None and verdict.reason.startswith("invalid_json")
        assert SECRET not in verdict.reason


def test_unknown_tool_is_checked_before_the_text() -> None:
    # identity comes first in the latch; an unknown tool never gets its text parsed
    verdict = check_arguments("not json", "nope", registry=TOOLS)
    assert verdict.reason is not None and verdict.reason.startswith("unknown_tool")


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "\\ud800"}',  # ASCII text: the lone surrogate is an escape
        '{"a": "\\uDFFF x"}',  # upper-case hex
        '{"\\udc00": 1}',  # in a key
        '{"a": ["ok", {"b": "\\ud83d"}]}',  # nested, high surrogate without its low half
        '{"a": "é \\ud800"}',  # non-ASCII text with an escaped lone surrogate
        '{"a": "é \ud800"}',  # a lone surrogate as a character (surrogatepass-decoded input)
    ],
)
def test_lone_surrogates_are_rejected_however_written(text: str) -> None:
    with pytest.raises(StrictJSONError, match="lone surrogate"):
        strict_loads(text)


@pytest.mark.parametrize("text", ['{"a": "\\ud83d\\ude00"}', '{"a": "😀"}', '{"a": "\\u00e9"}', '{"a": "plain"}'])
def test_surrogate_pairs_and_other_escapes_are_fine(text: str) -> None:
    assert strict_loads(text) == json.loads(text)
