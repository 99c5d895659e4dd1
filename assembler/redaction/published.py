"""Masking a committed call's argument text, keeping the values its tool's schema publishes.

A redacted reproducer (:mod:`.export`) masks every string value of a committed call's
argument text (:func:`~.redactor.mask_json_text`). A string the call's tool schema itself
lists as an ``enum`` member or a ``const`` (:func:`published_strings`) is no
secret: whoever reads the reproducer has the tools file, and a masked ``"c"`` where the
schema says ``{"enum": ["c", "f"]}`` would fail the replay's schema check
(``schema_invalid``) where the original committed. :func:`mask_keeping` therefore keeps
a string value that equals one of them, and masks every other as the scanner does.

A string may span fragments, so each one is decided once it is whole (its closing quote):
its characters are written as they were, or as ``x`` runs of their UTF-8 byte length
(escapes included). Fragment boundaries and byte lengths are unchanged; cost is linear in
the text. A string the text ends in (or breaks in) is masked. Argument text given as a
JSON value keeps them too (:func:`~.redactor.mask_arguments` with ``keep``), and so do the
Gemini ``stringValue`` pieces of such a string (:class:`StringPieces`). Only the call's own
tool's schema counts, and only for a committed call: a call that did not commit keeps
nothing (:mod:`.scalarmask`), a tool without a schema publishes nothing.

Limit: a committed string constrained otherwise (``pattern``, ``format``, ``minLength``
with multi-byte characters...) is still masked and may replay to a different verdict.
"""

from __future__ import annotations

import json
from typing import Any

from toollatch.core.jsonprefix import _IN_STRING, JSONPrefixScanner, _Mode  # the scanner's own states


def published_strings(schema: Any) -> frozenset[str]:
    """Every string a schema publishes as a value: a member of an ``enum`` or a ``const``
    (strings inside an object or array member too), at any depth, ``$defs`` included.
    Iterative: a deep schema costs no recursion."""
    found: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for keyword in ("enum", "const"):
                if keyword in node and not (keyword == "enum" and not isinstance(node[keyword], list)):
                    values = [node[keyword]]
                    while values:
                        value = values.pop()
                        if isinstance(value, str):
                            found.add(value)
                        elif isinstance(value, dict):
                            values.extend(value.values())
                        elif isinstance(value, list):
                            values.extend(value)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return frozenset(found)


def mask_keeping(fragments: list[str], keep: frozenset[str]) -> list[str] | None:
    """``fragments`` of one committed call's argument text with every string value masked
    (keys, numbers and literals kept, as :class:`~.jsonprefix.JSONPrefixScanner` with
    ``mask=True`` does, everything from where the text stops being a JSON prefix masked)
    except the string values equal to a member of ``keep``. The same number of fragments,
    each of the same UTF-8 byte length. None when no string was kept (the scanner's
    masking is the answer)."""
    if not keep:
        return None
    scanner = JSONPrefixScanner()
    out: list[str] = []  # one entry per input character
    ends: list[int] = []  # where each fragment's characters end in ``out``
    pending: list[int] = []  # indexes in ``out`` of the string value being read
    raw: list[str] = []  # its characters as written (escapes undecoded)
    kept = False
    stopped = False

    def settle(keep_it: bool) -> None:
        if not keep_it:
            for index in pending:
                ch = out[index]
                out[index] = "x" * (1 if ch < "\x80" else len(ch.encode("utf-8", "surrogatepass")))
        pending.clear()
        raw.clear()

    for fragment in fragments:
        for ch in fragment:
            if stopped:
                out.append("x" * (1 if ch < "\x80" else len(ch.encode("utf-8", "surrogatepass"))))
                continue
            mode = scanner._mode
            closing = mode is _Mode.STRING and ch == '"'
            content = mode in _IN_STRING and not scanner._in_key and not closing
            if not scanner._step(ch):
                stopped = True
                settle(False)
                out.append("x" * (1 if ch < "\x80" else len(ch.encode("utf-8", "surrogatepass"))))
                continue
            if content:
                pending.append(len(out))
                raw.append(ch)
            elif closing and pending and scanner._mode is not _Mode.COLON:  # a value string ended
                found = _decoded("".join(raw)) in keep
                kept = kept or found
                settle(found)
            out.append(ch)
        ends.append(len(out))
    settle(False)  # a string the text ends in
    if not kept:
        return None
    masked, start = [], 0
    for end in ends:
        masked.append("".join(out[start:end]))
        start = end
    return masked


class StringPieces:
    """Gemini ``partialArgs`` ``stringValue`` pieces, grouped into the strings they make up
    (one per call and ``jsonPath``, as the adapter appends them), so a piece of a string its
    tool's schema publishes can be kept though the string is whole only later.

    The redactor reads a capture twice: with ``record``, the first reading lists each
    string (:attr:`strings`: its tool name and pieces, in the order strings began); the
    plan then says which ones are kept (by their number), and the second reading, meeting
    the same pieces in the same order, asks :meth:`piece` for each one's number.
    """

    def __init__(self, *, record: bool = False) -> None:
        self._numbers: dict[tuple[int, int, tuple[str | int, ...]], int] = {}
        self._calls: dict[int, tuple[int, str | None]] = {}  # candidate -> (call number, tool name)
        #: with ``record``: ``[(tool name, pieces)]`` by string number (kept in memory)
        self.strings: list[tuple[str | None, list[str]]] | None = [] if record else None

    def call(self, candidate: int, name: Any) -> None:
        """A ``functionCall`` part of ``candidate``: one with a name starts a new call."""
        if isinstance(name, str) and name:
            number = self._calls.get(candidate, (-1, None))[0] + 1
            self._calls[candidate] = (number, name)

    def piece(self, candidate: int, path: list[str | int], text: str) -> int:
        """The number of the string ``text`` is a piece of (its call's value at ``path``)."""
        number, name = self._calls.get(candidate, (-1, None))
        slot = (candidate, number, tuple(path))
        found = self._numbers.get(slot)
        if found is None:
            found = self._numbers[slot] = len(self._numbers)
            if self.strings is not None:
                self.strings.append((name, []))
        if self.strings is not None:
            self.strings[found][1].append(text)
        return found


def kept_pieces(strings: list[tuple[str | None, list[str]]], by_name: dict[str, frozenset[str]]) -> set[int]:
    """The numbers of the :attr:`StringPieces.strings` whose joined text its tool publishes."""
    return {n for n, (name, pieces) in enumerate(strings) if name in by_name and "".join(pieces) in by_name[name]}


def _decoded(raw: str) -> str | None:
    """A string literal's inside as the value it stands for (None: not one)."""
    try:
        value = json.loads(f'"{raw}"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


__all__ = ["StringPieces", "kept_pieces", "mask_keeping", "published_strings"]
