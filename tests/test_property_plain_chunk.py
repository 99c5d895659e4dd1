"""Property: an OpenAI Chat chunk read the one-step way (a plain chunk: known keys only, one
choice) gives the very ops, verdicts and quirks it gives read the general way.

A gateway's extra top-level key (``x_groq``, ``citations``...) sends the same chunk the
general way, so a stream with an extra key on every chunk must assemble exactly as the
plain stream does, whatever the subtle details of each chunk: a choice ``index`` that is
``True``, ``"0"`` or missing, ``usage`` ``{}``/``0``/``null``, ``tool_calls: null`` beside a
``role``, an entry with ``type`` and no ``id``, ``arguments`` that are not a string, an
empty ``finish_reason``, ``error: null``.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toollatch import Pipeline
from toollatch.wire.capture import DONE, ProviderEvent
from toollatch.dialects.openai_chat import OpenAIChatAdapter

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

MISSING = object()

#: One chunk of a tool-call turn, as (kind, details).
STEP = st.one_of(
    st.tuples(
        st.just("start"),
        st.integers(0, 2),
        st.sampled_from(["call_a", "call_b", "", None, MISSING]),
        st.sampled_from(["get", "", MISSING]),
        st.sampled_from(['{"a":', "{}", "", None, {"a": 1}, MISSING]),
    ),
    st.tuples(st.just("more"), st.sampled_from([0, 1, 2, True, "0", MISSING]), st.sampled_from(["1", "}", "", '{"b":2}', None, 3, {"x": 1}])),
    st.tuples(st.just("text"), st.sampled_from(["hi", "", None])),
    st.tuples(st.just("role"), st.sampled_from(["assistant", None, ""])),
    st.tuples(st.just("finish"), st.sampled_from(["tool_calls", "stop", "", None, 0])),
    st.tuples(st.just("usage"), st.sampled_from([{}, None, 0, {"total_tokens": 3}])),
    st.tuples(st.just("done")),
)
#: Subtle details laid over a chunk.
DETAIL = st.fixed_dictionaries(
    {},
    optional={
        "top": st.sampled_from([{"error": None}, {"usage": None}, {"usage": {}}, {"usage": 0}, {"system_fingerprint": None}]),
        "index": st.sampled_from([0, 1, True, "0", None, MISSING]),
        "choice": st.sampled_from([{"logprobs": None}, {"native_finish_reason": None}, {"finish_reason": ""}, {"finish_reason": 0}]),
        "delta": st.sampled_from([{"role": "assistant"}, {"tool_calls": None}, {"content": None}, {"role": None}, {"refusal": None}]),
        "entry": st.sampled_from([{"type": "function"}, {"id": None}, {"id": ""}, {"type": None}]),
        "function": st.sampled_from([{"name": None}, {"name": ""}]),
    },
)
EXTRAS = st.sampled_from([{"x_groq": {"id": "req_1"}}, {"citations": []}, {"x_request_id": None}])


def chunk(step: tuple[Any, ...], detail: dict[str, Any]) -> Any:
    """The chunk ``step`` describes, with ``detail`` laid over it."""
    kind = step[0]
    if kind == "done":
        return DONE
    top: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    if kind == "usage":
        return {**top, "choices": [], "usage": step[1]}
    choice: dict[str, Any] = {"index": 0}
    delta: dict[str, Any] = {}
    entry: dict[str, Any] | None = None
    if kind == "start":
        _, index, call_id, name, args = step
        function = {k: v for k, v in (("name", name), ("arguments", args)) if v is not MISSING}
        entry = {"index": index, "type": "function", "function": function}
        if call_id is not MISSING:
            entry["id"] = call_id
    elif kind == "more":
        entry = {"function": {"arguments": step[2]}}
        if step[1] is not MISSING:
            entry["index"] = step[1]
    elif kind == "text":
        delta["content"] = step[1]
    elif kind == "role":
        delta["role"] = step[1]
    elif kind == "finish":
        choice["finish_reason"] = step[1]
    if entry is not None:
        entry.update(detail.get("entry", {}))
        entry["function"].update(detail.get("function", {}))
        delta["tool_calls"] = [entry]
    delta.update({k: v for k, v in detail.get("delta", {}).items() if not (k == "tool_calls" and entry is not None)})
    choice["delta"] = delta
    if "index" in detail:
        if detail["index"] is MISSING:
            del choice["index"]
        else:
            choice["index"] = detail["index"]
    choice.update(detail.get("choice", {}))
    return {**top, "choices": [choice], **detail.get("top", {})}


def events(chunks: list[Any]) -> list[ProviderEvent]:
    return [ProviderEvent(None, c, i + 1, i, raw=c if c == DONE else json.dumps(c)) for i, c in enumerate(chunks)]


def with_extra(chunks: list[Any], extra: dict[str, Any]) -> list[Any]:
    return [{**c, **extra} if isinstance(c, dict) else c for c in chunks]


def assembled(evs: list[ProviderEvent]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pipeline = Pipeline("openai-chat", clock=lambda: 0.0)
    out = [e for ev in evs for e in pipeline.feed(ev)] + pipeline.close()
    return [e.to_json() for e in out], [r.to_json() for r in pipeline.results()]


@SETTINGS
@given(st.lists(st.tuples(STEP, st.one_of(st.just({}), DETAIL)), max_size=12), EXTRAS)
def test_a_plain_chunk_gives_the_ops_of_the_general_way(steps: list[Any], extra: dict[str, Any]) -> None:
    chunks = [chunk(step, detail) for step, detail in steps]
    plain, general = OpenAIChatAdapter(), OpenAIChatAdapter()
    for a, b in zip(events(chunks), events(with_extra(chunks, extra))):
        assert plain.feed(a) == general.feed(b), a.data
    assert plain.close() == general.close()


@SETTINGS
@given(st.lists(st.tuples(STEP, st.one_of(st.just({}), DETAIL)), max_size=12), EXTRAS)
def test_gateway_extras_change_no_verdict_and_no_quirk(steps: list[Any], extra: dict[str, Any]) -> None:
    chunks = [chunk(step, detail) for step, detail in steps]
    assert assembled(events(chunks)) == assembled(events(with_extra(chunks, extra)))
