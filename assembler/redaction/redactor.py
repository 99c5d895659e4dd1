"""Masking: string values replaced by placeholders that keep what the assembler measures.

The redacted reproducer (:mod:`.export`) rewrites every place a dialect adapter reads
argument text, and every text field, with ``x`` placeholders. What must stay is what the
assembler measures: the *argument text's* UTF-8 byte length per fragment, its structure
(keys, numbers, literals) and the fragment boundaries. So:

* argument text that arrives as a string (a fragment, or a whole text) is masked by a
  :class:`~.jsonprefix.JSONPrefixScanner` per call, which replaces each character of each
  string value with ``x`` runs of its byte length (escapes included);
* argument text that arrives as a JSON *value* (an object where a fragment belongs) is
  judged by the adapters as that value's JSON text, so each string in it becomes ``x``
  characters of the byte length of its *JSON-escaped* form (:func:`mask_arguments`):
  the adapter's JSON text of the masked value is exactly as long as the original's;
* free text an adapter JSON-escapes into argument text (a Responses custom tool's
  ``input``) is masked to the byte length of its escaped form (:func:`escaped_placeholder`);
* assistant text, reasoning, signatures: ``x`` runs of the same byte length (:func:`placeholder`).

:class:`Ledger` follows the adapter's ops as the assembler applies them (streams, stream
ends, calls started again at a key), so the masker gives each fragment its own call's
scanner, and so a caller can tell whether a recording holds argument text that no call took
before its stream's end (:attr:`Ledger.stray`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from toollatch.core import jsontext
from toollatch.dialects.openai_responses import _escape as escaped  # a JSON string literal's inside, as the adapter writes it
from toollatch.core.jsonprefix import JSONPrefixScanner
from toollatch.core.model import ArgsFinal, ArgsFragment, CallIdentity, CallKey, CallStart, Cancel, Op, Quirk, StreamEnd, StreamError, StreamStart, StreamTruncated

Json = Any

_ENDS = (StreamEnd, StreamError, StreamTruncated, Cancel)


def placeholder(text: str) -> str:
    """``x`` repeated to the UTF-8 byte length of ``text``."""
    return "x" * len(text.encode("utf-8", "surrogatepass"))


def escaped_placeholder(text: str, times: int = 1) -> str:
    """``x`` repeated to the UTF-8 byte length of ``text`` JSON-escaped ``times`` times: a
    placeholder that, escaped as often, is exactly as long as ``text`` escaped."""
    for _ in range(times):
        text = escaped(text)
    return placeholder(text)


def mask_json_text(text: str) -> str:
    """Mask the string values of a whole JSON text (same byte length)."""
    return JSONPrefixScanner(mask=True).feed(text)


def mask_value(value: Json) -> Json:
    """Replace every string value (not key) in a decoded JSON value by a placeholder."""
    return jsontext.rebuild(value, lambda v: placeholder(v) if isinstance(v, str) else v)


def mask_arguments(value: Json, times: int = 1, keep: frozenset[str] = frozenset()) -> Json:
    """A JSON value given as argument text, masked: each string value (not key) replaced by
    :func:`escaped_placeholder` (``times``: how often the adapter escapes it; 2 for a
    custom tool's input given as a JSON value), numbers and literals kept; a string of
    ``keep`` (what a committed call's tool schema publishes) is kept as is. The JSON text
    of the result is exactly as long as the original's."""
    return jsontext.rebuild(value, lambda v: (v if v in keep else escaped_placeholder(v, times)) if isinstance(v, str) else v)


def mask_all(text: str) -> str:
    """Every character of ``text`` masked (argument text no call reads): same byte length."""
    return placeholder(text)


def digest(text: str) -> bytes:
    """SHA-256 of ``text``'s UTF-16 code units (how the ledger compares texts without keeping
    them): a surrogate pair split across two fragments hashes as the one character it is."""
    return hashlib.sha256(text.encode("utf-16-le", "surrogatepass")).digest()


@dataclass(slots=True)
class ArgOp:
    """One op that carries argument text, as the assembler will apply it."""

    kind: str  # "fragment" (ArgsFragment), "final" (ArgsFinal) or "whole" (CallStart.whole_arguments)
    key: CallKey
    text: str
    stream: int
    generation: int  # the call at ``key`` in ``stream``: bumped when another call starts there
    late: bool  # after its stream's end: the assembler ignores it (op_after_stream_end)
    ignored: bool = False  # the whole text of a start repeated for the same call: not used

    @property
    def call(self) -> tuple[int, CallKey, int]:
        """Which call this op's text belongs to: ``(stream, key, generation)``."""
        return (self.stream, self.key, self.generation)


class Ledger:
    """Follows a dialect adapter's ops as the pipeline applies them, and records which
    argument text the calls took (digests only, never text).

    :meth:`apply` takes one event's ops and returns its argument-carrying ops. The masker
    reports each place of argument text it meets: :meth:`taken` (an op carried it),
    :meth:`duplicate` (the dialect repeats text a call already has, e.g. a Responses
    ``.done``), :meth:`ignored` (no op carried it). :meth:`finish` then lists in
    :attr:`stray` where the input holds argument text that no call took before its
    stream's end (event line numbers and what was found, never text).
    """

    def __init__(self, *, record: bool = False) -> None:
        #: with ``record``, every call's argument text as the assembler takes it:
        #: ``{(stream, key, generation): (fragments, whole text or None)}`` (kept in memory)
        self.texts: dict[tuple[int, CallKey, int], tuple[list[str], str | None]] | None = {} if record else None
        #: with ``record``, the calls whose whole text in :attr:`texts` is a final text (it
        #: replaced the fragments before it), not the text a call started with
        self.finals: set[tuple[int, CallKey, int]] = set()
        #: every call's tool name as the assembler keeps it (the first, unless a final one replaces it)
        self.names: dict[tuple[int, CallKey, int], str] = {}
        self.stream = 0
        self.began = False
        self.ended = False
        self.ended_before_event = False
        self.stray: list[str] = []
        self._generation: dict[tuple[int, CallKey], int] = {}
        self._ids: dict[tuple[int, CallKey], str | None] = {}  # the call at a key: its id
        self._fragments: dict[tuple[int, CallKey, int], Any] = {}  # running sha256 of the text taken
        self._whole: dict[tuple[int, CallKey, int], bytes] = {}
        self._pending: list[tuple[bytes, str]] = []  # duplicates: must equal text a call took

    def apply(self, ops: list[Op]) -> list[ArgOp]:
        """The argument-carrying ops of one event, with their stream, call and lateness."""
        self.ended_before_event = self.ended
        out: list[ArgOp] = []
        for op in ops:
            if isinstance(op, Quirk):
                continue
            if isinstance(op, StreamStart) and self.began:
                self.stream, self.ended = self.stream + 1, False
            self.began = True
            if isinstance(op, CallStart):
                repeated = self._start(op)
                if op.whole_arguments:
                    out.append(self._op("whole", op.key, op.whole_arguments, repeated))
            elif isinstance(op, CallIdentity):
                at = (self.stream, op.key)
                call = (self.stream, op.key, self._generation.get(at, 0))
                if op.name and (call not in self.names or op.final):
                    self.names[call] = op.name
                if at in self._ids and (self._ids[at] is None or op.final):
                    self._ids[at] = op.call_id
            elif isinstance(op, ArgsFragment):
                out.append(self._op("fragment", op.key, op.text))
            elif isinstance(op, ArgsFinal):
                out.append(self._op("final", op.key, op.text))
            elif isinstance(op, _ENDS):
                self.ended = True
        return out

    def _start(self, op: CallStart) -> bool:
        """Follow a call start as the assembler does; True: a start repeated for the call
        already at its key (same id, or one of them without), which it treats as identity only."""
        at = (self.stream, op.key)
        if at in self._ids and not (op.call_id and self._ids[at] and op.call_id != self._ids[at]):
            self._ids[at] = self._ids[at] or op.call_id
            if op.name:
                self.names.setdefault((self.stream, op.key, self._generation.get(at, 0)), op.name)
            return True
        self._generation[at] = self._generation.get(at, 0) + 1  # a new call there
        self._ids[at] = op.call_id
        if op.name:
            self.names[(self.stream, op.key, self._generation[at])] = op.name
        return False

    def _op(self, kind: str, key: CallKey, text: str, ignored: bool = False) -> ArgOp:
        op = ArgOp(kind, key, text, self.stream, self._generation.get((self.stream, key), 0), self.ended, ignored)
        if self.texts is not None and not op.late and not ignored:
            fragments, whole = self.texts.get(op.call, ([], None))
            if kind == "fragment":
                fragments.append(text)
            elif whole is None:
                whole = text
                if kind == "final":
                    self.finals.add(op.call)
            self.texts[op.call] = (fragments, whole)
        return op

    def taken(self, op: ArgOp, text: str, where: str) -> None:
        """``text`` (as the input has it) reached the assembler as ``op``."""
        if op.late:
            self.stray.append(f"{where}: argument text after the stream's end")
        elif op.ignored:
            self.duplicate(text, where)
        elif op.kind == "final":  # replaces the call's fragments
            running = self._fragments[op.call] = hashlib.sha256()
            running.update(text.encode("utf-16-le", "surrogatepass"))
        elif op.kind == "fragment":
            running = self._fragments.get(op.call)
            if running is None:
                running = self._fragments[op.call] = hashlib.sha256()
            running.update(text.encode("utf-16-le", "surrogatepass"))
        else:
            self._whole.setdefault(op.call, digest(text))
            self._pending.append((digest(text), where))  # used only if no fragment follows

    def duplicate(self, text: str, where: str) -> None:
        """``text`` repeats argument text: fine only if some call took exactly this text."""
        if text:
            self._pending.append((digest(text), where))

    def ignored(self, where: str, what: str = "argument text no call reads") -> None:
        """Argument text (or a shape that may hold it) that no call took."""
        self.stray.append(f"{where}: {what}")

    def finish(self) -> list[str]:
        """:attr:`stray`, completed with the duplicates no call's text matches."""
        used = {running.digest() for running in self._fragments.values()}
        used |= {d for call, d in self._whole.items() if call not in self._fragments}
        self.stray.extend(f"{where}: argument text that differs from every call's" for d, where in self._pending if d not in used)
        self._pending = []
        return self.stray


class Scanners:
    """One masking scanner per call, so string state carries across its fragments."""

    def __init__(self) -> None:
        self._scanners: dict[Any, JSONPrefixScanner] = {}

    def mask(self, call: Any, text: str) -> str:
        """``text``, the next fragment of ``call``, with its string values masked."""
        scanner = self._scanners.get(call)
        if scanner is None:
            scanner = self._scanners[call] = JSONPrefixScanner(mask=True)
        return scanner.feed(text)


__all__ = [
    "ArgOp",
    "Ledger",
    "Scanners",
    "digest",
    "escaped",
    "escaped_placeholder",
    "mask_all",
    "mask_arguments",
    "mask_json_text",
    "mask_value",
    "placeholder",
]
