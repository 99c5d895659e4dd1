"""Request bodies read with a size cap enforced while they stream in.

Starlette's ``await request.body()`` reads a body whole before anyone can look at its size:
a chunked POST of 500 MiB is 500 MiB of memory before a 413. :func:`read_capped` stops at the
cap instead, so memory holds at most ``limit`` bytes of any body.
"""

from __future__ import annotations

from starlette.requests import Request


async def read_capped(request: Request, limit: int) -> bytes | None:
    """The request's body (bytes), or None once it is known to be over ``limit`` bytes: at
    once for a ``Content-Length`` over it, else as soon as the chunks read add up to more
    (the rest is never read). Raises :class:`starlette.requests.ClientDisconnect` if the
    client goes away meanwhile, as ``request.body()`` does."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)
