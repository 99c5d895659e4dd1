"""Work that would hold the GIL for long, done off the event loop: in a child process.

:func:`in_child` runs a function in a child process of its own; reading a non-streaming
response body (:func:`retell_off_loop`) and reading a large recording
(:func:`toollatch.web.live.reading.read_in_steps`) use it.

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
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from toollatch.wire.retell import retell_capped

log = logging.getLogger("toollatch.web")

#: Bytes of body read in a worker thread; larger bodies are read in a child process.
THREAD_BODY_BYTES = 512 * 1024

T = TypeVar("T")


async def in_child(fn: Callable[..., T], *args: Any) -> T | None:
    """``fn(*args)`` run in a child process of its own (``spawn``; one task per child, so
    the memory it took is given back when it exits; ``fn`` and ``args`` are pickled).
    None when the child cannot be started or dies (logged by exception type only: never
    the arguments); what ``fn`` raises is raised here."""
    loop = asyncio.get_running_loop()
    try:
        pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    except (OSError, RuntimeError) as exc:
        log.warning("a child process could not be started (%s)", type(exc).__name__)
        return None
    try:
        return await loop.run_in_executor(pool, fn, *args)
    except (OSError, EOFError, ImportError) as exc:
        log.warning("a child process failed (%s)", type(exc).__name__)
        return None
    except RuntimeError as exc:  # BrokenProcessPool is a RuntimeError
        if type(exc).__module__.startswith("concurrent.futures"):
            log.warning("a child process failed (%s)", type(exc).__name__)
            return None
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # never joins the child on the event loop


async def retell_off_loop(
    dialect: str | None, body: bytes, name: str, max_calls: int | None, *, thread_limit: int = THREAD_BODY_BYTES
) -> tuple[bytes | None, str | None, int]:
    """:func:`~toollatch.wire.retell.retell_capped` of ``body`` (bytes) run off the event
    loop: in a worker thread when ``len(body) <= thread_limit`` (bytes), else in a child
    process (:func:`in_child`). Returns what it returns: ``(stream bytes, None, untold
    calls)`` or ``(None, why, 0)``. A child process that cannot be started or dies is read
    in a thread instead (logged by type only: never the body)."""
    if len(body) <= thread_limit:
        return await asyncio.to_thread(retell_capped, dialect, body, name, max_calls)
    done = await in_child(retell_capped, dialect, body, name, max_calls)
    if done is None:
        return await asyncio.to_thread(retell_capped, dialect, body, name, max_calls)
    return done
