"""Ops: what dialect adapters produce and the assembler applies, one per provider fact.

A dialect adapter turns provider events into ops (:data:`Op`): a stream starts, a call
starts or learns its identity, an argument fragment arrives, a content block stops, the
stream ends (normally, truncated, with an error, or cancelled). Ops know nothing of call
states; :class:`~toollatch.core.assembler.Assembler` applies them. Ops are never mutated
after construction; the ones made per fragment are not ``frozen`` only because a frozen
dataclass costs twice as much to build on the hot path.

Argument text lives only in :class:`ArgsFragment` and :class:`ArgsFinal`. Every other op
that carries provider text escapes its lone surrogates when it is built
(:func:`escape_surrogates`). All names here are also importable from
:mod:`toollatch.core.model`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from toollatch.core.model import CallKey, Executor


#: A UTF-16 surrogate code point: in a ``str`` decoded from JSON it is always a lone one
#: (``json.loads`` joins a ``\\ud83d\\ude00`` pair into one character).
_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """``text`` with every lone UTF-16 surrogate written as its escape, ``\\udXXX`` (six
    ASCII characters); any other text is returned as it is.

    JSON may spell a lone surrogate (``"\\ud800x"``, RFC 8259 section 8.2) and ``json.loads``
    keeps it, but such a string cannot be encoded as UTF-8: not stored in SQLite, not
    written to a page, a log or a terminal. Every op that carries provider text other than
    argument fragments passes its strings through here when it is built, so whatever
    reaches storage and screens is valid Unicode. Argument fragments are left alone: a
    surrogate pair may be split across two of them (the latch judges the joined text).
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _escaped_identity(op: CallStart | CallIdentity) -> None:
    """Escape lone surrogates in ``op``'s ``call_id`` and ``name``, naming each such field in
    ``op.not_unicode`` (the latch fails the call ``missing_id_or_name``: an escaped id or
    name is not the one the provider sent, so the call must not run under it)."""
    bad = op.not_unicode
    for attr in ("call_id", "name"):
        value = getattr(op, attr)
        if value and not value.isascii():
            escaped = escape_surrogates(value)
            if escaped is not value:
                setattr(op, attr, escaped)
                bad = (*bad, attr) if attr not in bad else bad
    op.not_unicode = bad


def _escaped_detail(op: Any, attr: str = "detail") -> None:
    value = getattr(op, attr)
    if value and not value.isascii():
        object.__setattr__(op, attr, escape_surrogates(value))


@dataclass(frozen=True, slots=True)
class StreamStart:
    """A new response stream begins (e.g. Anthropic ``message_start``).

    A file may hold several consecutive streams; each gets its own assembler.
    """

    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for k, v in self.meta.items():
            if isinstance(v, str) and not v.isascii():  # ASCII: nothing to escape
                self.meta[k] = escape_surrogates(v)


@dataclass(slots=True)
class CallStart:
    """A tool call appears at ``key``.

    ``whole_arguments`` is argument text that arrived complete with the start
    (Anthropic ``content_block_start.content_block.input``, Responses ``.done``
    without deltas); it is used only if no :class:`ArgsFragment` arrives for the key.
    """

    key: CallKey
    call_id: str | None = None
    name: str | None = None
    executor: Executor = "client"
    whole_arguments: str | None = None
    #: The fields (``"call_id"``, ``"name"``) that held a lone surrogate, now escaped.
    not_unicode: tuple[str, ...] = ()
    #: The provider's kind of call where a dialect has several (Responses ``shell_call``,
    #: ``computer_call``...): the finalized history gives the call back in that shape.
    item: str | None = None

    def __post_init__(self) -> None:
        call_id, name = self.call_id, self.name
        if (call_id and not call_id.isascii()) or (name and not name.isascii()):  # ASCII: nothing to escape
            _escaped_identity(self)


@dataclass(slots=True)
class CallIdentity:
    """``call_id`` and/or ``name`` seen after the start: *set*, never appended.

    A call id or name that differs from the one the call has is a conflict (the first
    stays) unless ``final``: the provider's finalized item names the call (Responses
    ``output_item.done``), and its id replaces the provisional one (quirk ``call_id_replaced``).
    """

    key: CallKey
    call_id: str | None = None
    name: str | None = None
    #: As :attr:`CallStart.not_unicode`.
    not_unicode: tuple[str, ...] = ()
    final: bool = False

    def __post_init__(self) -> None:
        call_id, name = self.call_id, self.name
        if (call_id and not call_id.isascii()) or (name and not name.isascii()):  # ASCII: nothing to escape
            _escaped_identity(self)


@dataclass(slots=True)
class ArgsFragment:
    """One opaque fragment of argument text (never parsed on its own)."""

    key: CallKey
    text: str


@dataclass(slots=True)
class ArgsFinal:
    """The provider's finalized argument text for the call at ``key``: it *replaces* the
    fragments received so far, which were a preview.

    OpenAI Responses sends the whole text again when an item's arguments are done
    (``function_call_arguments.done``, ``output_item.done``, ``response.completed``); that
    text is authoritative. The adapter sends this op only where it differs from the joined
    deltas (quirk ``done_arguments_differ``). The call's byte count becomes the final
    text's; like any fragment it is never parsed before the latch.
    """

    key: CallKey
    text: str


@dataclass(frozen=True, slots=True)
class ArgsNotStrict:
    """The call at ``key`` got argument text from an event that is not strict JSON.

    Arguments that arrive as a JSON *value* (Gemini ``functionCall.args``, an Anthropic
    ``content_block_start`` ``input``, OpenAI ``arguments`` given as an object) are parsed
    with their event, which keeps the last of duplicate keys, so the text made from them
    no longer shows the fault. ``problem`` names it (``duplicate object key``, a
    non-standard constant, a lone surrogate) without quoting the text; the latch fails the
    call ``invalid_json``.
    """

    key: CallKey
    problem: str

    def __post_init__(self) -> None:
        _escaped_detail(self, "problem")


@dataclass(slots=True)
class BlockStop:
    """The provider closed the call's block (Anthropic ``content_block_stop``)."""

    key: CallKey


@dataclass(frozen=True, slots=True)
class CallTruncated:
    """The provider cut the one call at ``key`` short while the stream goes on.

    For dialects whose adapter builds the argument text itself (Gemini ``partialArgs``):
    a call whose last part promised more (``willContinue``) and that another call then
    ended. Its text so far would still parse, so it never reaches the latch: the call
    fails ``stream_truncated`` with ``detail`` at once, and owes an error result.
    """

    key: CallKey
    detail: str

    def __post_init__(self) -> None:
        _escaped_detail(self)


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The provider's *normal* end (``[DONE]``, ``finish_reason``, ``message_stop``)."""

    detail: str | None = None
    #: A stop reason the detail hides (:mod:`toollatch.dialects.words`): shown only when a
    #: person asked to reveal text.
    message: str | None = field(default=None, compare=False)
    #: Provider words the detail shows as they are (a stop reason): hidden after all when a
    #: call that did not commit holds one in its argument text (:func:`toollatch.core.stream_end.guard_words`).
    words: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        detail, message = self.detail, self.message
        if (detail and not detail.isascii()) or (message and not message.isascii()):  # ASCII: nothing to escape
            _escaped_detail(self)
            _escaped_detail(self, "message")


@dataclass(frozen=True, slots=True)
class StreamTruncated:
    """Input ended without the provider's normal end."""

    detail: str | None = None
    #: Provider text the detail leaves out (a stop reason hidden by :mod:`toollatch.dialects.words`):
    #: shown only when a person asked to reveal text.
    message: str | None = field(default=None, compare=False)
    #: Provider words the detail shows as they are (a stop reason): hidden after all when a
    #: call that did not commit holds one in its argument text (:func:`toollatch.core.stream_end.guard_words`).
    words: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        detail, message = self.detail, self.message
        if (detail and not detail.isascii()) or (message and not message.isascii()):  # ASCII: nothing to escape
            _escaped_detail(self)
            _escaped_detail(self, "message")


@dataclass(frozen=True, slots=True)
class StreamError:
    """The provider reported an error, or the stream could not be interpreted."""

    detail: str | None = None
    #: The provider's own free text (an error's ``message``, and any reason, type or code
    #: the detail hides): untrusted, it may quote the arguments. Shown only when a person
    #: asked to reveal text (``--reveal``, *Reveal*).
    message: str | None = None
    #: Provider words the detail shows as they are (a stop reason, an error type or code):
    #: hidden after all when a call that did not commit holds one in its argument text
    #: (:func:`toollatch.core.stream_end.guard_words`).
    words: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        detail, message = self.detail, self.message
        if (detail and not detail.isascii()) or (message and not message.isascii()):  # ASCII: nothing to escape
            _escaped_detail(self)
            _escaped_detail(self, "message")


@dataclass(frozen=True, slots=True)
class Cancel:
    """User stop or deadline: open calls become CANCELLED."""

    detail: str | None = None

    def __post_init__(self) -> None:
        if self.detail and not self.detail.isascii():  # ASCII: nothing to escape
            _escaped_detail(self)


@dataclass(slots=True)
class Quirk:
    """A provider or gateway deviation met in the stream (recorded, never fatal);
    ``count``: how many times it was met (one op for a run of the same deviation, e.g.
    thousands of SSE comment lines before one event)."""

    name: str
    count: int = 1

    def __post_init__(self) -> None:
        name = self.name
        if name and not name.isascii():
            self.name = escape_surrogates(name)


@dataclass(frozen=True, slots=True)
class CallsLeftOut:
    """The identity ops (:class:`CallStart`, :class:`CallIdentity`) of calls a reader left
    out of its assembly (:class:`toollatch.core.large.CappedPipeline`, which follows an
    input's first calls only), in the place they had among the ops. No call record is
    made; the tool_call_ids they name count as carried by calls of the stream, as they
    would be for the library's own readers, so a followed call that shares its id with a
    call left out gets the same verdict (``call id used by more than one call``)."""

    ops: tuple[CallStart | CallIdentity, ...]


Op: TypeAlias = (
    StreamStart
    | CallStart
    | CallIdentity
    | ArgsFragment
    | ArgsFinal
    | ArgsNotStrict
    | BlockStop
    | CallTruncated
    | StreamEnd
    | StreamTruncated
    | StreamError
    | Cancel
    | Quirk
    | CallsLeftOut
)
