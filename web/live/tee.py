"""The recording proxy's tee: forwarded chunks assembled into their live sessions off the
forwarding path, in small steps.

:class:`Tee` holds the bytes of one proxied stream that were forwarded to the client and
not yet assembled; the pump appends each chunk after sending it and queues the tee on the
app's one :class:`TeeWorker`. The worker wakes at most every :data:`TEE_INTERVAL`, then
feeds each tee queued until then to its :class:`~toollatch.web.live.session.LiveSession`,
at most :data:`TEE_STEP_BYTES` at a time (a tee with more left is queued again, behind the
others; in a round, a tee assembles the bytes it held when the round began, up to
:data:`ROUND_STEPS` steps, and what its stream forwards meanwhile waits for the next round,
so a busy stream's chunks are assembled a round's worth at a time, not one small feed
each; a stream that begins during a round joins it, and one that fell behind has the next
round begin at once),
yielding to the event loop before a feed would make the bytes assembled since the last
yield more than one step (one stream's step, or the chunks of several streams that
together hold less; a feed that leaves decoded events of its stream to assemble, an event
of many calls, counts as a whole step): a chunk waiting to be forwarded waits behind one
small step at most, never behind a stream's whole backlog (a stream that fell behind, or
an upstream read holding many events at once). What a tee still holds when its stream
ends is fed the same way (:meth:`Tee.drain`) before the end is applied.

The session is fed the body's content: should the upstream have encoded it (a
``Content-Encoding`` though the proxy asked for ``identity``), the tee decodes it
(:mod:`toollatch.web.live.content_coding`); the client is sent the encoded bytes, as the upstream sent them.
A coding that cannot be undone ends the session (ERROR, naming the coding); the forwarding
goes on regardless.
"""

from __future__ import annotations

import asyncio
import contextvars
from time import monotonic
from collections import deque
from collections.abc import Callable

from toollatch.web.live.backlog import OPS_STEP
from toollatch.web.live.content_coding import CodingError, Decoder, decoder
from toollatch.web.live.session import LiveSession
from toollatch.web.live.store import LiveSessionStore

#: Seconds the tee worker gathers forwarded chunks before assembling them: one render's
#: interval at the default 20 renders a second, so each round of assembly feeds at most one
#: render, and its fixed costs (waking, decoding calls, a render request) are paid once per
#: several chunks of a stream instead of once per chunk.
TEE_INTERVAL = 0.05
#: Most bytes the tee worker assembles before it yields to the event loop: a few dozen
#: provider events of a few hundred bytes, well under a millisecond of work.
TEE_STEP_BYTES = 4096
#: Steps of one stream a round assembles at most: the rest of a backlog (a stream that fell
#: behind) waits for the next round, which then begins at once, after the others' chunks.
ROUND_STEPS = 16


class Tee:
    """The forwarded, not yet assembled bytes of one stream, fed to ``session`` in order;
    ``content_encoding``: the upstream's ``Content-Encoding`` header, undone for the session."""

    def __init__(self, session: LiveSession, store: LiveSessionStore, content_encoding: str | None = None) -> None:
        self.session = session
        self.store = store
        self._chunks: deque[bytes | memoryview] = deque()
        self._size = 0  # bytes held
        #: ``(bytes, time.monotonic())`` of each chunk held, recorded on the session's source
        #: when the chunks are fed (:meth:`_timed`): the pump only notes the time.
        self._arrivals: list[tuple[int, float]] = []
        self._decoder: Decoder | None = None
        self.broken = False  # the body's coding could not be undone: nothing more is fed
        session.live_source.timed_elsewhere = True  # arrivals are timed here, as forwarded
        try:
            self._decoder = decoder(content_encoding)
        except CodingError as exc:
            self._fail(exc)

    def _fail(self, exc: CodingError) -> None:
        """End the session: its body cannot be decoded (the client still gets every byte)."""
        self.broken = True
        self._chunks.clear()
        self._size = 0
        self.session.failed(f"The upstream's answer cannot be decoded ({exc}): it reached the client as sent, but is not assembled.")
        self.store.flush(self.session)

    def _content(self, data: bytes) -> bytes:
        """The content of ``data`` (the forwarded bytes themselves unless encoded)."""
        return data if self._decoder is None else self._decoder.decode(data)

    @property
    def size(self) -> int:
        """Bytes forwarded and not yet assembled."""
        return self._size

    def append(self, chunk: bytes) -> None:
        """Hold a chunk the client was sent."""
        if chunk and not self.broken:
            self._chunks.append(chunk)
            self._size += len(chunk)
            if self._decoder is None:  # the bytes the session keeps are these: timed on arrival
                self._arrivals.append((len(chunk), monotonic()))

    def _timed(self) -> None:
        """Record the arrival of each chunk held on the session's source, in order."""
        if self._arrivals:
            self.session.live_source.arrived_all(self._arrivals)
            self._arrivals.clear()

    def feed(self, limit: int | None = None) -> bool:
        """Feed the held bytes to the session, in order: all of them, or the first ``limit``
        bytes (a chunk may be split there: the session decodes any split alike), then ask
        for a render. With a ``limit``, the session assembles about :data:`~toollatch.web.live.backlog.OPS_STEP`
        ops per call, and a call first works off what the session still holds of earlier
        bytes (an event of many calls) before it feeds more. Returns True when bytes, or
        events to assemble, are left for another call."""
        self._timed()
        backlog = self.session.backlog
        if backlog:
            left = backlog.work(self.session, None if limit is None else OPS_STEP)
            self.store.flush(self.session)
            if left or limit is not None:
                return left or bool(self._chunks)
        if not self._chunks:
            return False
        if limit is None or self._size <= limit:
            step = list(self._chunks)
            self._chunks.clear()
        else:
            step, size = [], 0
            while size < limit:
                chunk = self._chunks.popleft()
                room = limit - size
                if len(chunk) > room:  # split without copying the rest
                    view = memoryview(chunk)
                    chunk = view[:room]
                    self._chunks.appendleft(view[room:])
                step.append(chunk)
                size += len(chunk)
        data = step[0] if len(step) == 1 and isinstance(step[0], bytes) else b"".join(step)
        self._size -= len(data)
        fed = self._pass_on(lambda: self._content(data), None if limit is None else OPS_STEP)
        return fed and (bool(self._chunks) or bool(self.session.backlog))

    def close(self, complete: bool) -> None:
        """The body ended (call after the last :meth:`drain`): feed what the decoder still
        holds. ``complete``: the upstream ended it normally, so a body cut short inside its
        coding ends the session (ERROR) instead of a truncated stream."""
        self._timed()
        if self._decoder is not None and not self.broken:
            self._pass_on(lambda: self._decoder.flush(complete))  # type: ignore[union-attr]

    def _pass_on(self, content: Callable[[], bytes], step: int | None = None) -> bool:
        """Feed the session the ``content()`` of forwarded bytes (assembling about ``step``
        ops of it, None: all), then ask for a render. False when the coding could not be
        undone (the session ended: :meth:`_fail`)."""
        try:
            data = content()
        except CodingError as exc:
            self._fail(exc)
            return False
        if data:
            if self._decoder is not None:  # decoded content: timed as it is decoded
                self.session.live_source.arrived(len(data))
            self.session.feed_bytes(data, step)
            self.store.flush(self.session)
        return True

    async def drain(self, step: int = TEE_STEP_BYTES) -> None:
        """Feed everything held, ``step`` bytes at a time, yielding to the event loop after
        each step but the last: what is left when a stream ends (often all of it, for an
        upstream faster than the worker's rounds) never holds the other streams up. Cancelled
        while it yields: the rest is fed at once, then the cancellation goes on, so every byte
        held is assembled whatever happens."""
        try:
            while self.feed(step):
                if self.session.backlog.waiting(self.session):  # a large event: read in a worker thread
                    await self.session.backlog.read_large(self.session)
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            self.feed()
            raise


class TeeWorker:
    """Assembles the tees of every proxied stream (one task for the app), off the forwarding path."""

    def __init__(self, step: int = TEE_STEP_BYTES) -> None:
        self.step = step
        self._queue: dict[Tee, None] = {}  # an ordered set: the tees of the next round
        self._round: dict[Tee, None] = {}  # the tees of the round under way, and their rests
        self._behind = False  # a tee held more than a round's share: the next round begins at once
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def queue(self, tee: Tee) -> None:
        """Assemble ``tee`` in the next round (at most :data:`TEE_INTERVAL` from now), or in
        the round under way if that has not fed it yet (:meth:`_feed_round`): the chunks a
        stream forwards during a round are assembled together in the next, not one small
        feed each."""
        if self._task is None or self._task.done():  # the first, or after aclose(): a worker of its own
            self._wake = asyncio.Event()
            # A context of its own: nothing of the request that happens to start it (its
            # forwarded credentials, toollatch.web.live.credentials.FORWARDED) is carried into the others'.
            self._task = asyncio.get_running_loop().create_task(self._run(), name="proxy-tee", context=contextvars.Context())
        self._queue[tee] = None
        assert self._wake is not None
        self._wake.set()

    def discard(self, tee: Tee) -> None:
        """Forget ``tee`` (its stream ended: the rest is fed by the stream itself)."""
        self._queue.pop(tee, None)
        self._round.pop(tee, None)

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            if not self._behind:
                await asyncio.sleep(TEE_INTERVAL)  # gather a batch
            self._behind = False
            self._wake.clear()
            # this round: the tees queued until now (those queued from here on wait for the next)
            self._round, self._queue = self._queue, {}
            try:
                await self._feed_round(self._round)
            finally:  # a round cut short (the worker cancelled): its tees wait for the next worker
                if self._round:
                    self._queue, self._round = {**self._round, **self._queue}, {}

    async def _feed_round(self, tees: dict[Tee, None]) -> None:
        """Feed each of ``tees`` one step, in order, until each has assembled its share of
        the round: the bytes it held when the round began, up to :data:`ROUND_STEPS` steps
        (a feed may take up to a step more, of bytes come since). What a stream forwards
        during the round waits for the next one; a stream that held more than its share
        has the next round begin at once. A tee queued during the round that it has not
        fed yet (a stream begun meanwhile) joins it at the next yield, its share counted
        then. The worker yields to the event loop before a feed would make the bytes
        assembled since the last yield more than one step. So a round is bounded (a
        share of each stream), and no stream's new chunks wait behind another's backlog
        for more than a round."""
        share = ROUND_STEPS * self.step
        quota = {tee: min(tee.size, share) for tee in tees}
        over = {tee for tee in tees if tee.size > share}  # held more than a share: behind
        fed = 0  # bytes assembled since the last yield
        while tees:
            tee = next(iter(tees))
            if tee.session.backlog.waiting(tee.session):  # a large event: read in a worker thread
                await tee.session.backlog.read_large(tee.session)  # (the tee stays in the round meanwhile)
                fed = 0  # that wait let the event loop run
                if tee not in tees:
                    continue  # its stream ended meanwhile (discard): the stream feeds the rest itself
            del tees[tee]
            before = tee.size
            if tee.feed(self.step):
                quota[tee] -= before - tee.size
                if quota[tee] > 0 or tee.session.backlog:
                    tees[tee] = None  # the rest of its share in a later step, after the others
                else:  # what it holds now came during the round, or is more than its share
                    self._behind = self._behind or tee in over
                    self.queue(tee)
            # A feed that left events to assemble did a whole step of ops (an event of many calls).
            fed += self.step if tee.session.backlog else before - tee.size
            following = next(iter(tees), None)
            if following is not None and fed + min(following.size, self.step) > self.step or fed >= self.step:
                fed = 0  # the next feed would make this turn more than one step
                await asyncio.sleep(0)  # forwarding goes first
                for new in [t for t in self._queue if t not in quota]:  # queued meanwhile, not fed in this round
                    del self._queue[new]
                    tees[new], quota[new] = None, min(new.size, share)
                    if new.size > share:
                        over.add(new)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
