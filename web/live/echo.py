"""A forwarded credential echoed by the upstream in pieces: found over the joined text.

An upstream can echo the API key it was sent split over several chunks (four
``delta.content`` pieces, a call's argument fragments), so that no single event, and no
run of the raw bytes, holds it whole: scrubbing each event's text cannot see it.
:func:`echoed_in_stream` joins the text of the stream the way a reader would see it —
each string field's pieces in order (assistant text, reasoning, every provider field), and
each call's argument text as the assembler took it — and looks for every forwarded value
there, in its JSON-escaped and ``\\u``-escaped forms too (the joined text is also read
with JSON escapes undone, once and twice: argument text is JSON inside a JSON event).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from toollatch.wire.capture import DONE, CaptureError, iter_capture
from toollatch.redaction.export import EventRedactor

from toollatch.web.live.credentials import MIN_SECRET_BYTES

_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def unescape(text: str) -> str:
    """``text`` with JSON escapes undone (``\\u0041`` → ``A``, ``\\"`` → ``"``); text that is
    not an escape is kept as it is."""

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] == "u" and len(code) == 5:
            return chr(int(code[1:], 16))
        return _SIMPLE.get(code, code)

    return _ESCAPE.sub(one, text) if "\\" in text else text


def _leaves(value: Any, path: tuple[Any, ...], out: dict[tuple[Any, ...], list[str]]) -> None:
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            out.setdefault(where, []).append(node)
        elif isinstance(node, dict):
            for key, item in node.items():
                out.setdefault(where + ("<key>",), []).append(str(key))
                stack.append((item, where + (key,)))
        elif isinstance(node, list):
            stack.extend((item, where + (i,)) for i, item in enumerate(node))


def joined_texts(data: bytes, name: str, dialect: str | None) -> Iterator[str]:
    """Every joined text of a stream: each string field's pieces across events (by its path
    in the event, with the event type), then each call's argument text. Raises
    ``CaptureError``/``ValueError`` for input that cannot be read."""
    fields: dict[tuple[Any, ...], list[str]] = {}
    calls = EventRedactor(dialect, keep=False, record=True)
    for event in iter_capture([data], name):
        calls.feed(event)
        if event.error is None and event.data is not None and event.data != DONE:
            _leaves(event.data, (event.event,), fields)
    calls.finish()
    for pieces in fields.values():
        yield "".join(pieces)
    for fragments, whole in calls.texts.values():
        yield "".join(fragments)
        if whole:
            yield whole


def echoed_in_stream(data: bytes, name: str, dialect: str | None, secrets: list[str]) -> bool:
    """Whether a value of ``secrets`` (:func:`~toollatch.web.live.credentials.secret_values`) is in the
    joined text of the stream ``data`` (see the module), in any form listed or with its
    JSON escapes undone. A stream that cannot be read through is said to hold one (the
    caller then keeps nothing of it as received)."""
    wanted = [s for s in secrets if len(s.encode("utf-8", "ignore")) >= MIN_SECRET_BYTES]
    if not wanted:
        return False
    try:
        for text in joined_texts(data, name, dialect):
            once = unescape(text)
            for form in {text, once, unescape(once)}:
                if any(secret in form for secret in wanted):
                    return True
    except (CaptureError, ValueError, RecursionError):
        return True
    return False


__all__ = ["echoed_in_stream", "joined_texts", "unescape"]
