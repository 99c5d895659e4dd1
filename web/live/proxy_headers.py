"""Which headers the recording proxy forwards, each way, and as which bytes.

Every header goes on as the client (or the upstream) sent it, repeated ones repeated and in
order, but those that belong to one hop: the hop-by-hop ones of RFC 9110 (``Connection``,
``Keep-Alive``, ``Transfer-Encoding``…), every header a ``Connection`` header names
(RFC 9110 7.6.1), and those httpx or the server recompute (``Host``, ``Content-Length``).
Upstream, ``Accept-Encoding`` is always ``identity``, so the bytes teed are the bytes the
client gets.
"""

from __future__ import annotations

#: Never forwarded as is: hop-by-hop, or recomputed by httpx / the server.
_HOP = frozenset(
    {"host", "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "content-length", "accept-encoding"}
)
_HOP_RESPONSE = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "trailer", "te"})


def hop_by_hop(headers: list[tuple[str, str]], fixed: frozenset[str]) -> frozenset[str]:
    """Lower-case names of the headers that stay on their hop: ``fixed``, and every header
    named in a ``Connection`` header (RFC 9110 7.6.1)."""
    named = {part.strip().lower() for k, v in headers if k.lower() == "connection" for part in v.split(",")}
    return fixed | {name for name in named if name}


def forward_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Request headers for the upstream: all but hop-by-hop ones (:func:`hop_by_hop`), in
    order, and ``Accept-Encoding: identity``."""
    hop = hop_by_hop(headers, _HOP)
    out = [(k, v) for k, v in headers if k.lower() not in hop]
    out.append(("accept-encoding", "identity"))
    return out


def header_bytes(headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """Headers as bytes for httpx: latin-1, i.e. the very bytes an ASGI server decoded them
    from, so a value that is not ASCII is forwarded unchanged instead of failing to encode;
    UTF-8 for text beyond latin-1 (a header the dashboard itself set)."""

    def encode(text: str) -> bytes:
        try:
            return text.encode("latin-1")
        except UnicodeEncodeError:
            return text.encode("utf-8", "surrogatepass")

    return [(encode(k), encode(v)) for k, v in headers]


def response_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The upstream's response headers for the client, as the very bytes received (decoding
    and encoding them again could fail, or change them, for a value that is not ASCII):
    all but hop-by-hop ones (:func:`hop_by_hop`), in order."""
    hop = hop_by_hop([(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw], _HOP_RESPONSE)
    return [(k, v) for k, v in raw if k.decode("latin-1").lower() not in hop]
