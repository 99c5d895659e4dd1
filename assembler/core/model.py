"""Provider-independent data: call states, ops, assembly events and results.

Data flows one way: a dialect adapter turns provider events into *ops*; the
:class:`~toollatch.core.assembler.Assembler` applies ops to per-call state machines and
emits *assembly events*; finalized calls and their results come out as
:class:`StreamResult`.

Argument text lives only in :class:`ArgsFragment` and :class:`ArgsFinal` ops (input side) and in
:class:`CommittedCall` (output side, after the latch). Nothing else here has a field
that could carry it: assembly events carry a :class:`~toollatch.redaction.redact.CallView`.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeAlias

#: A call's stable position in the provider's stream, e.g. ``(choice, index, generation)``
#: for OpenAI Chat or ``(block_index,)`` for Anthropic. Sorting keys gives provider order.
CallKey: TypeAlias = tuple[int, ...]

Executor = Literal["client", "server"]
StreamEndKind = Literal["complete", "truncated", "error", "cancelled"]


class CallState(enum.Enum):
    """States of one streamed tool call (DESIGN.md, "Core model")."""

    OPEN = "open"
    ARGS_COMPLETE = "args_complete"
    COMMITTED = "committed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    #: Members are singletons compared by identity, so they hash by identity too: the
    #: state table is looked up on every transition, and ``Enum.__hash__`` is Python code.
    __hash__ = object.__hash__

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset((CallState.COMMITTED, CallState.FAILED, CallState.CANCELLED))


class Reason(str, enum.Enum):
    """Reason codes a non-committed call carries (``reason`` starts with one of these)."""

    INVALID_JSON = "invalid_json"
    ARGUMENTS_NOT_OBJECT = "arguments_not_object"
    ARGUMENTS_EXCEED_MAX_BYTES = "arguments_exceed_max_bytes"
    ARGUMENTS_TOO_DEEP = "arguments_too_deep"
    TOO_MANY_TOOL_CALLS = "too_many_tool_calls"
    MISSING_ID_OR_NAME = "missing_id_or_name"
    #: A later chunk named a different tool for a call already named: which tool the
    #: provider meant cannot be told, so the call must not run under either name.
    NAME_CONFLICT = "name_conflict"
    UNKNOWN_TOOL = "unknown_tool"
    SCHEMA_INVALID = "schema_invalid"
    SCHEMA_CHECK_TIMEOUT = "schema_check_timeout"
    STREAM_TRUNCATED = "stream_truncated"
    STREAM_ERROR = "stream_error"
    IDLE_TIMEOUT = "idle_timeout"
    CANCELLED = "cancelled"
    BUDGET_EXCEEDED = "budget_exceeded"

    def with_detail(self, detail: str | None) -> str:
        return f"{self.value}: {detail}" if detail else self.value


# --------------------------------------------------------------------------- ops
# Ops are what dialect adapters produce. They know nothing of states. Ops are never
# mutated after construction; the ones made per fragment are not ``frozen`` only because
# a frozen dataclass costs twice as much to build on the hot path.


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
            if isinstance(v, str):
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

    def __post_init__(self) -> None:
        _escaped_detail(self)


@dataclass(frozen=True, slots=True)
class StreamTruncated:
    """Input ended without the provider's normal end."""

    detail: str | None = None

    def __post_init__(self) -> None:
        _escaped_detail(self)


@dataclass(frozen=True, slots=True)
class StreamError:
    """The provider reported an error, or the stream could not be interpreted."""

    detail: str | None = None
    #: The provider's own free text (an error's ``message``): untrusted, it may quote the
    #: arguments. Shown only when a person asked to reveal text (``--reveal``, *Reveal*).
    message: str | None = None

    def __post_init__(self) -> None:
        _escaped_detail(self)
        _escaped_detail(self, "message")


@dataclass(frozen=True, slots=True)
class Cancel:
    """User stop or deadline: open calls become CANCELLED."""

    detail: str | None = None

    def __post_init__(self) -> None:
        _escaped_detail(self)


@dataclass(slots=True)
class Quirk:
    """A provider or gateway deviation met in the stream (recorded, never fatal)."""

    name: str

    def __post_init__(self) -> None:
        _escaped_detail(self, "name")


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
)


# ------------------------------------------------------------------ results


class Transition(NamedTuple):
    """One state change of a call; ``t`` in seconds since the stream started.

    A named tuple: three are built per call, on the path every stream takes."""

    state: CallState
    t: float


@dataclass(frozen=True, slots=True)
class CommittedCall:
    """A call that passed the completion latch; the only type an executor accepts.

    ``arguments`` is the parsed JSON value: an object (``{}`` for a call with no argument
    text) unless ``arguments_must_be_object`` was turned off.
    """

    key: CallKey
    call_id: str
    name: str
    arguments: Any
    executor: Executor = "client"

    @property
    def id(self) -> str:
        """``call_id``, by the name the SDKs give it (``tool_call.id``, ``tool_use.id``)."""
        return self.call_id


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A result owed to the client for one ``tool_call_id``."""

    tool_call_id: str | None
    is_error: bool
    content: str

    def to_json(self) -> dict[str, Any]:
        return {"tool_call_id": self.tool_call_id, "is_error": self.is_error, "content": self.content}


@dataclass(slots=True)
class CallOutcome:
    """The final record of one call, as ``toollatch assemble --json`` prints it.

    ``bytes`` counts UTF-8 bytes of argument text received; ``fragments`` counts
    argument fragments received (both include text dropped after an overflow).
    ``arguments`` is set only for COMMITTED calls.
    """

    key: CallKey
    call_id: str | None
    name: str | None
    state: CallState
    reason: str | None
    bytes: int
    fragments: int
    executor: Executor
    arguments: Any = None
    transitions: list[Transition] = field(default_factory=list)
    #: True when this call was removed from the finalized assistant message, which then
    #: owes it no result: a failed call under ``drop_with_protocol_repair``, or a call that
    #: carried a tool_call_id another record of the stream keeps (one id, one entry).
    repaired: bool = False
    #: Why a FAILED call failed, precisely, without quoting argument text: for
    #: ``invalid_json`` ``{"kind": "invalid", "fragment_index", "byte_offset", "expected"}``
    #: or ``{"kind": "incomplete", "depth", "expected"}``; for ``schema_invalid``
    #: ``{"kind": "schema", "errors": [{"pointer", "keyword"}]}``; for a stream cut off or
    #: failed by the provider ``{"kind": "cut_off", "stream_end", "bytes", "fragments",
    #: "text": <invalid/incomplete/complete diagnosis of the text so far>}``.
    diagnosis: dict[str, Any] | None = None
    #: The provider's kind of call (:attr:`CallStart.item`), None where the dialect has one.
    item: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "name": self.name,
            "state": self.state.value,
            "reason": self.reason,
            "arguments": self.arguments,
            "bytes": self.bytes,
            "fragments": self.fragments,
            "executor": self.executor,
            "diagnosis": self.diagnosis,
        }


@dataclass(slots=True)
class StreamResult:
    """Everything one stream assembled to."""

    dialect: str
    end: StreamEndKind | None
    end_detail: str | None
    calls: list[CallOutcome]
    results: list[ToolResult]
    quirks: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "dialect": self.dialect,
            "end": self.end,
            "end_detail": self.end_detail,
            "calls": [c.to_json() for c in self.calls],
            "results": [r.to_json() for r in self.results],
            "quirks": [{"quirk": k, "count": v} for k, v in self.quirks.items()],
            "repairs": [
                {"call_id": c.call_id, "name": c.name, "reason": c.reason, "repair": "dropped_from_history"}
                for c in self.calls
                if c.repaired
            ],
        }
