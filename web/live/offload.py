"""Reading a non-streaming response body off the event loop.

A ``chat.completion`` (or Anthropic ``message``, Responses ``response``) body is parsed with
``json.loads`` and re-told as the stream that would have carried it
(:func:`toollatch.wire.retell.retell_capped`). The parse is one C call that never releases
the GIL: in a worker *thread* a body of a few MiB holding many small objects (100,000 tool
calls: ~9 MB, ~0.5 s) would still hold the event loop for the whole parse. So a body of up
to :data:`THREAD_BODY_BYTES` is read in a thread (a few tens of milliseconds of GIL at most),
and a larger one in a child process of its own (``spawn``; one task per child, so the memory
the parse took is given back when it exits). Either way the answer is bounded by
``max_calls``: the re-told stream of at most that many calls, the count of the others.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from toollatch.wire.retell import retell_capped

log = logging.getLogger("toollatch.web")

#: Bytes of body read in a worker thread; larger bodies are read in a child process.
THREAD_BODY_BYTES = 512 * 1024


async def retell_off_loop(
    dialect: str | None, body: bytes, name: str, max_calls: int | None, *, thread_limit: int = THREAD_BODY_BYTES
) -> tuple[bytes | None, str | None, int]:
    """:func:`~toollatch.wire.retell.retell_capped` of ``body`` (bytes) run off the event
    loop: in a worker thread when ``len(body) <= thread_limit`` (bytes), else in a child
    process. Returns what it returns: ``(stream bytes, None, untold calls)`` or ``(None,
    why, 0)``. A child process that cannot be started or dies is read in a thread instead
    (logged by type only: never the body)."""
    if len(body) <= thread_limit:
        return await asyncio.to_thread(retell_capped, dialect, body, name, max_calls)
    loop = asyncio.get_running_loop()
    try:
        pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    except (OSError, RuntimeError) as exc:
        return await _in_thread_instead(exc, dialect, body, name, max_calls)
    try:
        return await loop.run_in_executor(pool, retell_capped, dialect, body, name, max_calls)
    except (OSError, RuntimeError, EOFError, ImportError) as exc:  # BrokenProcessPool is a RuntimeError
        return await _in_thread_instead(exc, dialect, body, name, max_calls)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # never joins the child on the event loop


async def _in_thread_instead(exc: BaseException, dialect: str | None, body: bytes, name: str, max_calls: int | None) -> tuple[bytes | None, str | None, int]:
    log.warning("reading a response body in a child process failed (%s); reading it in a thread", type(exc).__name__)
    return await asyncio.to_thread(retell_capped, dialect, body, name, max_calls)
