"""A long generated OpenAI Chat stream for load tests and benchmarks (not a listed demo).

Built from the same pieces as the demos in :mod:`toollatch.demo.demos`, so its bytes look like
theirs and are reproducible.
"""

from __future__ import annotations

from typing import Any

from toollatch.demo.demos import (
    _CREATED,
    _OPENAI_MODEL,
    _PATTERN,
    DEFAULT_MAX_TOOL_ARGUMENT_BYTES,
    Demo,
    _split,
    _sse,
    _token,
    _tools,
)

_FILLER = (
    "streamed tool arguments arrive as opaque text fragments and are joined only after the "
    "completion latch says the stream ended normally the text parsed as strict JSON and the "
    "schema held so a dashboard shows names and byte counts until then "
)


def stress_demo(events: int = 100_000, calls: int = 8) -> Demo:
    """A long OpenAI Chat stream for load tests: exactly ``events`` provider events.

    ``calls`` parallel ``write_note`` calls whose argument fragments (3–8 characters,
    :data:`toollatch.demo.demos._PATTERN`) are interleaved round-robin by ``index``, so every call's buffer
    grows at once; each call's arguments are a valid ``{"path", "body"}`` object that
    commits. Raises ``ValueError`` when ``events`` is too small to hold the calls
    (about 20 events per call), or a call would exceed
    :data:`DEFAULT_MAX_TOOL_ARGUMENT_BYTES`. Deterministic: same arguments, same bytes.
    Not listed in :data:`DEMOS`.
    """
    name = f"stress-{events}"
    fragments = events - calls - 3  # role chunk, one start per call, finish chunk, [DONE]
    per_call = [fragments // calls + (1 if i < fragments % calls else 0) for i in range(calls)]
    streams: list[list[str]] = []
    for index, count in enumerate(per_call):
        head = _split(f'{{"path": "notes/stress-{index}.md", "body": "')
        tail = _split('"}')
        body_count = count - len(head) - len(tail)
        if body_count < 1:
            raise ValueError(f"{events} events cannot hold {calls} calls")
        body: list[str] = []
        at = index * 7
        for n in range(body_count):
            size = _PATTERN[n % len(_PATTERN)]
            piece = (_FILLER * 2)[at % len(_FILLER) : at % len(_FILLER) + size]
            body.append(piece)
            at += size
        text = [*head, *body, *tail]
        if len("".join(text).encode()) > DEFAULT_MAX_TOOL_ARGUMENT_BYTES:
            raise ValueError(f"{events} events in {calls} calls exceed {DEFAULT_MAX_TOOL_ARGUMENT_BYTES} bytes per call")
        streams.append(text)
    base = {"id": f"chatcmpl-{_token(name, 29)}", "object": "chat.completion.chunk", "created": _CREATED, "model": _OPENAI_MODEL}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    out = [chunk({"role": "assistant", "content": None})]
    for index in range(calls):
        start = {"index": index, "id": "call_" + _token(f"{name}/{index}", 24), "type": "function", "function": {"name": "write_note", "arguments": ""}}
        out.append(chunk({"tool_calls": [start]}))
    for n in range(max(per_call)):
        for index, text in enumerate(streams):
            if n < len(text):
                out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": text[n]}}]}))
    out.append(chunk({}, "tool_calls"))
    out.append(_sse("[DONE]"))
    return Demo(
        name=name,
        title=f"Load test: {events:,} events, {calls} parallel calls (OpenAI Chat)",
        dialect="openai-chat",
        description=f"{calls} write_note calls streamed in {fragments:,} small interleaved fragments; all commit.",
        wire=b"".join(out),
        tools=_tools("openai-chat", ["write_note"]),
        expected=("committed",) * calls,
        events=len(out),
    )


__all__ = ["stress_demo"]
