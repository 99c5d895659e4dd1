"""*Mask values*: a session that hides committed argument values too.

Until commit no argument text is shown anywhere; after commit a call's arguments are shown
on its card, in the JSON twin and in the naive-client lane. A session with *mask values*
on (the default for built-in demos, which a team often watches on a shared screen) shows
every scalar of those arguments as :data:`HIDDEN` (object keys and the value's shape stay),
until a person turns it off (``POST /sessions/{id}/mask``, ``mask=on|off``).
"""

from __future__ import annotations

from typing import Any

from toollatch.core import jsontext

#: What a hidden value is shown as.
HIDDEN = "•••"


def hide_values(value: Any) -> Any:
    """A copy of a JSON value with every scalar (string, number, ``true``/``false``/``null``)
    replaced by :data:`HIDDEN`; object keys, arrays and objects stay."""
    return jsontext.rebuild(value, lambda v: v if isinstance(v, (dict, list)) else HIDDEN)


def mask_by_default(source_kind: str) -> bool:
    """Whether a session of this source kind starts with *mask values* on: demos."""
    return source_kind == "demo"


def hide_stream_documents(streams: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stream documents (``StreamResult.to_json()``) with each call's ``arguments`` hidden."""
    return [{**s, "calls": [{**c, "arguments": hide_values(c["arguments"]) if c.get("arguments") is not None else c.get("arguments")} for c in s.get("calls", [])]} for s in streams]


__all__ = ["HIDDEN", "hide_stream_documents", "hide_values", "mask_by_default"]
