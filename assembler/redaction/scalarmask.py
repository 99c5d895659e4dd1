"""Masking every scalar of argument text: what a redacted reproducer keeps of a call that
did not commit.

:mod:`.redactor` masks the string *values* of a committed call's argument text and keeps
its keys, numbers and literals. A call that never committed keeps nothing of its own:
:func:`mask_scalars` masks every scalar of its text, fragment by fragment, and keeps what a
replay measures:

* the UTF-8 byte length of every fragment, and where the text stops being a JSON prefix
  (everything from that character on becomes ``x``);
* token classes: a string stays a string of ``x`` (escapes counted in bytes); an object
  key stays a key of the same byte length, distinct keys of one object stay distinct
  (``xxxx``, ``yxxx``, ``zxxx``...) and a repeated key stays repeated; a number stays a
  number with the same digits, sign, point and exponent layout (its first digit ``1``
  unless it was ``0``, every other mantissa digit ``0``; exponent digits are kept so a
  non-finite number stays non-finite); ``true`` and ``null`` both become ``null``,
  ``false`` stays ``false`` (the only literal of its length).

So a replay gives the same verdict, reason and break point for a call that failed on the
stream (truncated, stream error, cancelled), on its JSON (invalid, duplicate key, not an
object, too deep, too large) or on its tool name. A schema check of masked keys and values
can judge differently (the schema's property names are gone). A string its tool's schema
publishes (an ``enum`` member) is masked here too: only a committed call keeps those
(:mod:`.published`).
"""

from __future__ import annotations

import json
from typing import Any

from toollatch.core import jsontext
from toollatch.core.jsonprefix import _IN_STRING, JSONPrefixScanner, _Mode  # the scanner's own states
from toollatch.wire.untrusted import parse_json

#: Letters of a masked key, the first one the usual (``xxxx`` for the first key of an object).
_KEY_LETTERS = "xyzabcdefghijklmnopqrstuvw"
_LITERAL_MASK = {"true": "null", "null": "null", "false": "false"}


class KeyNames:
    """Placeholders of one object's keys: the same key, the same placeholder (of the byte
    length given), distinct keys distinct placeholders."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._used: dict[int, int] = {}  # placeholder length -> placeholders given

    def name(self, raw: str, size: int) -> str:
        try:
            key = json.loads(f'"{raw}"')  # "\u0041" and "A" are one key
        except ValueError:
            key = raw
        found = self._names.get(key)
        if found is None or len(found) != size:
            n = self._used.get(size, 0)
            self._used[size] = n + 1
            letters = []
            for _ in range(size):
                letters.append(_KEY_LETTERS[n % len(_KEY_LETTERS)])
                n //= len(_KEY_LETTERS)
            found = self._names[key] = "".join(letters)
        return found


def mask_scalars(fragments: list[str]) -> list[str]:
    """``fragments`` of one call's argument text with every scalar masked (see the module);
    the same number of fragments, each of the same UTF-8 byte length."""
    scanner = JSONPrefixScanner()
    out: list[str] = []  # one entry per input character
    ends: list[int] = []  # where each fragment's characters end in ``out``
    objects: list[KeyNames] = []
    key_at: list[tuple[int, int]] = []  # (index in out, byte width) of the key being read
    key_raw: list[str] = []
    first_digit = True
    in_exponent = False
    stopped = False  # the text stopped being a JSON prefix

    def close_key() -> None:
        if not key_at:
            return
        size = sum(width for _, width in key_at)
        names = objects[-1] if objects else KeyNames()
        name = iter(names.name("".join(key_raw), size))
        for index, width in key_at:
            out[index] = "".join(next(name) for _ in range(width))
        key_at.clear()
        key_raw.clear()

    for fragment in fragments:
        for ch in fragment:
            width = 1 if ch < "\x80" else len(ch.encode("utf-8", "surrogatepass"))
            if stopped:
                out.append("x" * width)
                continue
            mode, in_key = scanner._mode, scanner._in_key
            content = mode in _IN_STRING and not (mode is _Mode.STRING and ch == '"')
            if not scanner._step(ch):
                stopped = True
                close_key()
                out.append("x" * width)
                continue
            after = scanner._mode
            if content and in_key:
                key_at.append((len(out), width))
                key_raw.append(ch)
                out.append("")
            elif content:
                out.append("x" * width)
            elif after is _Mode.NUMBER:
                if mode is not _Mode.NUMBER:
                    first_digit, in_exponent = True, False
                if ch in "eE":
                    in_exponent = True
                if ch.isdigit() and not in_exponent:
                    out.append(("0" if ch == "0" else "1") if first_digit else "0")
                    first_digit = False
                else:
                    out.append(ch)
            elif mode is _Mode.LITERAL or after is _Mode.LITERAL:
                literal = scanner._literal
                position = scanner._literal_pos - 1 if after is _Mode.LITERAL else len(literal) - 1
                out.append(_LITERAL_MASK[literal][position])
            else:
                if mode is _Mode.STRING and in_key:  # the key's closing quote
                    close_key()
                elif ch == "{":
                    objects.append(KeyNames())
                elif ch == "}" and objects:
                    objects.pop()
                out.append(ch)
        ends.append(len(out))
    close_key()  # a key the text ends in
    masked, start = [], 0
    for end in ends:
        masked.append("".join(out[start:end]))
        start = end
    return masked


def mask_scalars_text(text: str) -> str:
    """One whole argument text with every scalar masked (same UTF-8 byte length)."""
    return mask_scalars([text])[0]


def mask_scalars_value(value: Any) -> Any:
    """Argument text given as a JSON value, with every scalar masked: the value whose JSON
    text is :func:`mask_scalars_text` of the value's (a float may be written shorter)."""
    masked = mask_scalars_text(jsontext.dumps(value))
    parsed, problem = parse_json(masked.encode("utf-8", "surrogatepass"))
    if problem is None:
        return parsed
    return "x" * len(masked.encode("utf-8", "surrogatepass"))  # not JSON there: nothing of it kept





CallRef = tuple[int, tuple[Any, ...], int]  # a ledger's call: (stream, provider key, generation)


def assembler_key(call: CallRef) -> tuple[int, tuple[Any, ...]]:
    """``(stream, key)`` of a ledger's call as the assembler files it: a later call started
    at a used provider key is filed at ``key + (n,)``."""
    stream, key, generation = call
    return (stream, key if generation <= 1 else key + (generation - 1,))


class MaskPlan:
    """What a redactor masks of each call's argument text, decided before it writes an event.

    ``texts``: every call's argument text as the ledger saw it (``{call: (fragments, whole)}``),
    ``committed``: the ``(stream, key)`` of every COMMITTED call. A call not committed gets
    :func:`mask_scalars`; text that repeats a call's (a Responses ``.done``) gets what that
    call's text got; text that is no call's gets every scalar masked too.

    ``published``: ``{(stream, key): strings}`` of committed calls whose tool's schema
    publishes values (``enum`` members, ``const``; :meth:`~.registry.ToolRegistry.published`):
    such a call's string values equal to one of them are kept
    (:func:`~.published.mask_keeping`), here and where its text is repeated. Other
    committed calls are masked by the redactor's scanner (None from :meth:`fragment`).
    ``by_name``: the same strings by tool name, for a dialect that does not tell which
    call a place holds (:meth:`published_for`).

    ``finals``: the calls whose whole text is a final text (a Responses ``.done`` unlike
    the deltas). A committed call took only part of its text: with a final text, not its
    fragments (a final text replaces them); with fragments, not the whole text it started
    with. The part it did not take is masked as a call's that did not commit.
    """

    def __init__(
        self,
        texts: dict[CallRef, tuple[list[str], str | None]],
        committed: set[tuple[int, tuple[Any, ...]]],
        published: dict[tuple[int, tuple[Any, ...]], frozenset[str]] | None = None,
        by_name: dict[str, frozenset[str]] | None = None,
        finals: set[CallRef] | None = None,
    ) -> None:
        from toollatch.redaction.published import mask_keeping
        from toollatch.redaction.redactor import digest

        self.fragments: dict[CallRef, list[str]] = {}
        self.wholes: dict[CallRef, str] = {}
        self.masked_texts: dict[bytes, str] = {}
        self.committed_texts: set[bytes] = set()
        #: committed texts masked keeping published strings (a text with none kept is absent)
        self.committed_masked: dict[bytes, str] = {}
        self.by_name = by_name or {}
        #: Gemini ``stringValue`` strings kept (:class:`~.published.StringPieces` numbers)
        self.kept_pieces: set[int] = set()
        #: some call did not commit (one without any text too, when the caller says so):
        #: where a dialect does not tell whose text a place holds, every scalar is masked
        self.any_failed = False
        published = published or {}
        finals = finals or set()
        for call, (fragments, whole) in texts.items():
            full = "".join(fragments) if fragments else (whole or "")
            if assembler_key(call) in committed and fragments and whole is not None:
                # part of the text the committed call did not take: masked as a failed call's
                if call in finals:  # the final text replaced the fragments
                    self.fragments[call] = mask_scalars(fragments)[::-1]  # popped in order
                    self.masked_texts[digest(full)] = "".join(self.fragments[call][::-1])
                    fragments, full = [], whole
                else:  # the fragments are the text, not the whole text it started with
                    self.wholes[call] = self.masked_texts[digest(whole)] = mask_scalars_text(whole)
                    whole = None
            if assembler_key(call) in committed:
                self.committed_texts.add(digest(full))
                if whole is not None:  # a Responses final text is what the call committed
                    self.committed_texts.add(digest(whole))
                keep = published.get(assembler_key(call), frozenset())
                if fragments and (masked := mask_keeping(fragments, keep)) is not None:
                    self.fragments[call] = masked[::-1]  # popped in order
                    self.committed_masked[digest(full)] = "".join(masked)
                if whole is not None and (masked := mask_keeping([whole], keep)) is not None:
                    self.wholes[call] = masked[0]
                    self.committed_masked.setdefault(digest(whole), masked[0])
                continue
            self.any_failed = True
            if fragments:
                self.fragments[call] = mask_scalars(fragments)[::-1]  # popped in order
                self.masked_texts[digest(full)] = "".join(self.fragments[call][::-1])
            if whole is not None:
                self.wholes[call] = mask_scalars_text(whole)
                self.masked_texts.setdefault(digest(whole), self.wholes[call])

    def published_for(self, name: Any) -> frozenset[str]:
        """The strings tool ``name``'s schema publishes (empty: none, or no such tool)."""
        return self.by_name.get(name, frozenset()) if isinstance(name, str) else frozenset()

    def fragment(self, call: CallRef, text: str) -> str | None:
        """The masked next fragment of a call that did not commit, or of a committed call
        that keeps published strings (None: another committed call)."""
        if call not in self.fragments:
            return None
        pending = self.fragments[call]
        return pending.pop() if pending else "x" * len(text.encode("utf-8", "surrogatepass"))

    def whole(self, call: CallRef) -> str | None:
        """The masked whole text of a call that did not commit, or of a committed call that
        keeps published strings (None: another committed call)."""
        return self.wholes.get(call)

    def repeated(self, text: str) -> str | None:
        """Masked text that repeats ``text`` elsewhere; None when it is a committed call's
        that keeps no published string."""
        from toollatch.redaction.redactor import digest

        found = digest(text)
        if found in self.committed_texts:
            return self.committed_masked.get(found)
        return self.masked_texts.get(found) or mask_scalars_text(text)


def as_value_like(value: Any, masked: str) -> Any:
    """``masked`` argument text as the kind of value ``value`` was: itself for a string, else
    the JSON value it reads as (nothing of the original when it reads as none)."""
    if isinstance(value, str):
        return masked
    parsed, problem = parse_json(masked.encode("utf-8", "surrogatepass"))
    if problem is None:
        return parsed
    return "x" * len(masked.encode("utf-8", "surrogatepass"))

__all__ = ["KeyNames", "MaskPlan", "as_value_like", "assembler_key", "mask_scalars", "mask_scalars_text", "mask_scalars_value"]
