"""The proxy's own errors, in the shape each provider's SDK parses.

A request the proxy cannot forward (its path is not a URL, its headers are not HTTP) or
whose upstream cannot be reached is answered by the proxy itself: a JSON error body as the
provider of the endpoint would send it (:func:`error_json`), so the agent's SDK raises its
usual API error with the proxy's message instead of failing to parse the body.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse

from toollatch.web.live.source import endpoint_dialect

#: gRPC-style status names of Gemini's error shape, by HTTP status.
_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 413: "INVALID_ARGUMENT", 499: "CANCELLED", 502: "UNAVAILABLE"}


def error_shape(path: str) -> str:
    """Whose error body a client calling ``path`` parses: ``anthropic`` (Messages),
    ``gemini`` (``…:generateContent``, ``…:streamGenerateContent``) or ``openai`` (the rest)."""
    if endpoint_dialect(path) == "anthropic":
        return "anthropic"
    return "gemini" if "generatecontent" in path.lower() else "openai"


def error_json(status: int, kind: str, message: str, path: str = "") -> JSONResponse:
    """A proxy error as JSON in the shape the provider of ``path`` uses (:func:`error_shape`):
    ``{"error": {"type", "message", "code"}}`` (OpenAI), ``{"type": "error", "error":
    {"type", "message"}}`` (Anthropic), ``{"error": {"code", "message", "status"}}`` (Gemini)."""
    shape = error_shape(path)
    if shape == "anthropic":
        doc: dict[str, object] = {"type": "error", "error": {"type": kind, "message": message}}
    elif shape == "gemini":
        doc = {"error": {"code": status, "message": message, "status": _GEMINI_STATUS.get(status, "UNKNOWN")}}
    else:
        doc = {"error": {"type": kind, "message": message, "code": kind}}
    return JSONResponse(doc, status_code=status)


def control_character(path: str, query: str) -> str | None:
    """``its path holds the control character U+0000`` (or its query) when the decoded
    ``path`` or ``query`` holds one (C0 or DEL), else None. No URL parser is trusted with
    them: some refuse them, others drop them and would forward a different path."""
    for where, text in (("path", path), ("query", query)):
        bad = next((c for c in text if ord(c) < 0x20 or ord(c) == 0x7F), None)
        if bad is not None:
            return f"its {where} holds the control character U+{ord(bad):04X}"
    return None
