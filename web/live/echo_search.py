"""A forwarded credential looked for in a recorded stream's joined text.

An upstream may echo a key the proxy forwarded, in one piece or split over many chunks and
fields (``delta.content`` pieces, every call's arguments, a Bedrock InvokeModel chunk's
base64 body). :func:`search_stream` gathers, per item of the stream (its ``index``,
``output_index``, ``item_id``...), the joined text of its string fields as
:class:`~toollatch.redaction.export.CaptureReading` reads them, and
:func:`echoed_in_texts` looks for each credential in it plain, JSON-escaped and
``\\u``-escaped. Used by :mod:`toollatch.web.live.reading`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Generator, Iterator
from typing import Any

from toollatch.redaction.export import CaptureReading
from toollatch.wire.capture import DONE, ProviderEvent
from toollatch.wire.untrusted import parse_json

from toollatch.web.live.credentials import scrub_text


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


def echoed_in_texts(texts: Iterator[str], secrets: list[str]) -> bool:
    """Whether a value of ``secrets`` is in one of the joined ``texts`` as it is or with its
    JSON escapes undone (once or twice)."""
    for text in texts:
        once = unescape(text)
        for form in {text, once, unescape(once)}:
            if any(secret in form for secret in secrets):
                return True
    return False


#: Fields that tell which item of a stream a piece of text belongs to (a choice, a content
#: block, an output item...): text of two items can arrive interleaved (``n=2`` choices).
_IDENTITY = ("index", "output_index", "content_index", "summary_index", "item_id", "contentBlockIndex")


def search_stream(reading: CaptureReading, secrets: list[str], *, keep: bool) -> Generator[None, None, bool]:
    """Read ``reading`` through (yielding after each event; ``keep``: its events are kept)
    and tell whether a value of ``secrets`` is in its joined text (:func:`_joined`). Raises
    what :meth:`CaptureReading.read` raises."""
    fields: dict[tuple[Any, ...], list[str]] = {}
    for event in reading.read(keep=keep):
        if secrets:
            gather_leaves(event, fields)
        yield None
    return bool(secrets) and echoed_in_texts(_joined(fields, reading), secrets)


def gather_leaves(event: ProviderEvent, out: dict[tuple[Any, ...], list[str]], scrub: list[str] | None = None) -> None:
    """Add each string (and object key) of ``event`` to the pieces of its path (with the
    event type), and to the pieces of its item's path (list positions left out, the
    :data:`_IDENTITY` fields of each object on the way put in: a reader joins an item's text).
    ``scrub``: credential values replaced in each string first, as in a written copy (not
    inside a base64-encoded event, where no replacement reaches them)."""
    if event.error is not None or event.data is None or event.data == DONE:
        return
    top = (event.event,)
    stack: list[tuple[Any, tuple[Any, ...], tuple[Any, ...], list[str] | None]] = [(event.data, top, ("<item>",) + top, scrub)]
    while stack:
        node, where, whose, replace = stack.pop()
        if isinstance(node, str):
            if where[-1:] == ("bytes",) and (inner := _inner_event(node)) is not None:  # Bedrock InvokeModel's chunk
                stack.append((inner, where + ("<decoded>",), whose + ("<decoded>",), None))
            node = scrub_text(node, replace) if replace else node
            out.setdefault(where, []).append(node)
            out.setdefault(whose, []).append(node)
        elif isinstance(node, dict):
            whose += tuple((k, node[k]) for k in _IDENTITY if isinstance(node.get(k), (int, str)))
            for key, item in node.items():
                out.setdefault(where + ("<key>",), []).append(scrub_text(str(key), replace) if replace else str(key))
                stack.append((item, where + (key,), whose + (key,), replace))
        elif isinstance(node, list):
            stack.extend((item, where + (i,), whose + ("[]",), replace) for i, item in enumerate(node))


def _inner_event(text: str) -> Any:
    """The JSON event a Bedrock InvokeModel ``chunk.bytes`` carries base64-encoded, else None."""
    try:
        payload = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    inner, problem = parse_json(payload)
    return inner if problem is None else None


def _joined(fields: dict[tuple[Any, ...], list[str]], reading: CaptureReading) -> Iterator[str]:
    """Every joined text of the stream: each string field's pieces across events, then each
    call's argument text as the assembler took it (its fragments, and a whole text)."""
    for pieces in fields.values():
        yield "".join(pieces)
    for fragments, whole in reading.recorder.texts.values():
        yield "".join(fragments)
        if whole:
            yield whole


__all__ = [
    "CHECK_STEP_EVENTS",
    "TEXT_LEFT_ASIDE",
    "Reading",
    "RecordingReading",
    "download_as_received",
    "echoed_in_texts",
    "read_in_steps",
    "read_recording",
    "reproducer_without",
    "unescape",
]
