"""An incremental JSON prefix checker (RFC 8259 grammar), fed fragment by fragment.

It answers, in one linear pass and without building any value: is the text so far a
valid *prefix* of one JSON text, is it complete, and if not, where exactly did it stop
being one (fragment index, byte offset in the joined text, and the token class that was
expected). It can also mask string values with placeholders of the same UTF-8 byte
length, keeping object keys, numbers, literals and structure, which is what a redacted
reproducer needs: the same fragments, the same byte counts, the same verdict.

Byte offsets are in UTF-8 bytes of the joined text; fragment indexes are 0-based.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any


class Expect(str, enum.Enum):
    """Token classes the grammar allows next (what a diagnosis names, never the text)."""

    VALUE = "value"
    VALUE_OR_CLOSE_ARRAY = "value or ']'"
    KEY_OR_CLOSE_OBJECT = "string key or '}'"
    KEY = "string key"
    COLON = "':'"
    COMMA_OR_CLOSE_OBJECT = "',' or '}'"
    COMMA_OR_CLOSE_ARRAY = "',' or ']'"
    STRING_CHAR = "string character or '\"'"
    ESCAPE = "escape character"
    HEX_DIGIT = "hex digit"
    DIGIT = "digit"
    LITERAL = "literal (true, false, null)"
    END = "end of input"


class _Mode(enum.Enum):
    VALUE = 0  # a value must start here
    VALUE_OR_CLOSE = 1  # just after '['
    KEY_OR_CLOSE = 2  # just after '{'
    KEY = 3  # after ',' in an object
    COLON = 4
    AFTER_VALUE = 5  # a value ended: ',' or the container's close, or end at top level
    STRING = 6
    ESCAPE = 7
    UNICODE = 8
    NUMBER = 9
    LITERAL = 10
    DONE = 11  # the top-level value ended; only whitespace may follow

    __hash__ = object.__hash__  # members are singletons: identity hashing (Enum's is Python code)


_WS = frozenset(" \t\n\r")
#: A run of string content that needs no look: no quote, no backslash, no control character.
_PLAIN = re.compile(r'[^"\\\x00-\x1f]+')
_ESCAPES = frozenset('"\\/bfnrtu')
_HEX = frozenset("0123456789abcdefABCDEF")
_DIGITS = frozenset("0123456789")
_LITERALS = {"t": "true", "f": "false", "n": "null"}
# Number sub-states: what has been read so far of -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?
_N_SIGN, _N_ZERO, _N_INT, _N_DOT, _N_FRAC, _N_E, _N_ESIGN, _N_EXP = range(8)
_N_COMPLETE = frozenset({_N_ZERO, _N_INT, _N_FRAC, _N_EXP})
_IN_STRING = frozenset({_Mode.STRING, _Mode.ESCAPE, _Mode.UNICODE})
#: What each mode expects next (AFTER_VALUE depends on the open container).
_EXPECT = {
    _Mode.VALUE: Expect.VALUE,
    _Mode.VALUE_OR_CLOSE: Expect.VALUE_OR_CLOSE_ARRAY,
    _Mode.KEY_OR_CLOSE: Expect.KEY_OR_CLOSE_OBJECT,
    _Mode.KEY: Expect.KEY,
    _Mode.COLON: Expect.COLON,
    _Mode.STRING: Expect.STRING_CHAR,
    _Mode.ESCAPE: Expect.ESCAPE,
    _Mode.UNICODE: Expect.HEX_DIGIT,
    _Mode.NUMBER: Expect.DIGIT,
    _Mode.LITERAL: Expect.LITERAL,
    _Mode.DONE: Expect.END,
}


@dataclass(frozen=True, slots=True)
class PrefixError:
    """Where the text stopped being a valid JSON prefix."""

    fragment_index: int
    byte_offset: int
    expected: str

    def to_json(self) -> dict[str, Any]:
        return {"fragment_index": self.fragment_index, "byte_offset": self.byte_offset, "expected": self.expected}


class JSONPrefixScanner:
    """Feed fragments with :meth:`feed`; read :attr:`error`, :attr:`complete`, :attr:`depth`.

    After an error, further input is ignored (the first fault is the one that matters).
    With ``mask=True``, :meth:`feed` returns the fragment with every character of every
    string *value* replaced by ``x`` characters of the same UTF-8 byte length.
    """

    def __init__(self, *, mask: bool = False) -> None:
        self.mask = mask
        self.error: PrefixError | None = None
        self._mode = _Mode.VALUE
        self._stack: list[str] = []  # '{' or '['
        self._fragment = -1
        self._offset = 0  # bytes consumed so far
        self._in_key = False  # the current string is an object key
        self._hex_left = 0
        self._num = _N_SIGN
        self._literal = ""
        self._literal_pos = 0

    @property
    def depth(self) -> int:
        """Open objects and arrays at this point."""
        return len(self._stack)

    @property
    def complete(self) -> bool:
        """True if the text so far is one whole JSON value (trailing whitespace allowed)."""
        if self.error is not None:
            return False
        if self._mode is _Mode.DONE:
            return True
        return self._mode is _Mode.NUMBER and not self._stack and self._num in _N_COMPLETE

    @property
    def expected(self) -> str:
        """The token class the grammar expects next."""
        return self._expect().value

    def feed(self, fragment: str) -> str:
        """Consume one fragment; return it (masked when ``mask`` is on)."""
        self._fragment += 1
        if self.error is not None:
            return _mask_all(fragment) if self.mask else fragment
        if not self.mask:
            self._scan(fragment)
            return fragment
        out: list[str] = []
        for ch in fragment:
            width = 1 if ch < "\x80" else len(ch.encode("utf-8", "surrogatepass"))
            # String-value content: inside a value string (escapes included), not its quotes.
            content = self._mode in _IN_STRING and not self._in_key and not (self._mode is _Mode.STRING and ch == '"')
            if self.error is None and not self._step(ch):
                self.error = PrefixError(self._fragment, self._offset, self._expect().value)
            out.append("x" * width if content or self.error is not None else ch)
            self._offset += width
        return "".join(out)

    def _scan(self, fragment: str) -> None:
        """:meth:`feed` without masking: runs of plain string content are passed in one step."""
        i, n = 0, len(fragment)
        while i < n:
            if self.error is not None:  # only the byte count goes on
                self._offset += len(fragment[i:].encode("utf-8", "surrogatepass"))
                return
            if self._mode is _Mode.STRING:
                run = _PLAIN.match(fragment, i)
                if run is not None:
                    text = run.group()
                    self._offset += len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
                    i = run.end()
                    continue
            ch = fragment[i]
            if not self._step(ch):
                self.error = PrefixError(self._fragment, self._offset, self._expect().value)
            self._offset += 1 if ch < "\x80" else len(ch.encode("utf-8", "surrogatepass"))
            i += 1

    def _expect(self) -> Expect:
        if self._mode is _Mode.AFTER_VALUE:
            return Expect.COMMA_OR_CLOSE_OBJECT if self._stack[-1] == "{" else Expect.COMMA_OR_CLOSE_ARRAY
        return _EXPECT[self._mode]

    def _step(self, ch: str) -> bool:
        """Advance by one character; False if ``ch`` cannot continue a valid prefix."""
        mode = self._mode
        if mode is _Mode.STRING:
            if ch == '"':
                self._in_key_closing()
                return True
            if ch == "\\":
                self._mode = _Mode.ESCAPE
                return True
            return ch >= " "  # control characters must be escaped
        if mode is _Mode.ESCAPE:
            if ch not in _ESCAPES:
                return False
            if ch == "u":
                self._mode, self._hex_left = _Mode.UNICODE, 4
            else:
                self._mode = _Mode.STRING
            return True
        if mode is _Mode.UNICODE:
            if ch not in _HEX:
                return False
            self._hex_left -= 1
            if self._hex_left == 0:
                self._mode = _Mode.STRING
            return True
        if mode is _Mode.NUMBER:
            if self._number(ch):
                return True
            if self._num not in _N_COMPLETE:
                return False
            self._value_ended()
            return self._step(ch)  # the character after a number is read in the new mode
        if mode is _Mode.LITERAL:
            if ch != self._literal[self._literal_pos]:
                return False
            self._literal_pos += 1
            if self._literal_pos == len(self._literal):
                self._value_ended()
            return True
        if ch in _WS:
            return True
        if mode in (_Mode.VALUE, _Mode.VALUE_OR_CLOSE):
            if mode is _Mode.VALUE_OR_CLOSE and ch == "]":
                self._stack.pop()
                self._value_ended()
                return True
            return self._value_start(ch)
        if mode in (_Mode.KEY_OR_CLOSE, _Mode.KEY):
            if mode is _Mode.KEY_OR_CLOSE and ch == "}":
                self._stack.pop()
                self._value_ended()
                return True
            if ch != '"':
                return False
            self._mode, self._in_key = _Mode.STRING, True
            return True
        if mode is _Mode.COLON:
            if ch != ":":
                return False
            self._mode = _Mode.VALUE
            return True
        if mode is _Mode.AFTER_VALUE:
            top = self._stack[-1]
            if ch == ",":
                self._mode = _Mode.KEY if top == "{" else _Mode.VALUE
                return True
            if (ch == "}" and top == "{") or (ch == "]" and top == "["):
                self._stack.pop()
                self._value_ended()
                return True
            return False
        return False  # DONE: only whitespace may follow

    def _value_start(self, ch: str) -> bool:
        if ch == "{":
            self._stack.append("{")
            self._mode = _Mode.KEY_OR_CLOSE
        elif ch == "[":
            self._stack.append("[")
            self._mode = _Mode.VALUE_OR_CLOSE
        elif ch == '"':
            self._mode, self._in_key = _Mode.STRING, False
        elif ch == "-" or ch in _DIGITS:
            self._mode = _Mode.NUMBER
            self._num = _N_SIGN if ch == "-" else (_N_ZERO if ch == "0" else _N_INT)
        elif ch in _LITERALS:
            self._mode, self._literal, self._literal_pos = _Mode.LITERAL, _LITERALS[ch], 1
        else:
            return False
        return True

    def _number(self, ch: str) -> bool:
        n = self._num
        if ch in _DIGITS:
            if n == _N_SIGN:
                self._num = _N_ZERO if ch == "0" else _N_INT
            elif n == _N_INT or n == _N_FRAC or n == _N_EXP:
                pass
            elif n == _N_DOT:
                self._num = _N_FRAC
            elif n in (_N_E, _N_ESIGN):
                self._num = _N_EXP
            else:  # a digit after a leading zero
                return False
            return True
        if ch == "." and n in (_N_ZERO, _N_INT):
            self._num = _N_DOT
            return True
        if ch in "eE" and n in (_N_ZERO, _N_INT, _N_FRAC):
            self._num = _N_E
            return True
        if ch in "+-" and n == _N_E:
            self._num = _N_ESIGN
            return True
        return False

    def _in_key_closing(self) -> None:
        if self._in_key:
            self._in_key = False
            self._mode = _Mode.COLON
        else:
            self._value_ended()

    def _value_ended(self) -> None:
        self._mode = _Mode.AFTER_VALUE if self._stack else _Mode.DONE


def _mask_all(fragment: str) -> str:
    return "x" * len(fragment.encode("utf-8", "surrogatepass"))


def diagnose(fragments: list[str]) -> dict[str, Any]:
    """A diagnosis of argument text given as its fragments.

    ``{"kind": "invalid", "fragment_index", "byte_offset", "expected"}`` where the text
    stopped being a valid JSON prefix; ``{"kind": "incomplete", "depth", "expected"}`` for a
    valid prefix that ended early; ``{"kind": "complete"}`` when the grammar is satisfied
    (a strict-JSON failure is then semantic: duplicate keys, non-finite numbers...).
    """
    scanner = JSONPrefixScanner()
    for fragment in fragments:
        scanner.feed(fragment)
        if scanner.error is not None:
            return {"kind": "invalid", **scanner.error.to_json()}
    if scanner.complete:
        return {"kind": "complete"}
    return {"kind": "incomplete", "depth": scanner.depth, "expected": scanner.expected}
