"""Where argument text is in a provider event, and how each place is masked.

:class:`PlaceMasker` is the base of :class:`~.masker.DialectMasker`: it matches each place
of argument text a dialect method meets to the adapter's op for it (by its text, in the
adapter's order), so a fragment is masked with its own call's scanner, and records the
place's use in a :class:`~.redactor.Ledger`:

* :meth:`PlaceMasker.args` — a place the adapter reads as argument text: a fragment, a
  whole text, or a text repeated for comparison (a Responses ``.done``); a string or a
  JSON value;
* :meth:`PlaceMasker.free` — a custom tool's free-text input, which the adapter escapes
  into ``{"input":"..."}``;
* :meth:`PlaceMasker.unread` — argument text where no adapter reads it: masked whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toollatch.core import jsontext
from toollatch.wire.capture import DONE, ERROR_FRAME, ProviderEvent
from toollatch.dialects.openai_responses import _WRAP_CLOSE, _WRAP_OPEN  # around a custom tool's free-text input
from toollatch.core.model import Op
from toollatch.dialects.words import is_known
from toollatch.redaction.redactor import (
    ArgOp,
    Ledger,
    Scanners,
    escaped,
    escaped_placeholder,
    mask_all,
    mask_arguments,
    mask_json_text,
    mask_value,
    placeholder,
)
from toollatch.redaction.scalarmask import MaskPlan, as_value_like, mask_scalars_text, mask_scalars_value
from toollatch.wire.untrusted import parse_json

Json = Any

#: A fallback number is written with at most this many digits (Python's int/str limit).
_MAX_DIGITS = 4000


def mask_text(value: Any) -> Any:
    """A text field masked: a string as its placeholder, any other value with its strings masked."""
    return placeholder(value) if isinstance(value, str) else mask_value(value)


#: What a provider error object keeps in a reproducer: words from the provider's fixed list.
_ERROR_KEEP = frozenset({"type", "code", "status"})


def mask_word(value: Any) -> Any:
    """A reason, type or code as a reproducer keeps it: a word of a known vocabulary
    (:func:`toollatch.dialects.words.known`) or a number as it is; any other string (even one
    shaped like a word: it could be a piece of a call's arguments) as a stand-in of its byte
    length that is no word (it starts with a space), so the replay hides it just the same
    and ends the stream the same way."""
    if not isinstance(value, str) or is_known(value):
        return value
    return " " + placeholder(value)[1:]


def mask_exception_name(name: str) -> str:
    """A Bedrock ``...Exception`` event name as a reproducer keeps it: a known one as it is,
    else a stand-in of the same length that still ends in ``Exception`` (so the replay reads
    an exception event) and is no word."""
    if is_known(name) or len(name) < 12:
        return name if is_known(name) else "X0Exception"
    return "X0" + "x" * (len(name) - 11) + "Exception"


#: The fields of a provider error object whose names a reproducer keeps (the providers'
#: documented ones); any other key is the provider's to name, and is masked.
_ERROR_FIELDS = _ERROR_KEEP | {"message", "param", "details"}


def _mask_error(error: Any) -> Any:
    """A provider error object as a reproducer keeps it: its type, code and status as words
    (:func:`mask_word`), every other value masked, and every key but the documented fields'
    masked (a placeholder of its length: a key can quote the arguments as a value can)."""
    if isinstance(error, dict):
        return {(k if k in _ERROR_FIELDS else placeholder(k)): _masked_field(k, v) for k, v in error.items()}
    return mask_whole(error)


def _masked_field(key: str, value: Any) -> Any:
    """One field of a provider error: a type, code or status as a word (:func:`mask_word`),
    anything else masked whole (:func:`mask_whole`)."""
    return mask_word(value) if key in _ERROR_KEEP and not isinstance(value, (dict, list)) else mask_whole(value)


def mask_whole(value: Any) -> Any:
    """``value`` with every string, object key included, masked (any nesting depth)."""
    return jsontext.rebuild(value, lambda v: placeholder(v) if isinstance(v, str) else v, placeholder)


#: The fields of an error event (OpenAI Responses ``{"type": "error", "code", "message",
#: "param", "sequence_number"}``, Anthropic ``{"type": "error", "error", "request_id"}``,
#: Cohere ``{"type": "error", "message"}``) a reproducer keeps by name.
_ERROR_EVENT_FIELDS = frozenset({"type", "error", "code", "message", "param", "sequence_number", "request_id"})


def _mask_error_event(data: dict[str, Any]) -> None:
    """Mask, in place, an error event (one its dialect's adapter reads as the provider's
    error) as the error object it is (:func:`_mask_error`): its
    code, message and param of any shape as an error object's fields, its nested ``error``
    as an error object (masked before), every other value masked, and every key but the
    documented fields' masked (a placeholder of its length). Key order is kept."""
    masked: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _ERROR_EVENT_FIELDS:
            masked[placeholder(key)] = mask_whole(value)
        elif key == "type":  # "error", or where the adapter read the SSE event name any other value
            masked[key] = value if value == "error" else mask_whole(value)
        elif key == "error" or value is None:
            masked[key] = value  # the nested error object masked before
        elif key in ("code", "message", "param"):
            masked[key] = _masked_field(key, value)
        else:
            masked[key] = mask_whole(value)
    data.clear()
    data.update(masked)


def mask_provider_errors(data: dict[str, Any], error_event: bool = False) -> None:
    """Mask, in place, the free text of a provider error in an event of any dialect (an
    ``error`` object's ``message``, a Responses ``response.error``, a Bedrock
    ``...Exception`` body, an event-stream error frame's, a Cohere error ``message`` or ``message-end`` ``delta.error``):
    untrusted text that can quote the arguments. Its type, code and status stay when they
    are known words (:func:`mask_word`), so the replay fails the stream the same way.
    ``error_event``: the dialect reads the event itself as an error event (Responses,
    Anthropic, Cohere: :func:`_mask_error_event`)."""
    if data.get("error") is not None:
        data["error"] = _mask_error(data["error"])
    if isinstance(data.get("message"), str):  # an error event's top-level message (Responses, Cohere)
        data["message"] = mask_text(data["message"])
    if error_event:  # an error object itself
        _mask_error_event(data)
    response = data.get("response")
    if isinstance(response, dict) and response.get("error") is not None:
        response["error"] = _mask_error(response["error"])
    delta = data.get("delta")
    if isinstance(delta, dict) and delta.get("error") is not None:
        delta["error"] = _mask_error(delta["error"])
    if data.get(ERROR_FRAME) is not None:  # an event-stream error frame's code and message (any shape)
        data[ERROR_FRAME] = _mask_error(data[ERROR_FRAME])
    for kind, body in list(data.items()):
        if isinstance(kind, str) and kind.endswith("Exception"):
            masked = _mask_error(body) if body is not None else None
            del data[kind]
            data[mask_exception_name(kind)] = masked


def mask_reason(value: Any) -> Any:
    """A stop reason as a reproducer keeps it (:func:`mask_word`): a word from the provider's
    list as is; anything else (it could quote a call's arguments) as a placeholder of its
    byte length that is no word, so the replay reads it as an unknown reason just the same."""
    return mask_word(value)


def is_empty(value: Any) -> bool:
    """No argument text at all: None, ``""`` or ``{}``."""
    return value is None or value == "" or value == {}


class PlaceMasker:
    """Masks places of argument text and records their use in :attr:`ledger`; a dialect's
    methods (:class:`~.masker.DialectMasker`) say where the places are."""

    def __init__(self, plan: MaskPlan | None = None, *, record: bool = False, values: bool = True) -> None:
        #: what to mask of each call (calls that did not commit: every scalar); None: string values only
        self.plan = plan
        #: False: only the :attr:`ledger` is wanted (where argument text is, which calls
        #: took it), not the masked copy: places keep their values, nothing is masked
        self.values = values
        self.ledger = Ledger(record=record)
        self.scanners = Scanners()
        self._ops: list[ArgOp] = []
        self._next = 0
        self._where = ""
        self._method: Callable[[dict[str, Any]], None] = lambda data: None
        #: whether the dialect's adapter reads an event as an error event (None: it has none)
        self._error_event: Callable[[ProviderEvent], bool] | None = None
        #: the event being masked (its SSE event name is the type of an event whose payload
        #: names none, as the adapters read it)
        self._event = ProviderEvent(None, None, 0, 0)

    def mask(self, event: ProviderEvent, ops: list[Op]) -> Json:
        """A masked copy of ``event.data``; ``ops``: what the adapter made of the event.

        Raises what :mod:`.pipeline` calls ``ADAPTER_FAULTS`` for a shape the dialect never
        has; the caller then masks the event whole.
        """
        self._ops, self._next = self.ledger.apply(ops), 0
        self._where = f"line {event.line}"
        self._event = event
        if event.data is None or event.data == DONE:
            return event.data
        if not isinstance(event.data, dict):  # no dialect's event: nothing of it is kept
            self.ledger.ignored(self._where, "a shape the dialect never has")
            return mask_scalars_value(event.data)
        data = jsontext.copy_json(event.data)  # a private copy to rewrite
        self._method(data)
        kind = data.get("type")
        if kind is not None and not isinstance(kind, str):  # no type an adapter reads (they read the SSE event name then)
            data["type"] = mask_whole(kind)  # keys too
        if self.values:
            mask_provider_errors(data, self._error_event is not None and self._error_event(event))
        return data

    # ------------------------------------------------------------------ places

    def _take(self, kinds: tuple[str, ...], matches: Callable[[str], bool]) -> ArgOp | None:
        """The next argument op (in the adapter's order) of one of ``kinds`` whose text matches."""
        for i in range(self._next, len(self._ops)):
            op = self._ops[i]
            if op.kind in kinds and matches(op.text):
                self._next = i + 1
                return op
        return None

    def args(self, value: Any, what: str, *, whole: bool = False, repeat: bool = False) -> Any:
        """A place the adapter reads as argument text: a fragment, or with ``whole`` a text
        that arrives complete. ``repeat``: the dialect may repeat text a call already has
        there (a Responses ``.done``): compared, never appended."""
        if value is None or value == "":
            return value
        text = value if isinstance(value, str) else jsontext.dumps(value)
        where = f"{self._where} ({what})"
        op = self._take(("whole", "fragment", "final") if whole or repeat else ("fragment",), lambda t: t == text)
        plan = self.plan
        if op is not None:
            self.ledger.taken(op, text, where)
            if not self.values:
                return value
            if op.late:  # after its stream's end: no call takes it, nothing of it is kept
                return as_value_like(value, mask_scalars_text(text))
            if op.kind == "fragment":
                masked = (plan.fragment(op.call, text) if plan else None) or self.scanners.mask(op.call, text)
                return masked if isinstance(value, str) else _value_like(value, masked)
            if plan is not None and not op.ignored and (whole_text := plan.whole(op.call)) is not None:
                return as_value_like(value, whole_text)
        elif value == {} or value == []:
            return value  # no text: nothing to mask or to account for
        elif whole or repeat:
            self.ledger.duplicate(text, where)
        else:  # a fragment no op carried
            return self.unread(value, what)
        if not self.values:
            return value
        if plan is not None and (again := plan.repeated(text)) is not None:  # no committed call's text
            return as_value_like(value, again)
        return mask_json_text(value) if isinstance(value, str) else mask_arguments(value)

    def free(self, value: Any, what: str) -> Any:
        """A custom tool's free-text input, which the adapter JSON-escapes into
        ``{"input":"..."}``: masked to the byte length of its escaped form."""
        if is_empty(value):
            return value
        text = value if isinstance(value, str) else jsontext.dumps(value)
        inner = escaped(text)
        forms = (inner, _WRAP_OPEN + inner, _WRAP_OPEN + inner + _WRAP_CLOSE)
        where = f"{self._where} ({what})"
        op = self._take(("whole", "fragment", "final"), lambda t: t in forms)
        if op is not None:
            self.ledger.taken(op, text, where)
        else:
            self.ledger.duplicate(text, where)
        if not self.values:
            return value
        return escaped_placeholder(value) if isinstance(value, str) else mask_arguments(value, times=2)

    def unread(self, value: Any, what: str) -> Any:
        """Argument text in a place no adapter reads: masked whole, and recorded."""
        if is_empty(value):
            return value
        self.ledger.ignored(f"{self._where} ({what})")
        if not self.values:
            return value
        return mask_all(value) if isinstance(value, str) else mask_scalars_value(value)

    def objects(self, obj: dict[str, Any], key: str) -> list[dict[str, Any]]:
        """The objects of the array ``obj[key]`` (choices, tool calls, candidates, parts). A
        member or an entry of another type is a shape the dialect never has: every scalar
        of it is masked (nothing of it kept, keys and numbers neither) and it is recorded."""
        value = obj.get(key)
        if not isinstance(value, list):
            if value is not None:
                obj[key] = mask_scalars_value(value)
                self.ledger.ignored(f"{self._where} ({key})", "a shape the dialect never has")
            return []
        for i, entry in enumerate(value):
            if not isinstance(entry, dict):
                value[i] = mask_scalars_value(entry)
                self.ledger.ignored(f"{self._where} ({key})", "a shape the dialect never has")
        return [entry for entry in value if isinstance(entry, dict)]


def _value_like(value: Any, masked: str) -> Any:
    """The masked JSON value for argument text given as ``value`` whose text the call's
    scanner masked to ``masked``: :func:`mask_arguments` when that gives the same text (the
    value starts or continues the call's JSON at a value position), else a value written
    exactly as ``masked`` if it is one, else a number of the same length (the value
    continues a string, or the text is not JSON there): nothing of the original kept."""
    candidate = mask_arguments(value)
    if jsontext.dumps(candidate) == masked:
        return candidate
    parsed, problem = parse_json(masked.encode("utf-8", "surrogatepass"))
    if problem is None and jsontext.dumps(parsed) == masked:
        return parsed
    size = len(masked.encode("utf-8", "surrogatepass"))
    return int("1" * size) if size <= _MAX_DIGITS else "x" * max(0, size - 2)


__all__ = ["PlaceMasker", "is_empty", "mask_reason", "mask_text"]
