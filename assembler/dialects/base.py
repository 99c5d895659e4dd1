"""What every dialect adapter is: provider events in, provider-independent ops out.

An adapter is a thin translation. It knows the provider's wire format and nothing of
states, latches or limits; it never parses argument text. The one exception is
:func:`strictness_fault`, for argument text that arrived as a JSON value.
"""

from __future__ import annotations

import functools

from typing import Any, Protocol

from toollatch.wire.capture import ProviderEvent
from toollatch.core.finalize import StrictJSONError, strict_loads
from toollatch.core.model import ArgsNotStrict, CallKey, Op, StreamError
from toollatch.dialects.words import is_word, shown_word

#: A provider error's free text kept for *Reveal*, at most this many characters.
MESSAGE_LIMIT = 2000
def event_type(data: dict[str, Any], event: ProviderEvent) -> str:
    """The type of an event whose payload ``data`` names it in a ``type`` string (OpenAI
    Responses, Cohere), or else its SSE event name (``""``: neither)."""
    kind = data.get("type")
    return kind if isinstance(kind, str) else event.event or ""


def provider_error(error: Any, fields: tuple[str, ...] = ("type", "code"), prefix: str = "", words: tuple[str, ...] = ()) -> StreamError:
    """A provider's error object (or text) as a :class:`StreamError`: the detail names
    only its ``fields`` (type, code, status: words the provider picks from a fixed list),
    after ``prefix``; the ``message`` is the provider's free text, untrusted (it can quote
    the arguments), kept apart for *Reveal* and ``--reveal`` only. A field that is no word
    (:func:`toollatch.dialects.words.is_word`) is shown by its length only and joins the
    message. An error that is a bare string is all free text. ``words``: the provider words
    ``prefix`` holds (a Bedrock exception name, shown by :func:`~toollatch.dialects.words.shown_word`):
    those it hides join the message; those it shows are checked like the fields against the
    calls' buffered text where the stream ends."""
    message: Any = None
    pairs: list[tuple[str, str]] = []
    if isinstance(error, dict):
        pairs = [(k, str(error.get(k))) for k in fields if error.get(k) not in (None, "") and not isinstance(error.get(k), (dict, list))]
        message = error.get("message")
    elif error not in (None, ""):
        message = error
    if message not in (None, "") and not isinstance(message, str):
        message = str(message)
    raw = [v for _, v in pairs]
    named = [shown_word(v, "code") for v in raw]  # a field holding free text is not shown
    unshown = [*(w for w in words if not is_word(w)), *(f"{k}: {v}" for k, v in pairs if not is_word(v))]
    detail = prefix + ": ".join(named) if named else (prefix.rstrip(": ") or "provider error")
    text = "; ".join([*unshown, *([message] if isinstance(message, str) and message else [])])
    return StreamError(detail, text[:MESSAGE_LIMIT] or None, tuple(w for w in (*words, *raw) if is_word(w)))


class DialectAdapter(Protocol):
    """``feed`` one provider event, get the ops it means; ``close`` at end of input."""

    name: str

    def feed(self, event: ProviderEvent) -> list[Op]: ...

    def close(self) -> list[Op]: ...


def strictness_fault(event: ProviderEvent, *, string_pieces: bool = False) -> str | None:
    """Why ``event``'s payload text is not strict JSON, or None when it is.

    Call it only for an event that carries argument text as a JSON *value*: the event was
    parsed leniently (the last of duplicate keys kept, ``NaN``/``Infinity`` accepted), so
    the text re-made from that value cannot show such a fault; this re-reads the event's
    own text with :func:`~toollatch.core.finalize.strict_loads`. The answer names the fault
    (``duplicate object key``, ``non-standard constant NaN``, ``number out of range``,
    ``string holds a lone surrogate``) and never quotes the text. An event without raw
    text (built in memory, where a dict cannot hold a duplicate key) is taken as it is.
    ``string_pieces``: the event's strings may be pieces of longer strings (Gemini
    ``partialArgs`` ``stringValue``), so a lone surrogate is left to the latch, which
    judges the joined text (:func:`~toollatch.core.finalize.join_surrogate_pairs`).
    """
    if event.raw is None:
        return None
    return _fault_of(event.raw, string_pieces)


@functools.lru_cache(maxsize=1)
def _fault_of(raw: str, string_pieces: bool) -> str | None:
    """:func:`strictness_fault` of one payload text, remembered for the next call: every
    call an event carries asks about the same text (an event of 1,500 content blocks was
    read strictly 1,500 times)."""
    try:
        strict_loads(raw, string_pieces=string_pieces)
    except StrictJSONError as exc:
        return f"{exc.problem} in the event that carried the arguments"
    return None


def check_strict(key: CallKey, event: ProviderEvent, ops: list[Op]) -> None:
    """Append :class:`~toollatch.core.model.ArgsNotStrict` for ``key`` when ``event`` is not strict.

    For an event whose argument text for ``key`` was made from a JSON value.
    """
    fault = strictness_fault(event)
    if fault is not None:
        ops.append(ArgsNotStrict(key, fault))
