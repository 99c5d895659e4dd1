"""Proxied paths: what of ``/proxy/<name>/<path>`` goes upstream, byte for byte.

The upstream gets ``<path>`` as the client wrote it, percent-escapes and all
(:func:`wire_path`): an encoded ``/`` (``%2F``: an ARN in a Bedrock model id), ``:`` or
``.`` is never decoded on the way, so neither the path's segments nor a signature made
over its bytes (AWS SigV4) change, and an encoded ``..`` (``%2E%2E``) is the upstream's to
read, never resolved by the proxy against the upstream's base URL. A literal ``.`` or
``..`` segment is refused: the proxy's HTTP client would resolve it, and the request could
leave the base URL's path. A query written percent-encoded into the path (``%3F``) is a
query (:func:`split_path`), as it was before.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from starlette.types import Scope

_ENCODED_QUERY = re.compile(r"%3[Ff]")


def split_path(path: str) -> tuple[str, str]:
    """The decoded ``<path>`` of ``/proxy/<name>/<path>`` as ``(path, query)``: a ``?`` that
    arrived percent-encoded (``%3F``) starts a query there, which is what an upstream makes
    of such a path (and what it got before), so its values are credentials like any query's
    (:func:`~toollatch.web.live.credentials.secret_values`) and the path shown, logged and recorded never
    holds them. Raises ``ValueError`` (naming no part of the path) for an encoded ``#``: a
    fragment is never sent upstream, so the request cannot be forwarded as the client wrote it."""
    path, _, query = path.partition("?")
    if "#" in path or "#" in query:
        raise ValueError("the path holds an encoded '#' (%23): a URL fragment is never sent upstream; remove it")
    return path, query


def encode_path(path: str) -> str:
    """A decoded path made a path again: ``%``, ``?`` and ``#`` percent-encoded (httpx
    encodes the rest), so none of them changes meaning on the way."""
    return path.replace("%", "%25").replace("?", "%3F").replace("#", "%23")


def client_bytes(scope: Scope, path: str) -> str | None:
    """The client's own text of ``path`` (the decoded ``<path>`` of the request in ``scope``,
    up to the query :func:`split_path` found in it): the request target's bytes after
    ``/proxy/<name>/`` up to an encoded ``?``. None when they are not to be had (no
    ``raw_path``, not ASCII) or do not decode to ``path`` (an encoded ``/`` in ``<name>``)."""
    raw = scope.get("raw_path")
    root = str(scope.get("root_path") or "").encode("latin-1", "replace")
    if not isinstance(raw, bytes):
        return None
    if root and raw.startswith(root):
        raw = raw[len(root) :]
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    parts = text.split("/", 3)  # "", "proxy", <name>, <path>
    if len(parts) < 4 or parts[1] != "proxy":
        return None
    rest = _ENCODED_QUERY.split(parts[3], maxsplit=1)[0]
    return rest if unquote(rest) == path else None


def wire_path(scope: Scope, path: str) -> str:
    """The path to send upstream for the decoded ``path``: the client's own bytes
    (:func:`client_bytes`), else ``path`` encoded again (:func:`encode_path`). Raises
    ``ValueError`` (naming no part of the path) when it holds a ``.`` or ``..`` segment."""
    wire = client_bytes(scope, path)
    wire = encode_path(path) if wire is None else wire
    if any(segment in (".", "..") for segment in wire.split("/")):
        raise ValueError("the path holds a dot segment ('.' or '..'), which would be resolved against the upstream's base URL; remove it")
    return wire
