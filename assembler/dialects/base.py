"""What every dialect adapter is: provider events in, provider-independent ops out.

An adapter is a thin translation. It knows the provider's wire format and nothing of
states, latches or limits; it never parses argument text. The one exception is
:func:`strictness_fault`, for argument text that arrived as a JSON value.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from toollatch.wire.capture import ProviderEvent
from toollatch.core.finalize import StrictJSONError, strict_loads
from toollatch.core.model import ArgsNotStrict, CallKey, Op, StreamError

#: A provider error's free text kept for *Reveal*, at most this many characters.
MESSAGE_LIMIT = 2000
#: What an error's type, code or status looks like (``server_error``, ``503``,
#: ``UNAVAILABLE``); anything else in those fields is free text and is not shown.
_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def provider_error(error: Any, fields: tuple[str, ...] = ("type", "code"), prefix: str = "") -> StreamError:
    """A provider's error object (or text) as a :class:`StreamError`: the detail names
    only its ``fields`` (type, code, status: words the provider picks from a fixed list),
    after ``prefix``; the ``message`` is the provider's free text, untrusted (it can quote
    the arguments), kept apart for *Reveal* and ``--reveal`` only. An error that is a bare
    string is all free text."""
    message: Any = None
    named: list[str] = []
    if isinstance(error, dict):
        named = [str(error.get(k)) for k in fields if error.get(k) not in (None, "") and not isinstance(error.get(k), (dict, list))]
        named = [n if _CODE.fullmatch(n) else "(not a code)" for n in named]  # a field holding free text is not shown
        message = error.get("message")
    elif error not in (None, ""):
        message = error
    if message not in (None, "") and not isinstance(message, str):
        message = str(message)
    detail = prefix + ": ".join(named) if named else (prefix.rstrip(": ") or "provider error")
    return StreamError(detail, (message[:MESSAGE_LIMIT] or None) if isinstance(message, str) else None)


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
    try:
        strict_loads(event.raw, string_pieces=string_pieces)
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
