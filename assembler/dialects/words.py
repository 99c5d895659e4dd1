"""Which words a provider puts in a reason, type or code field may be shown.

Stop reasons (``finish_reason``, ``stop_reason``, ``stopReason``, ``finishReason``), error
types and codes (OpenAI ``error.type``/``code``, Anthropic ``error.type``, Gemini
``error.status``), Bedrock exception names: each is meant to be a word from the provider's
fixed list, but the field is the provider's to fill, and a gateway or a model can put any
text there, even text quoting a call's arguments. The rule, for every dialect:

* a word of a known vocabulary (:func:`known`, case ignored) is shown as it is;
* an unknown value is shown only when it has a conservative identifier shape: lowercase
  ``snake_case`` / dotted / dashed (``^[a-z][a-z0-9_.-]{0,40}$``), capitals and underscores
  only (``MAX_TOKENS``), an exception name (``ThrottlingException``,
  ``modelStreamErrorException``), or an HTTP status (``503``);
* anything else is hidden, named by its length only (:func:`toollatch.core.model.hidden`);
  the value itself is kept for *Reveal* / ``--reveal`` (the op's ``message``).

Where the stream's end is applied (:func:`toollatch.core.stream_end.guard_words`), a
value shown by this rule is still hidden when a call that did not commit holds it in its
buffered argument text, and so is every value outside the known vocabulary (and HTTP
statuses): argument text can reach those fields in ways no buffer shows (text released
when a call failed early, replaced by a final text, left out by a reader, of an earlier
stream). *Reveal* shows them.
"""

from __future__ import annotations

import re
from functools import cache

from toollatch.core.model import hidden

#: Error types, codes and statuses the providers document (lowercase; matched without case).
ERROR_WORDS = frozenset(
    {
        # OpenAI (error.type / error.code)
        "invalid_request_error", "server_error", "rate_limit_exceeded", "insufficient_quota", "invalid_api_key",
        "context_length_exceeded", "model_not_found", "api_error", "authentication_error", "permission_error",
        # Anthropic (error.type)
        "overloaded_error", "rate_limit_error", "not_found_error", "request_too_large", "timeout_error",
        # Gemini (error.status)
        "unavailable", "resource_exhausted", "internal", "invalid_argument", "deadline_exceeded", "permission_denied",
        "unauthenticated", "not_found", "failed_precondition", "aborted", "cancelled",
        # Bedrock (exception event names)
        "throttlingexception", "modelstreamerrorexception", "validationexception", "internalserverexception",
        "serviceunavailableexception", "modeltimeoutexception", "accessdeniedexception", "modelnotreadyexception",
        # AWS common error codes (an event stream's :error-code)
        "internalfailure", "serviceunavailable", "validationerror",
    }
)


@cache
def known() -> frozenset[str]:
    """Every word shown as it is, whatever its shape (lowercase): the stop reasons of
    :mod:`toollatch.dialects.ends` and :data:`ERROR_WORDS`."""
    from toollatch.dialects.ends import COMPLETE, ERROR, TRUNCATED  # ends imports this module

    return COMPLETE | TRUNCATED | ERROR | ERROR_WORDS


_SHAPES = (
    re.compile(r"[a-z][a-z0-9_.\-]{0,40}"),  # stop, tool_calls, server-error, gpt.length
    re.compile(r"[A-Z]{1,41}(?:_[A-Z]{1,40}){0,8}"),  # MAX_TOKENS, UNAVAILABLE (no digits: key-like text is not a word)
    re.compile(r"[A-Za-z][a-z]{1,20}(?:[A-Z][a-z]{1,20}){0,6}(?:Exception|Error|Fault)"),  # ThrottlingException
    re.compile(r"[1-5][0-9]{2}"),  # an HTTP status
)


def is_known(value: str) -> bool:
    """``value`` is a word of a known vocabulary (:func:`known`), case ignored. ASCII only:
    ``str.lower`` folds a few other characters to ASCII letters (the Kelvin sign U+212A
    to ``k``), which would let ``max_to\u212aens`` pass for ``max_tokens``."""
    return value.isascii() and value.lower() in known()


def is_word(value: str) -> bool:
    """``value`` (a reason, type or code) may be shown: a known word or an identifier shape."""
    return is_known(value) or any(p.fullmatch(value) for p in _SHAPES)


def shown_word(value: str, what: str = "value") -> str:
    """``value`` when :func:`is_word`, else :func:`hidden`."""
    return value if is_word(value) else hidden(value, what)


__all__ = ["ERROR_WORDS", "known", "hidden", "is_known", "is_word", "shown_word"]
