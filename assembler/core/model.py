"""Provider-independent data: call states, ops, assembly events and results.

Data flows one way: a dialect adapter turns provider events into *ops*; the
:class:`~toollatch.core.assembler.Assembler` applies ops to per-call state machines and
emits *assembly events*; finalized calls and their results come out as
:class:`StreamResult`.

Argument text lives only in :class:`ArgsFragment` and :class:`ArgsFinal` ops (input side) and in
:class:`CommittedCall` (output side, after the latch). Nothing else here has a field
that could carry it: assembly events carry a :class:`~toollatch.redaction.redact.CallView`.

The ops are defined in :mod:`toollatch.core.ops` and importable from here as well.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeAlias

# Ops (toollatch.core.ops) are importable from here too.
from toollatch.core.ops import (  # noqa: F401
    ArgsFinal,
    ArgsFragment,
    ArgsNotStrict,
    BlockStop,
    CallIdentity,
    CallsLeftOut,
    CallStart,
    CallTruncated,
    Cancel,
    Op,
    Quirk,
    StreamEnd,
    StreamError,
    StreamStart,
    StreamTruncated,
    escape_surrogates,
)

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
#: The terminal states, for code that tests many calls: ``state in TERMINAL_STATES`` is
#: :attr:`CallState.terminal` without the property call.
TERMINAL_STATES: frozenset[CallState] = _TERMINAL
#: Each state as a plain name: reading ``CallState.OPEN`` goes through the enum's
#: descriptor (about 0.1 µs) on every read; these are the same members.
OPEN, ARGS_COMPLETE, COMMITTED = CallState.OPEN, CallState.ARGS_COMPLETE, CallState.COMMITTED


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


def hidden(value: str, what: str = "value") -> str:
    """The stand-in a reason shows for provider text it hides: ``(hidden <what>, N characters)``
    (``N``: the length of ``value`` in characters)."""
    return f"(hidden {what}, {len(value)} characters)"


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
