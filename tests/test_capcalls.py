"""Tests for toollatch.core.capcalls: the first calls of an event followed, the others left out and counted."""

from __future__ import annotations

from typing import Any

import pytest

from toollatch.core.capcalls import TOLD_PER_OP, KeyIds, KnownKeys, cap_new_calls
from toollatch.core.model import ArgsFragment, CallIdentity, CallsLeftOut, CallStart, Quirk, StreamEnd


def test_the_first_calls_an_event_opens_are_kept_and_known_calls_keep_every_op() -> None:
    ops = [
        Quirk("x"), ArgsFragment((0, 9), "{"),  # a call the stream already has
        CallStart((0, 0), "a", "f"), CallStart((0, 1), "b", "f"), CallStart((0, 2), "c", "f"),
        ArgsFragment((0, 2), "{}"), ArgsFragment((0, 0), "{}"), ArgsFragment((0, 7), "{}"), StreamEnd("stop"),
    ]
    capped = cap_new_calls(ops, known={(0, 9)}, keep=2, earlier={(0, 7)})
    kept, left_out = capped.ops, capped.left_out
    # the start of the call left out stays where it was, as an id to count (CallsLeftOut)
    assert kept == [ops[0], ops[1], ops[2], ops[3], CallsLeftOut((ops[4],)), ops[6], ops[8]]
    assert left_out == {(0, 2)}  # (0, 7) was left out before: dropped, not counted again


def test_the_identity_ops_of_calls_left_out_are_told_in_place_in_small_groups() -> None:
    starts = [CallStart((0, i), f"c{i}", "f") for i in range(1, 2 * TOLD_PER_OP + 2)]
    ops = [CallStart((0, 0), "a", "f"), *starts, ArgsFragment((0, 0), "{}"), CallIdentity((0, 1), "late"), CallIdentity((0, 2), None, "g"), StreamEnd("stop")]
    capped = cap_new_calls(ops, known=(), keep=1)
    kept, left_out = capped.ops, capped.left_out
    told = [op for op in kept if type(op) is CallsLeftOut]
    assert [len(t.ops) for t in told] == [TOLD_PER_OP, TOLD_PER_OP, 1, 1]  # a CallIdentity without an id is not told
    assert [t.ops for t in told[:3]] == [tuple(starts[:TOLD_PER_OP]), tuple(starts[TOLD_PER_OP : 2 * TOLD_PER_OP]), (starts[-1],)]
    assert kept[4] == ops[-4] and told[3].ops == (ops[-3],) and kept[-1] == ops[-1]
    assert len(left_out) == len(starts) == capped.untold


# ------------------------------------------------------------------ shown calls get the library's verdict


def random_ops(rng: Any) -> list[Any]:
    """A stream's ops as adapters make them: a key's first op starts its call; calls restart
    at used keys with other ids, learn ids and names late (``final`` ids before the call
    stops only, as Responses gives them), share ids, stop, take fragments after stopping."""
    from toollatch.core.model import BlockStop

    ops: list[Any] = []
    started: set[tuple[int, ...]] = set()
    stopped: set[tuple[int, ...]] = set()
    for _ in range(rng.randint(3, 18)):
        key = (rng.randrange(rng.randint(2, 6)),)
        roll = rng.random() if key in started else 0.0
        if roll < 0.3:
            ops.append(CallStart(key, rng.choice(["a", "b", "c", None]), rng.choice(["f", "f", "g"])))
            started.add(key)
            stopped.discard(key)
        elif roll < 0.45:
            final = rng.random() < 0.5 and key not in stopped
            ops.append(CallIdentity(key, rng.choice(["a", "b", "c", None]), rng.choice(["f", None, "g"]), final=final))
        elif roll < 0.75:
            ops.append(ArgsFragment(key, rng.choice(["{}", "{", "}", '"x"', '{"q":1}'])))
        else:
            ops.append(BlockStop(key))
            stopped.add(key)
    return [*ops, StreamEnd()]


CONFIGS = [
    {},
    {"execute_before_stream_end": True, "allow_pipelined_execute": ("f",)},
    {"max_tool_calls_per_run": 1},
    {"max_tool_calls_per_run": 2, "execute_before_stream_end": True, "allow_pipelined_execute": ("f",)},
    {"max_tool_calls_in_flight_assemble": 2},
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(c) or "default")
def test_every_call_shown_gets_the_library_verdict_whatever_the_calls_left_out_do(config: dict[str, Any]) -> None:
    """Differential, over 3,000 random streams per configuration: the library assembles
    every op; the dashboard's reader (cap_new_calls on two events, as CappedPipeline does)
    follows the first ``keep`` calls and leaves the others out. Each call it shows must get
    the library's tool_call_id, state and reason: calls left out that share ids, restart at
    a used key, commit first (pipelined) or take the run budget change nothing shown."""
    import random

    from toollatch.core.assembler import Assembler
    from toollatch.core.config import AssembleConfig

    settings = AssembleConfig(**config)
    for seed in range(3000):
        rng = random.Random(seed)
        ops = random_ops(rng)
        cut, keep = rng.randint(1, len(ops) - 1), rng.randint(1, 3)
        library, dashboard = Assembler("test", config=settings), Assembler("test", config=settings)
        for op in ops:
            library.apply(op)
        first = cap_new_calls(ops[:cut], (), keep, began=False)
        for op in first.ops:
            dashboard.apply(op)
        rest = cap_new_calls(ops[cut:], KnownKeys(dashboard), max(0, keep - len(dashboard._calls)), first.left_out, dashboard.began)
        for op in rest.ops:
            dashboard.apply(op)
        full = {c.key: (c.call_id, c.state, c.reason) for c in library.result().calls}
        shown = {c.key: (c.call_id, c.state, c.reason) for c in dashboard.result().calls}
        assert len(shown) <= keep, (seed, ops)
        assert {k: v for k, v in shown.items() if full.get(k) != v} == {}, (seed, cut, keep, ops)


def test_a_restart_at_a_known_key_is_a_new_call_for_the_cap_in_a_worker_thread_too() -> None:
    """read_large_event gets a copy of the keys with their ids (KeyIds): a start with another
    id at a key that has a call is another call, left out once the room is spent; a start
    with the same id (or at a call without one) is the same call, kept."""
    known = KeyIds({(0,): "c0", (1,): None})
    ops = [CallStart((0,), "c0", "f"), CallStart((1,), "c1", "f"), CallStart((0,), "other", "f"), ArgsFragment((0,), "{}")]
    capped = cap_new_calls(ops, known, 0)
    kept, left_out = capped.ops, capped.left_out
    assert kept[:2] == ops[:2] and left_out == {(0,)}
    assert isinstance(kept[2], CallsLeftOut) and kept[2].ops == (ops[2],) and len(kept) == 3  # its fragment is dropped
    capped = cap_new_calls(ops, known, 1)  # room for one new call: the restart is followed
    assert capped.ops == ops and capped.left_out == set() and capped.untold == 0


class ReplayedOps:
    """A dialect adapter that gives each event's data (a list of ops) as its ops."""

    name = "anthropic"

    def feed(self, event: Any) -> list[Any]:
        return list(event.data)

    def close(self) -> list[Any]:
        return []


def random_streams(rng: Any) -> list[list[Any]]:
    """Events (lists of ops) of one to three streams: each begins with a stream start, has
    the ops of :func:`random_ops` and most end; among them ops at keys without a call (a
    block stop first), calls a fragment opens, calls the provider runs, ops after an end."""
    from toollatch.core.model import BlockStop, StreamStart

    ops: list[Any] = []
    for _ in range(rng.randint(1, 3)):
        ops.append(StreamStart({}))
        if rng.random() < 0.3:
            ops.append(BlockStop((rng.randrange(4),)))  # no call there yet
        body = random_ops(rng)[:-1]
        if rng.random() < 0.3:
            body.insert(rng.randrange(len(body) + 1), ArgsFragment((7,), "{}"))  # a call a fragment opens
        if rng.random() < 0.3:
            body.append(CallStart((7,), rng.choice(["a", "b"]), "f", rng.choice(["client", "server"])))
        ops += body
        if rng.random() < 0.8:
            ops.append(StreamEnd())
            if rng.random() < 0.3:
                ops += random_ops(rng)[:3]  # ops after the end: ignored by the assembler, no calls
    events: list[list[Any]] = []
    while ops:
        size = rng.randint(1, 5)
        events.append(ops[:size])
        ops = ops[size:]
    return events


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(c) or "default")
def test_every_call_a_capped_pipeline_shows_gets_the_pipeline_verdict(config: dict[str, Any]) -> None:
    """Differential through whole pipelines, over 1,500 random inputs per configuration:
    streams one after another (an event may end one and begin the next), ops at keys
    without a call, calls opened by a fragment or run by the provider. The capped pipeline
    follows at most ``keep`` calls of the input, and each gets the pipeline's verdict."""
    import random

    from toollatch.core.config import AssembleConfig
    from toollatch.core.large import CappedPipeline
    from toollatch.core.pipeline import Pipeline
    from toollatch.wire.capture import ProviderEvent

    settings = AssembleConfig(**config)
    for seed in range(1500):
        rng = random.Random(seed)
        events = random_streams(rng)
        keep = rng.randint(1, 4)
        verdicts = []
        capped = CappedPipeline(name="in", config=settings, keep=keep)
        for pipeline in (Pipeline(name="in", config=settings), capped):
            pipeline.adopt("anthropic", ReplayedOps())  # type: ignore[arg-type]
            for n, ops in enumerate(events):
                pipeline.feed(ProviderEvent(None, ops, n + 1, n))
            pipeline.close()
            verdicts.append([{c.key: (c.call_id, c.state, c.reason) for c in r.calls} for r in pipeline.results()])
        full, shown = verdicts
        assert sum(map(len, shown)) <= keep, (seed, events)
        # never counts a call the pipeline does not have (a call restarting at a key left out is not counted again)
        assert sum(map(len, shown)) + capped.untold <= sum(map(len, full)), (seed, events)
        assert len(shown) == len(full), (seed, events)
        for f, s in zip(full, shown):
            assert {k: v for k, v in s.items() if f.get(k) != v} == {}, (seed, keep, events)


def dashboard_differs(events: list[list[Any]], keep: int, config: Any) -> dict[Any, Any]:
    """Assemble ``events`` (lists of ops) whole and capped (one Assembler each): the calls shown whose verdict differs."""
    from toollatch.core.assembler import Assembler

    library, dashboard, earlier = Assembler("t", config=config), Assembler("t", config=config), set()
    for ops in events:
        for op in ops:
            library.apply(op)
        capped = cap_new_calls(ops, KnownKeys(dashboard), max(0, keep - len(dashboard._calls)), earlier, dashboard.began)
        earlier |= capped.left_out
        for op in capped.ops:
            dashboard.apply(op)
    full = {c.key: (c.call_id, c.state, c.reason) for c in library.result().calls}
    return {c.key: ((c.call_id, c.state, c.reason), full.get(c.key)) for c in dashboard.result().calls if full.get(c.key) != (c.call_id, c.state, c.reason)}


def test_an_op_at_a_key_without_a_call_is_no_call_for_the_cap() -> None:
    """A block stop where no call is opens none: counting it left the next call out while
    room was left, and a later call was shown that the in-flight limit fails."""
    from toollatch.core.config import AssembleConfig
    from toollatch.core.model import BlockStop

    events = [[BlockStop((0,)), CallStart((6,), "x", "f", "client", '{"q":1}')], [CallStart((3,), "y", "f", "client", "{}")], [StreamEnd()]]
    assert dashboard_differs(events, 1, AssembleConfig(max_tool_calls_in_flight_assemble=1)) == {}


def test_a_call_left_out_that_a_fragment_opened_counts_its_later_id_as_a_client_calls() -> None:
    """The assembler opens a client call at a fragment; a later start there (the provider's
    executor said) only names it. Told as a start without id, it counts the id alike."""
    from toollatch.core.config import AssembleConfig

    events = [[CallStart((0,), "a", "f", "client", "{}")], [ArgsFragment((1,), "{}"), CallStart((1,), "a", "f", "server")], [StreamEnd()]]
    assert dashboard_differs(events, 1, AssembleConfig()) == {}
