"""URLs fit to store, show or quote in an error: scheme, host, port and path only.

A request URL can carry credentials in three places: the userinfo
(``https://user:password@host``), the query (``?key=AIza…`` for Gemini, ``?sig=…`` for
signed URLs) and, less often, the fragment. :func:`scrub_url` drops all three, so every URL
that comes from an uploaded file (a HAR entry) or from configuration (an upstream's base
URL) is passed through it before it is kept, listed, logged or put in a message.

The parsing is deliberately simple and never raises: it does not validate the URL, it only
cuts. Userinfo is recognised the way browsers do (WHATWG URL): everything up to the *last*
``@`` of the authority, which ends at the first ``/``, ``\\``, ``?`` or ``#``; an ``@``
later in the path is part of the path. A URL embedded in the path
(``https://gw/https://user:pw@api/v1``) loses its userinfo too.
"""

from __future__ import annotations

import re
from typing import Any

#: ``scheme://`` at the start of a URL (RFC 3986 scheme syntax); browsers also take one
#: slash or backslashes (``https:/host``, ``https:\\host``) as the authority's start.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[/\\]+")
#: Userinfo of a URL embedded in a path: ``scheme://``, then up to an ``@`` before any ``/``.
_EMBEDDED_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*:[/\\]+)[^/\\]*@")
#: Characters WHATWG removes from anywhere in a URL (tab, LF, CR), and the other C0 controls.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: What :func:`scrub_url` returns for a value that is not a string.
UNKNOWN = "?"


def scrub_url(url: Any, *, limit: int | None = None) -> str:
    """``url`` without userinfo, query and fragment: ``scheme://host[:port]/path``.

    Works on any string: absolute (``https://u:p@[::1]:8443/v1?key=k#f`` →
    ``https://[::1]:8443/v1``), scheme-relative (``//u:p@host/x`` → ``//host/x``), without a
    scheme (``u:p@host:80/x?k`` → ``host:80/x``) or a bare path (``/v1/chat?key=k`` →
    ``/v1/chat``). Control characters are removed. A value that is not a string gives
    :data:`UNKNOWN`. ``limit``, if given, caps the result at that many characters (an
    ellipsis ends a cut result), for messages.
    """
    if not isinstance(url, str):
        return UNKNOWN
    text = _CONTROL.sub("", url).strip()
    scheme = _SCHEME.match(text)
    if scheme:
        prefix, rest = text[: scheme.end()], text[scheme.end() :]
    elif text.startswith("//"):
        prefix, rest = "//", text[2:]
    elif text.startswith(("/", "\\")):
        prefix, rest = "", None  # a path only: no authority
    else:
        prefix, rest = "", text  # no scheme: the text up to the first separator is the authority
    if rest is None:
        path = text
    else:
        # The userinfo goes first: a password may hold "?" or "#" (unencoded), which must not
        # end the authority early and leave part of the credential in front of the host.
        cut = re.search(r"[/\\]", rest)
        authority, tail = (rest[: cut.start()], rest[cut.start() :]) if cut else (rest, "")
        path = prefix + authority.rpartition("@")[2] + tail
    path = _EMBEDDED_USERINFO.sub(r"\1", path)
    path = re.split(r"[?#]", path, maxsplit=1)[0]
    if limit is not None and len(path) > limit:
        path = path[: max(0, limit - 1)] + "…"
    return path


__all__ = ["UNKNOWN", "scrub_url"]
