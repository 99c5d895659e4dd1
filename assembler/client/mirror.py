"""Mirroring a latched stream into a running dashboard (``latch(..., dashboard=URL)``).

What crosses is the redacted view only: each :class:`~toollatch.redaction.redact.AssemblyEvent` as
its JSON (tool name, ``tool_call_id``, state, byte and fragment counts, reason codes,
timestamps; the counts withheld until a verdict under ``ui_forward_partial_args: false``),
and a call's parsed arguments once, when it COMMITTED. Never a fragment, never argument
text of a call that did not commit. The dashboard's ``POST /api/mirror`` (``toollatch.web.live.mirror``)
turns them into a live session.

The agent never waits for the dashboard: events go into a bounded queue
(:data:`CAPACITY`) that one background thread sends in batches; when the queue is full,
or the dashboard is down, slow or refuses them, events are dropped and counted
(:attr:`Mirror.dropped`) and one warning is logged (logger ``toollatch.latch``). Only
loopback ``http://`` URLs are accepted, as the dashboard itself answers only loopback
``Host`` names: committed arguments never leave the machine this way.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from typing import Any
from urllib.parse import urlsplit

from toollatch.core.config import AssembleConfig
from toollatch.core.model import CallState
from toollatch.redaction.redact import AssemblyEvent, hide_progress

log = logging.getLogger("toollatch.latch")

#: Events held for the dashboard at most; beyond, they are dropped (and counted).
CAPACITY = 4096
#: Events sent in one request at most.
BATCH = 512
#: Seconds a request to the dashboard may take (connect: a tenth of it).
TIMEOUT = 2.0
#: Seconds the process waits at exit for mirrors still sending their last events.
EXIT_WAIT = 1.0
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})

_live: weakref.WeakSet[Mirror] = weakref.WeakSet()


def check_url(url: str) -> str:
    """``url`` without a trailing slash; ValueError unless it is ``http://`` to a loopback host."""
    parts = urlsplit(url)
    if parts.scheme != "http" or (parts.hostname or "").lower() not in LOOPBACK or parts.username or parts.password:
        raise ValueError(f"dashboard: expected a loopback URL such as http://127.0.0.1:8765, not {parts.scheme}://{parts.hostname or ''}")
    return url.rstrip("/")


class Mirror:
    """Sends one latched stream's redacted events to a dashboard, off the agent's thread."""

    def __init__(self, url: str, *, config: AssembleConfig | None = None, tools: list[str] | None = None, capacity: int = CAPACITY, timeout: float = TIMEOUT) -> None:
        self.url = check_url(url)
        self.forward_progress = (config or AssembleConfig()).ui_forward_partial_args
        self.tools = tools
        self.timeout = timeout
        self.dropped = 0
        self.sent = 0
        self.session: str | None = None  # the dashboard's session id once created
        self.dialect: str | None = None
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(capacity)
        self._end: dict[str, Any] | None = None
        self._ended = threading.Event()
        self._thread: threading.Thread | None = None
        self._down: str | None = None
        self._start_lock = threading.Lock()
        self.done = threading.Event()  # set once the thread finished (sent the end or gave up)

    # ------------------------------------------------------------------ the agent's side

    def events(self, events: list[AssemblyEvent], pipeline: Any) -> None:
        """Queue ``events`` (never blocks); ``pipeline`` gives committed arguments and verdicts."""
        self.dialect = pipeline.dialect
        for event in events:
            doc = self._doc(event, pipeline)
            if doc is None:
                continue
            try:
                self._queue.put_nowait(doc)
            except queue.Full:
                self.dropped += 1
        self._start()

    def end(self, turn: Any) -> None:
        """The turn ended: send what is queued, then the end."""
        self._end = {"kind": turn.end, "error": turn.error}
        self.dialect = turn.dialect or self.dialect
        self._ended.set()
        self._start()

    def _doc(self, event: AssemblyEvent, pipeline: Any) -> dict[str, Any] | None:
        view = event.call
        if view is not None and not self.forward_progress:
            shown = hide_progress(view)
            if event.kind == "fragment" and shown is not view:
                return None  # a fragment while counts are withheld: nothing to show
            event = AssemblyEvent(event.seq, event.t, event.kind, event.stream, shown, event.end, event.detail)
        doc = event.to_json()
        if view is not None and view.state.terminal:
            outcome = pipeline.streams[event.stream].outcome(view.key)
            if outcome is not None:
                doc["repaired"] = outcome.repaired
                doc["diagnosis"] = outcome.diagnosis  # positions and token classes, never text
            if view.state is CallState.COMMITTED:
                committed = pipeline.committed(event.stream, view.key)
                if committed is not None:
                    doc["arguments"] = committed.arguments  # past the latch: what the dashboard shows
        return doc

    def _start(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="toollatch-mirror", daemon=True)
                _live.add(self)
                self._thread.start()

    # ------------------------------------------------------------------ the sending thread

    def _run(self) -> None:
        import httpx

        try:
            with httpx.Client(timeout=httpx.Timeout(self.timeout, connect=self.timeout / 10), trust_env=False) as client:
                self._send_all(client)
        except Exception as exc:  # never let the thread's fault reach the agent
            self._give_up(f"{type(exc).__name__}")
        finally:
            if self.dropped:
                log.warning("dashboard mirror: %d events not sent to %s%s", self.dropped, self.url, f" ({self._down})" if self._down else "")
            self.done.set()

    def _send_all(self, client: Any) -> None:
        while True:
            ended = self._ended.is_set()
            batch = self._take(0.05)
            if batch and not self._post(client, batch, None):
                return
            if ended and self._queue.empty():
                self._post(client, [], self._end)
                return

    def _take(self, wait: float) -> list[dict[str, Any]]:
        batch: list[dict[str, Any]] = []
        try:
            batch.append(self._queue.get(timeout=wait))
            while len(batch) < BATCH:
                batch.append(self._queue.get_nowait())
        except queue.Empty:
            pass
        return batch

    def _post(self, client: Any, batch: list[dict[str, Any]], end: dict[str, Any] | None) -> bool:
        try:
            if self.session is None:
                answer = client.post(f"{self.url}/api/mirror", json={"dialect": self.dialect, "tools": self.tools, "forward_progress": self.forward_progress})
                answer.raise_for_status()
                self.session = str(answer.json()["id"])
            answer = client.post(f"{self.url}/api/mirror/{self.session}/events", json={"dialect": self.dialect, "events": batch, "end": end})
            answer.raise_for_status()
        except Exception as exc:  # down, slow, refused: the agent goes on
            self.dropped += len(batch)
            self._give_up(type(exc).__name__)
            return False
        self.sent += len(batch)
        return True

    def _give_up(self, why: str) -> None:
        """Stop sending: everything still queued, and everything queued later, is dropped."""
        self._down = self._down or why
        while True:
            try:
                self._queue.get_nowait()
                self.dropped += 1
            except queue.Empty:
                break
        while not self._ended.wait(0.05):
            self.dropped += len(self._take(0.0))
        self.dropped += len(self._take(0.0))


@atexit.register
def _flush_at_exit() -> None:
    """Give mirrors still sending up to :data:`EXIT_WAIT` seconds in all, so that a short
    script's last events reach the dashboard."""
    deadline = time.monotonic() + EXIT_WAIT
    for mirror in list(_live):
        mirror.done.wait(max(0.0, deadline - time.monotonic()))
