"""The proxy's tee: forwarded bytes assembled in bounded steps, in order, whatever the backlog."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import httpx

from toollatch.core.config import AssembleConfig
from toollatch.demo.stress import stress_demo
from toollatch.web.live.session import LiveSession, LiveSource
from toollatch.web.live.tee import ROUND_STEPS, TEE_STEP_BYTES, Tee, TeeWorker

from .test_web_replay import record_folds

WIRE = stress_demo(events=300, calls=3).wire


class Flushes:
    """The store's ``flush``, counted."""

    def __init__(self) -> None:
        self.count = 0

    def flush(self, session: LiveSession) -> None:
        self.count += 1


def live(name: str = "s") -> LiveSession:
    source = LiveSource(f"up/{name}", upstream="up", endpoint="/v1/chat/completions", dialect="openai-chat", request={"model": "m", "stream": True})
    session = LiveSession(name, source, AssembleConfig())
    source.http_status, source.content_type = 200, "text/event-stream"
    return session


def outcome(session: LiveSession) -> tuple[Any, ...]:
    calls = [(c.call_id, c.state, c.reason) for r in session.pipeline.results() for c in r.calls]
    return calls, [v.text for v in session.verdicts], session.end_kind, session.live_source.count, b"".join(session.live_source.chunks)


def test_a_tee_fed_in_steps_assembles_exactly_what_was_forwarded() -> None:
    whole = live()
    whole.feed_bytes(WIRE)
    whole.finish()
    stepped, flushes = live(), Flushes()
    tee = Tee(stepped, flushes)  # type: ignore[arg-type]
    for i in range(0, len(WIRE), 3000):  # upstream reads larger than a step: split inside a chunk
        tee.append(WIRE[i : i + 3000])
    assert tee.size == len(WIRE)
    fed = [0]
    while tee.feed(1000):
        fed.append(stepped.live_source.size)
        assert tee.size == len(WIRE) - stepped.live_source.size
    fed.append(stepped.live_source.size)
    assert [b - a for a, b in zip(fed, fed[1:])] == [1000] * (len(WIRE) // 1000) + [len(WIRE) % 1000]
    assert flushes.count == math.ceil(len(WIRE) / 1000) and tee.size == 0 and not tee.feed(1000)
    stepped.finish()
    assert outcome(stepped) == outcome(whole)
    assert outcome(whole)[2] == "complete" and {c[1].value for c in outcome(whole)[0]} == {"committed"}


def test_feeding_without_a_limit_takes_everything_held() -> None:
    session = live()
    tee = Tee(session, Flushes())  # type: ignore[arg-type]
    tee.append(WIRE[:700])
    tee.append(b"")
    tee.append(WIRE[700:900])
    assert tee.size == 900 and not tee.feed() and tee.size == 0
    assert session.live_source.size == 900 and b"".join(session.live_source.chunks) == WIRE[:900]


def test_the_worker_assembles_a_backlog_in_steps_and_other_streams_in_between() -> None:
    big, small, flushes = live("big"), live("small"), Flushes()

    async def main() -> list[tuple[int, int]]:
        worker = TeeWorker()
        backlog, latest = Tee(big, flushes), Tee(small, flushes)  # type: ignore[arg-type]
        backlog.append(WIRE)  # e.g. one upstream read after a stall: many events at once
        worker.queue(backlog)
        latest.append(WIRE[:300])
        worker.queue(latest)
        seen = [(0, 0)]
        async with asyncio.timeout(10):
            while backlog.size or latest.size:
                await asyncio.sleep(0)  # one turn of the event loop
                if (now := (big.live_source.size, small.live_source.size)) != seen[-1]:
                    seen.append(now)
        await worker.aclose()
        return seen

    seen = asyncio.run(main())
    steps = [b[0] - a[0] for a, b in zip(seen, seen[1:])]
    assert max(steps) <= TEE_STEP_BYTES and sum(steps) == len(WIRE)  # never more than one step per turn
    assert len([s for s in steps if s]) == math.ceil(len(WIRE) / TEE_STEP_BYTES)
    first_small = next(i for i, (_, s) in enumerate(seen) if s)
    assert seen[first_small] == (TEE_STEP_BYTES, 300)  # the other stream right after the backlog's first step
    assert b"".join(big.live_source.chunks) == WIRE and big.live_source.count == 300


def test_a_tee_queued_during_a_round_waits_for_the_next_round() -> None:
    """Chunks forwarded while a round is under way (here: between the steps of another
    stream's backlog) are assembled together in the next round, not one feed each."""
    big, busy, flushes = live("big"), live("busy"), Flushes()
    pieces = [WIRE[i : i + 50] for i in range(0, len(WIRE), 50)]

    async def main() -> tuple[list[int], list[int]]:
        worker = TeeWorker()
        backlog, streaming = Tee(big, flushes), Tee(busy, flushes)  # type: ignore[arg-type]
        backlog.append(WIRE[: ROUND_STEPS * TEE_STEP_BYTES])  # a round's share: many steps, a yield between two
        worker.queue(backlog)
        streaming.append(pieces.pop(0))
        worker.queue(streaming)
        during: list[int] = []  # the busy stream's bytes assembled, at each turn of the round
        async with asyncio.timeout(10):
            while big.live_source.size == 0:  # the round has not begun
                await asyncio.sleep(0)
            while backlog.size:
                streaming.append(pieces.pop(0))  # one more chunk forwarded at each turn
                worker.queue(streaming)
                during.append(busy.live_source.size)
                await asyncio.sleep(0)
            while streaming.size:  # the next round
                await asyncio.sleep(0.01)
        await worker.aclose()
        return during, [busy.live_source.size]

    during, after = asyncio.run(main())
    sent = WIRE[: len(WIRE) - sum(map(len, pieces))]  # the pieces left were never forwarded
    assert len(during) > 5  # the backlog took several steps, one turn each
    assert len(set(during)) <= 2  # fed once in that round at most (its first chunks), however many came
    assert after == [len(sent)] and b"".join(busy.live_source.chunks) == sent  # the rest in the next round, in order


def test_a_stream_forwarding_fast_does_not_hold_a_round_up_for_the_others() -> None:
    """A round feeds each tee the bytes it held when the round began: a stream forwarding
    more than a step per turn cannot keep it going, nor keep a stream begun meanwhile waiting."""
    fast, other, flushes = live("fast"), live("other"), Flushes()
    source = WIRE * 40  # more bytes than the fast stream's first round could assemble

    async def main() -> int:
        worker = TeeWorker()
        streaming, newcomer = Tee(fast, flushes), Tee(other, flushes)  # type: ignore[arg-type]
        sent = 2 * TEE_STEP_BYTES
        streaming.append(source[:sent])
        worker.queue(streaming)
        async with asyncio.timeout(10):
            while fast.live_source.size == 0:  # the round has begun
                await asyncio.sleep(0)
            newcomer.append(WIRE[:300])
            worker.queue(newcomer)
            turns = 0
            while other.live_source.size == 0:
                streaming.append(source[sent : sent + 5000])  # more than a step at each turn
                sent += 5000
                worker.queue(streaming)
                turns += 1
                await asyncio.sleep(0)
            while streaming.size:  # the next rounds take the rest
                await asyncio.sleep(0.01)
        await worker.aclose()
        assert b"".join(fast.live_source.chunks) == source[:sent]
        return turns

    assert asyncio.run(main()) <= 4  # the newcomer joined the round at its next yield


def test_a_round_assembles_what_each_tee_held_when_it_began() -> None:
    """Two streams forwarding more than a step at each turn: the round feeds each the bytes
    it held when the round began (a feed may take up to a step more), then ends."""
    sessions, flushes = [live("a"), live("b")], Flushes()
    source = WIRE * 4

    async def main() -> tuple[list[int], list[int]]:
        worker = TeeWorker()
        tees = [Tee(session, flushes) for session in sessions]  # type: ignore[arg-type]
        sent = 3 * TEE_STEP_BYTES
        for tee in tees:
            tee.append(source[:sent])
            worker.queue(tee)
        most = [0, 0]
        async with asyncio.timeout(10):
            while sessions[0].live_source.size == 0:  # the round has begun
                await asyncio.sleep(0)
            for _ in range(40):  # 40 turns: much less than the pause before the next round
                for i, tee in enumerate(tees):
                    tee.append(source[sent : sent + 5000])
                    worker.queue(tee)
                    most[i] = max(most[i], sessions[i].live_source.size)
                sent += 5000
                await asyncio.sleep(0)
            while any(tee.size for tee in tees):  # the next rounds take the rest
                await asyncio.sleep(0.01)
        await worker.aclose()
        return most, [b"".join(s.live_source.chunks) == source[:sent] for s in sessions]

    most, whole = asyncio.run(main())
    assert all(3 * TEE_STEP_BYTES <= m <= 4 * TEE_STEP_BYTES for m in most), most
    assert whole == [True, True]


def test_a_stream_behind_does_not_keep_the_others_waiting() -> None:
    """A backlog of more than a round's share is assembled over several rounds, one after the
    other at once; the chunks another stream forwards meanwhile go in between."""
    behind, other, flushes = live("behind"), live("other"), Flushes()
    pieces = [WIRE[i : i + 100] for i in range(0, len(WIRE), 100)]

    async def main() -> bool:
        worker = TeeWorker()
        backlog, streaming = Tee(behind, flushes), Tee(other, flushes)  # type: ignore[arg-type]
        backlog.append(WIRE * 3)  # about three shares
        worker.queue(backlog)
        streaming.append(pieces.pop(0))
        worker.queue(streaming)
        caught_up_before_the_backlog = False
        async with asyncio.timeout(10):
            while other.live_source.size == 0:  # the first round has fed both
                await asyncio.sleep(0)
            first = other.live_source.size
            while backlog.size and pieces:
                streaming.append(pieces.pop(0))
                worker.queue(streaming)
                await asyncio.sleep(0)
                caught_up_before_the_backlog |= other.live_source.size > first and backlog.size > 0
            while backlog.size or streaming.size:
                await asyncio.sleep(0.01)
        await worker.aclose()
        return caught_up_before_the_backlog

    assert asyncio.run(main())
    assert b"".join(behind.live_source.chunks) == WIRE * 3


def test_a_tee_left_by_a_stopped_worker_restarts_one() -> None:
    held, flushes = live("held"), Flushes()

    async def main() -> None:
        worker = TeeWorker()
        tee = Tee(held, flushes)  # type: ignore[arg-type]
        tee.append(WIRE[:-300])
        worker.queue(tee)
        async with asyncio.timeout(10):
            while held.live_source.size == 0:
                await asyncio.sleep(0)
            await worker.aclose()  # stopped mid-round: the tee waits in the queue
            tee.append(WIRE[-300:])
            worker.queue(tee)  # the same tee again: a new worker takes it
            while tee.size:
                await asyncio.sleep(0.01)
        await worker.aclose()

    asyncio.run(main())
    assert b"".join(held.live_source.chunks) == WIRE


def test_a_round_cut_short_leaves_its_tees_to_the_next_worker() -> None:
    held, other, flushes = live("held"), live("other"), Flushes()

    async def main() -> None:
        worker = TeeWorker()
        backlog = Tee(held, flushes)  # type: ignore[arg-type]
        backlog.append(WIRE)
        worker.queue(backlog)
        async with asyncio.timeout(10):
            while held.live_source.size == 0:
                await asyncio.sleep(0)
            await worker.aclose()  # the worker stops after the round's first step
            assert 0 < held.live_source.size < len(WIRE)
            later = Tee(other, flushes)  # type: ignore[arg-type]
            later.append(WIRE[:300])
            worker.queue(later)  # a new worker task: the cut round's tees come first
            while backlog.size or later.size:
                await asyncio.sleep(0.01)
        await worker.aclose()

    asyncio.run(main())
    assert b"".join(held.live_source.chunks) == WIRE and other.live_source.size == 300


class Upstream:
    """An upstream response of ``reads`` (what ``aiter_raw`` yields), for direct connect."""

    headers = httpx.Headers([(b"content-type", b"text/event-stream")])

    def __init__(self, *reads: bytes) -> None:
        self.reads = reads
        self.closed = False

    async def aiter_raw(self) -> Any:
        for data in self.reads:
            yield data

    async def aclose(self) -> None:
        self.closed = True


class Store(Flushes):
    async def finished(self, session: LiveSession, secrets: list[str]) -> None:
        self.ended = session.end_kind


def test_direct_connect_assembles_a_large_read_in_steps() -> None:
    from toollatch.web.live.proxy import consume

    session, store, upstream = live(), Store(), Upstream(WIRE[:100], WIRE[100:])

    async def main() -> int:
        turns, done = 0, False

        async def other() -> None:
            nonlocal turns
            while not done:
                turns += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        await consume(upstream, session, store, [])  # type: ignore[arg-type]
        done = True
        await task
        return turns

    turns = asyncio.run(main())
    assert turns >= len(WIRE) // TEE_STEP_BYTES - 1 and upstream.closed and store.ended == "complete"
    assert b"".join(session.live_source.chunks) == WIRE


def test_direct_connect_stopped_mid_read_keeps_every_byte_it_read() -> None:
    from toollatch.web.live.proxy import consume

    session, store = live(), Store()

    async def main() -> None:
        task = asyncio.create_task(consume(Upstream(WIRE), session, store, []))  # type: ignore[arg-type]
        while session.live_source.size == 0:
            await asyncio.sleep(0)
        assert session.live_source.size < len(WIRE)  # stopped between two steps of the read
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    assert session.live_source.size == len(WIRE) and store.ended == "complete"  # it had reached [DONE]


class ProxiedUpstream(Upstream):
    """An upstream response as :class:`toollatch.web.live.proxy.ProxyStream` reads it."""

    status_code = 200


def sizes_while(session: LiveSession, work: Any) -> list[int]:
    """``session``'s assembled byte count at every turn of the event loop while ``work`` runs."""
    sizes: list[int] = []

    async def main() -> None:
        done = False

        async def watch() -> None:
            while not done:
                sizes.append(session.live_source.size)
                await asyncio.sleep(0)

        task = asyncio.create_task(watch())
        await asyncio.sleep(0)
        await work()
        done = True
        await task

    asyncio.run(main())
    return sizes


class Client:
    """The client side of a proxied stream (ASGI ``send``/``receive``): what it was sent; it never goes away."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    async def receive(self) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}


def test_the_proxy_assembles_what_is_left_at_the_stream_end_in_steps() -> None:
    from toollatch.web.live.proxy import ProxyStream

    session, store = live(), Store()
    client = Client()

    async def work() -> None:
        worker = TeeWorker()
        # The upstream ends before the worker's first round: the whole stream is left to the end.
        await ProxyStream(ProxiedUpstream(WIRE), session, store, [], worker)({"type": "http"}, client.receive, client.send)  # type: ignore[arg-type]
        await worker.aclose()

    sizes = sizes_while(session, work)
    steps = [b - a for a, b in zip(sizes, sizes[1:])]
    assert sizes[-1] == len(WIRE) and max(steps) <= TEE_STEP_BYTES  # never the whole backlog in one turn
    assert b"".join(m.get("body", b"") for m in client.sent) == WIRE and store.ended == "complete"
    assert b"".join(session.live_source.chunks) == WIRE


def test_a_drain_cancelled_between_steps_feeds_the_rest_then_is_cancelled() -> None:
    session = live()
    tee = Tee(session, Flushes())  # type: ignore[arg-type]
    tee.append(WIRE)

    async def main() -> bool:
        task = asyncio.create_task(tee.drain())
        while session.live_source.size == 0:
            await asyncio.sleep(0)
        assert session.live_source.size == TEE_STEP_BYTES  # stopped after the first step
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return task.cancelled()

    assert asyncio.run(main()) and tee.size == 0 and b"".join(session.live_source.chunks) == WIRE


def test_a_stop_once_the_client_has_the_whole_body_leaves_the_session_to_end_complete(tmp_path: Any) -> None:
    from toollatch.web.app import resource_dir
    from toollatch.web.live.store import LiveRenderer, LiveSessionStore
    from toollatch.web.live.proxy import ProxyStream
    from toollatch.web.settings import Settings
    from toollatch.web.replay.session import Status

    settings = Settings(data_dir=tmp_path)
    store = LiveSessionStore(settings, LiveRenderer(resource_dir("templates"), settings))
    session = store.create_live(live().live_source)
    client = Client()

    async def main() -> None:
        worker = TeeWorker()
        # The upstream ends before the worker's first round: all of it is assembled at the end, in steps.
        proxied = asyncio.create_task(ProxyStream(ProxiedUpstream(WIRE), session, store, [], worker)({"type": "http"}, client.receive, client.send))  # type: ignore[arg-type]
        while session.live_source.size == 0:
            await asyncio.sleep(0)
        assert session.live_source.size < len(WIRE) and client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
        store.cancel(session)  # Stop, pressed while what the client already has is being assembled
        assert not session.status.done
        await proxied
        await worker.aclose()

    asyncio.run(main())
    assert session.status is Status.FINISHED and session.end_kind == "complete"
    assert {c.state.value for r in session.pipeline.results() for c in r.calls} == {"committed"}
    assert b"".join(session.live_source.chunks) == WIRE


def test_a_decoding_fault_ends_the_session_with_an_error_and_keeps_the_bytes(monkeypatch: Any) -> None:
    session = live()

    def broken(chunk: bytes) -> list[Any]:
        raise ValueError(f"cannot read {chunk!r}")  # a fault whose text quotes the stream

    session.feed_bytes(WIRE[:500])
    monkeypatch.setattr(session._capture, "decode", broken)
    session.feed_bytes(WIRE[500:900])  # never raises into the tee or the proxy
    session.feed_bytes(WIRE[900:])
    assert session.status.value == "error" and session.error == "The stream could not be decoded (ValueError)."
    assert session.end_kind == "error" and "cannot read" not in json.dumps(session.to_json())
    assert b"".join(session.live_source.chunks) == WIRE


def test_a_live_session_folds_each_calls_counts_once_per_chunk_fed_and_shows_the_latest() -> None:
    session = live()
    folded = record_folds(session)
    cut = WIRE.index(b"data: [DONE]")
    body = WIRE[: WIRE.rindex(b"\n\ndata: ", 0, cut - 2) + 2]  # every fragment, not the finish
    session.feed_bytes(body)
    assert folded.count("fragment") == 3  # three calls, hundreds of fragments: one fold each
    stream = session.pipeline.streams[0]
    for card in session.cards.values():
        assert card.view.bytes == stream.outcome(card.view.key).bytes > 0  # the counts as assembled so far
    session.feed_bytes(WIRE[len(body) :])
    session.finish()
    assert {c.view.state.value for c in session.cards.values()} == {"committed"}
    assert all(c.view.bytes == stream.outcome(c.view.key).bytes for c in session.cards.values())


def test_each_chunk_is_timed_when_it_is_forwarded_not_when_it_is_assembled(monkeypatch: Any) -> None:
    import toollatch.web.live.tee as tee_module

    clock = iter([100.0, 100.5, 101.25])
    monkeypatch.setattr(tee_module, "monotonic", lambda: next(clock))
    session = live()
    tee = Tee(session, Flushes())  # type: ignore[arg-type]
    pieces = [WIRE[:700], WIRE[700:1500], WIRE[1500:2000]]
    for piece in pieces:
        tee.append(piece)
    assert len(session.live_source.times) == 0  # nothing recorded before the chunks are fed
    while tee.feed(300):  # fed later, and split differently
        pass
    times = session.live_source.times
    assert list(times.times) == [0.0, 0.5, 1.25] and list(times.ends) == [700, 1500, 2000]
