"""A forwarded credential echoed in pieces is found over the stream's joined text."""

from __future__ import annotations

import json

from toollatch.web.live.echo import echoed_in_stream, unescape

KEY = "sk-echo-Abc123Def456Ghi789"


def _chat(delta: dict[str, object]) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta}]}


def _sse(*events: object) -> bytes:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()


def _args(*fragments: str) -> bytes:
    start = _chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}]})
    return _sse(start, *(_chat({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}) for f in fragments))


def test_unescape() -> None:
    assert unescape('a\\u0041\\"\\\\\\n') == 'aA"\\\n'


def test_found_in_text_pieces_arguments_and_escaped_forms() -> None:
    secrets = [KEY]
    pieces = [KEY[i : i + 7] for i in range(0, len(KEY), 7)]
    assert echoed_in_stream(_sse(*(_chat({"content": p}) for p in pieces)), "x", None, secrets)
    assert echoed_in_stream(_args('{"k": "', *pieces, '"}'), "x", None, secrets)
    escaped = "".join(f"\\u{ord(c):04x}" for c in KEY)  # every character \u-escaped in argument text
    assert echoed_in_stream(_args('{"k": "' + escaped[:20], escaped[20:] + '"}'), "x", None, secrets)
    assert not echoed_in_stream(_args('{"k": "', KEY[:10], "and", KEY[10:], '"}'), "x", None, secrets)
    assert not echoed_in_stream(_sse(_chat({"content": "nothing here"})), "x", None, secrets)
