"""Where a failed call's argument text broke, shown as token classes (never the text).

The assembler drops a call's buffer at the latch and keeps only a diagnosis (fragment,
byte offset, the token class it expected). To show the neighbourhood of the break, this
module re-reads the source's provider events through the dialect adapter and collects
the call's fragments (:func:`call_fragments`), then lexes them leniently into token
classes (``{``, ``key``, ``:``, ``string``, ``number``, ``literal``, ``word`` …) with
:func:`break_context`. Only classes and structural characters leave this module, unless
the user asked to reveal the text of an uploaded capture (:func:`text_window`).

The recovery mirrors :class:`toollatch.core.pipeline.Pipeline`'s stream splitting and is
checked against the assembler's own diagnosis: if the recovered fragments do not give the
same diagnosis, no context is shown rather than a wrong one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toollatch.wire.capture import ProviderEvent
from toollatch.dialects import DialectAdapter, detect, make_adapter
from toollatch.core.jsonprefix import diagnose
from toollatch.core.model import (
    ArgsFinal,
    ArgsFragment,
    BlockStop,
    CallKey,
    CallStart,
    Cancel,
    Quirk,
    StreamEnd,
    StreamError,
    StreamStart,
    StreamTruncated,
)

from toollatch.web.pages import glossary

#: Token classes shown before and after the break.
BEFORE, AFTER = 8, 3
#: Bytes of text shown around the break when the user reveals it.
REVEAL_BEFORE, REVEAL_AFTER = 96, 32
_STRUCTURAL = frozenset("{}[]:,")
_ADAPTER_ERRORS = (TypeError, ValueError, KeyError, AttributeError, IndexError)


def call_fragments(events: Iterable[ProviderEvent], dialect: str, stream: int, key: CallKey) -> list[str] | None:
    """The argument fragments the assembler buffered for call ``key`` of stream ``stream``.

    ``None`` when the call is not found. Fragments after the call's block stopped or its
    stream ended are not part of the buffer and are left out.
    """
    adapter: DialectAdapter | None = None
    current, began = 0, False
    fragments: list[str] = []
    whole: str | None = None
    found = closed = False
    pending: list[ProviderEvent] = []
    for event in events:
        if adapter is None:
            pending.append(event)  # an unreadable one too: it fails the stream once the dialect is known, as the pipeline does
            if detect(event) is None:
                continue
            adapter = make_adapter(dialect)
            batch, pending = pending, []
        else:
            batch = [event]
        for ev in batch:
            if ev.error is not None:
                ops: list[Any] = [StreamError(ev.error)]
            else:
                try:
                    ops = list(adapter.feed(ev))
                except _ADAPTER_ERRORS:
                    ops = [StreamError("uninterpretable event")]
            for op in ops:
                if type(op) is StreamStart and began:
                    current, began = current + 1, False
                if not isinstance(op, Quirk):
                    began = True
                if current != stream or closed:
                    if current > stream:
                        return _joined(fragments, whole) if found else None
                    continue
                if isinstance(op, CallStart) and op.key == key:
                    found = True
                    whole = whole or op.whole_arguments
                elif isinstance(op, ArgsFragment) and op.key == key:
                    found = True
                    fragments.append(op.text)
                elif isinstance(op, ArgsFinal) and op.key == key:  # the provider's final text replaces the preview
                    found = True
                    fragments[:] = [op.text]
                elif (isinstance(op, BlockStop) and op.key == key) or isinstance(op, (StreamEnd, StreamTruncated, StreamError, Cancel)):
                    closed = True
    return _joined(fragments, whole) if found else None


def _joined(fragments: list[str], whole: str | None) -> list[str]:
    return fragments if fragments else [whole or ""]


@dataclass(frozen=True, slots=True)
class Token:
    """One lexical token: its class and UTF-8 byte span in the joined text."""

    cls: str
    start: int
    end: int


def tokens(text: str) -> list[Token]:
    """A lenient JSON lexer: classes only (``key`` is a string followed by ``:``)."""
    out: list[Token] = []
    data = text.encode("utf-8", "surrogatepass")
    i, n = 0, len(data)
    while i < n:
        c = data[i : i + 1]
        if c in b" \t\r\n":
            i += 1
            continue
        start = i
        if c.decode("latin-1") in _STRUCTURAL:
            i += 1
            cls = c.decode("ascii")
            if cls == ":" and out and out[-1].cls == "string":
                out[-1] = Token("key", out[-1].start, out[-1].end)
        elif c == b'"':
            i += 1
            while i < n and data[i : i + 1] != b'"':
                i += 2 if data[i : i + 1] == b"\\" else 1
            cls = "string" if i < n else "unterminated string"
            i = min(i + 1, n)
        elif c == b"-" or c.isdigit():
            while i < n and data[i : i + 1] in b"0123456789+-.eE":
                i += 1
            cls = "number"
        elif c.isalpha():
            while i < n and (data[i : i + 1].isalnum() or data[i : i + 1] == b"_"):
                i += 1
            cls = "literal" if data[start:i] in (b"true", b"false", b"null") else "word"
        else:
            i += 1
            while i < n and data[i] >= 0x80 and data[i] < 0xC0:  # the rest of a UTF-8 character
                i += 1
            cls = "symbol"
        out.append(Token(cls, start, i))
    return out


def char_class(data: bytes, offset: int) -> str:
    """What stands at byte ``offset``: a structural character, or a class (never the character)."""
    if offset >= len(data):
        return "end of input"
    c = data[offset : offset + 1]
    if c.decode("latin-1") in _STRUCTURAL:
        return f"'{c.decode('ascii')}'"
    if c == b'"':
        return "'\"'"
    if c in b" \t\r\n":
        return "whitespace"
    if c[0] < 0x20:
        return "control character"
    if c.isdigit() or c == b"-":
        return "digit or sign"
    if c.isalpha():
        return "letter"
    if c == b"\\":
        return "backslash"
    if c[0] >= 0x80:
        return "non-ASCII character"
    return "punctuation"


@dataclass
class BreakContext:
    """Token classes around a break: ``before`` it, the class ``found`` there, ``after`` it."""

    offset: int
    found: str
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    more_before: bool = False
    more_after: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "byte_offset": self.offset,
            "found": self.found,
            "before": self.before,
            "after": self.after,
            "more_before": self.more_before,
            "more_after": self.more_after,
        }


def break_context(fragments: list[str], diagnosis: dict[str, Any]) -> BreakContext | None:
    """Token classes around where ``diagnosis`` says the text broke (or ended, if incomplete).

    ``None`` unless the fragments give exactly ``diagnosis`` again (a recovery check).
    """
    kind = diagnosis.get("kind")
    if kind not in ("invalid", "incomplete") or diagnose(fragments) != diagnosis:
        return None
    text = "".join(fragments)
    data = text.encode("utf-8", "surrogatepass")
    offset = int(diagnosis["byte_offset"]) if kind == "invalid" else len(data)
    toks = tokens(text)
    before = [t for t in toks if t.end <= offset]
    after = [t for t in toks if t.start > offset]
    return BreakContext(
        offset,
        char_class(data, offset),
        [t.cls for t in before[-BEFORE:]],
        [t.cls for t in after[:AFTER]],
        len(before) > BEFORE,
        len(after) > AFTER,
    )


def text_window(fragments: list[str], offset: int) -> tuple[str, str]:
    """The text just before and from byte ``offset`` (revealed only on request)."""
    data = "".join(fragments).encode("utf-8", "surrogatepass")
    lo, hi = max(0, offset - REVEAL_BEFORE), min(len(data), offset + REVEAL_AFTER)
    return data[lo:offset].decode("utf-8", "replace"), data[offset:hi].decode("utf-8", "replace")


def would_have_failed(diagnosis: dict[str, Any] | None) -> str | None:
    """For a CANCELLED call's ``cut_off`` diagnosis: ``"the buffer would have failed:
    invalid JSON at byte 90"`` when the text received so far had already stopped being a
    JSON prefix (so no stream end could have committed it), else ``None``. Offsets only,
    never text."""
    if not diagnosis or diagnosis.get("kind") != "cut_off":
        return None
    text = diagnosis.get("text")
    if not isinstance(text, dict) or text.get("kind") != "invalid":
        return None
    return f"the buffer would have failed: invalid JSON at byte {text['byte_offset']}"


def describe(diagnosis: dict[str, Any] | None) -> str:
    """The diagnosis in words: "broke in fragment k at byte b, expected …", depth, or JSON Pointers."""
    if not diagnosis:
        return ""
    kind = diagnosis.get("kind")
    if kind == "invalid":
        return f"broke in fragment {diagnosis['fragment_index']} at byte {diagnosis['byte_offset']}, expected {diagnosis['expected']}"
    if kind == "incomplete":
        depth = diagnosis["depth"]
        return f"valid JSON prefix cut off at depth {depth} ({depth} unclosed object/array), expected {diagnosis['expected']}"
    if kind == "schema":
        errors = diagnosis.get("errors") or []
        return "schema errors at " + ", ".join(f"{e.get('pointer') or '(root)'} ({e.get('keyword')})" for e in errors) if errors else "schema error"
    if kind == "semantic":
        return f"grammar holds but not strict JSON: {diagnosis.get('problem')}"
    if kind == "cut_off":
        text = diagnosis.get("text")
        so_far = ""
        if isinstance(text, dict) and text.get("kind") == "complete":
            so_far = "; the text so far is complete JSON"
        elif isinstance(text, dict) and text.get("kind"):
            so_far = f"; the text so far: {describe(text)}"
        received = f"{diagnosis.get('bytes', 0):,} bytes in {diagnosis.get('fragments', 0):,} fragments"
        return f"cut off: the stream ended ({diagnosis.get('stream_end')}) after {received} of this call{so_far}"
    return str(diagnosis.get("problem") or glossary.plain(kind, "diagnosis") or kind or "")
