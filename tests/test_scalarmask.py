"""Every scalar of a call that did not commit is masked in a redacted reproducer; the
replay still gives the same verdict, reason and break point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toollatch import Pipeline, read_capture
from toollatch.cli import main
from toollatch.redaction.export import redact_capture
from toollatch.redaction.scalarmask import mask_scalars, mask_scalars_value

SECRETS = ("4111111111111111", "sk_live_SECRETKEY", "hunter2")

REPRO = (
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"pay",'
    b'"arguments":"{\\"card\\": 4111111111111111, \\"sk_live_SECRETKEY\\": true"}}]}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
)


def chat(*fragments: str, end: bool = True) -> bytes:
    out = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "pay", "arguments": ""}}]}}]}
    ]
    out += [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": f}}]}}]} for f in fragments]
    text = "".join(f"data: {json.dumps(e)}\n\n" for e in out)
    if end:
        text += 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
    return text.encode()


def verdicts(data: bytes) -> list[tuple[Any, ...]]:
    pipeline = Pipeline()
    for event in read_capture(data):
        pipeline.feed(event)
    pipeline.close()
    return [(c.state.value, c.reason, c.bytes, c.fragments, c.diagnosis) for r in pipeline.results() for c in r.calls]


def test_the_reported_reproducer_keeps_no_key_or_number_of_the_failed_call(tmp_path: Path) -> None:
    src = tmp_path / "repro.sse"
    src.write_bytes(REPRO)
    out = tmp_path / "out.sse"
    assert main(["export", "--redact", "-o", str(out), str(src)]) == 0
    for path in (out, tmp_path / "out.sse.report.json", tmp_path / "out.sse.md"):
        text = path.read_text()
        assert not [s for s in SECRETS if s in text], path.name
    assert verdicts(out.read_bytes()) == verdicts(REPRO)
    assert verdicts(REPRO)[0][0] == "failed"


def test_failing_ways_replay_to_the_same_verdict_reason_and_break_point() -> None:
    cases = [
        chat('{"hunter2": 4111111111111111', ", \"sk_live_SECRETKEY\": [true, null, fal", "se]}"),  # committed: sanity
        chat('{"hunter2": 4111111111111111, "sk_live_SECRETKEY": tr', "ue", end=False),  # truncated
        chat('{"hunter2": 4111111111111111, "sk_live_SECRETKEY" 1}'),  # invalid: break point
        chat('{"hunter2": 1, "hunter2": 4111111111111111}'),  # duplicate key
        chat('{"hunter2": -4111111111111111.5e+3, "k": "sk_live_SECRETKEY"} x'),  # trailing garbage
        chat('{"sk_live_SECRETKEY\\u0041": 01}'),  # leading zero
        chat('[4111111111111111, "hunter2"]'),  # not an object
        chat('{"hunter2": 1e999}'),  # non-finite
    ]
    for raw in cases:
        redacted = redact_capture(raw)
        assert verdicts(redacted) == verdicts(raw), raw
        if verdicts(raw)[0][0] != "committed":
            assert not [s for s in SECRETS if s.encode() in redacted], raw


def test_keys_stay_distinct_and_repeated_keys_stay_repeated() -> None:
    original = ['{"ab": 1, "cd": {"ab": 2}, "ab": 3, "e"', ": true}"]
    masked = mask_scalars(original)
    assert masked == ['{"xx": 1, "yx": {"xx": 1}, "xx": 1, "x"', ": null}"]
    assert [len(m.encode()) for m in masked] == [len(o.encode()) for o in original]
    assert mask_scalars(['{"é": "sk_live", "a": 0.25, "b": x']) == ['{"xx": "xxxxxxx", "x": 0.00, "y": x']


def test_a_value_is_masked_whole() -> None:
    assert mask_scalars_value({"card": 4111111111111111, "ok": False, "n": None, "s": ["hunter2"]}) == {
        "xxxx": 1000000000000000,
        "xx": False,
        "x": None,
        "y": ["xxxxxxx"],
    }


def test_gemini_partial_args_of_a_failed_call_keep_no_member_name_or_number() -> None:
    def chunk(call: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"functionCall": call}]}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate]}

    partial = [
        {"jsonPath": "$.sk_live_SECRETKEY", "numberValue": 4111111111111111, "willContinue": True},
        {"jsonPath": "$.hunter2[0]", "stringValue": "hunter2", "willContinue": True},
    ]
    events = [chunk({"name": "pay", "willContinue": True}), *(chunk({"partialArgs": [p], "willContinue": True}) for p in partial)]
    raw = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()  # no end: the call is cut off
    redacted = redact_capture(raw)
    assert not [s for s in SECRETS if s.encode() in redacted]
    assert verdicts(redacted) == verdicts(raw) and verdicts(raw)[0][0] == "failed"
