"""How a reproducer writes each masked provider event back: as SSE (keeping the framing
deviations the original had) or as one JSON Lines line; an unreadable event as
:data:`UNREADABLE`."""

from __future__ import annotations

from toollatch.core import jsontext
from toollatch.wire.capture import DONE, ProviderEvent

#: What an event that cannot be read (a ``data:`` value that is not JSON) is written as in a
#: reproducer: text that is not JSON either, so the re-import fails the stream at the same
#: event, and nothing of the original text.
UNREADABLE = ": unreadable event (masked)"


def written(event: ProviderEvent, as_sse: bool) -> str:
    """``event`` (masked) as reproducer text: an SSE event when ``as_sse``, else one JSON Lines line."""
    if event.error is not None:
        payload = UNREADABLE
    else:
        payload = DONE if event.data == DONE else jsontext.dumps(event.data, separators=(",", ":"))
    return sse_event(event, payload) if as_sse else payload + "\n"


def sse_event(event: ProviderEvent, payload: str) -> str:
    """One SSE event, keeping the framing deviations the original had (so a reproducer of a
    framing bug still reproduces it): CRLF line ends, comment lines (as many), ``data`` before
    ``event``, and ``[DONE]`` with extra whitespace."""
    eol = "\r\n" if "crlf_line_ends" in event.framing else "\n"
    if payload == DONE and "done_variant" in event.framing:
        payload = DONE + " "
    data = f"data: {payload}{eol}"
    kind = f"event: {event.event}{eol}" if event.event else ""
    fields = data + kind if "data_before_event" in event.framing else kind + data
    comment = f": comment{eol}" * event.framing.count("comment_line")
    return comment + fields + eol


def is_binary(head: bytes) -> bool:
    """An AWS event stream starts with a 4-byte big-endian length: a NUL byte first."""
    return head[:1] == b"\x00"


__all__ = ["UNREADABLE", "is_binary", "sse_event", "written"]
