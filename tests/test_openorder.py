"""Tests for toollatch.core.openorder: the count of calls opened before a given one that await a verdict."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch.core.openorder import AwaitingCount


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["open", "open-settled", "settle"]), st.integers(0, 10_000)), max_size=200))
def test_before_counts_as_a_walk_of_the_calls_does(steps: list[tuple[str, int]]) -> None:
    count, awaiting = AwaitingCount(), []  # awaiting: the plain list the tree must agree with
    for action, pick in steps:
        if action == "settle":
            live = [slot for slot, flag in enumerate(awaiting) if flag]
            if not live:
                continue
            slot = live[pick % len(live)]
            count.settle(slot)
            awaiting[slot] = False
        else:
            count.append(action == "open")
            awaiting.append(action == "open")
        assert len(count) == len(awaiting)
        for slot in range(len(awaiting) + 1):
            assert count.before(slot) == sum(awaiting[:slot])


def test_made_from_calls_already_open_as_if_appended_one_by_one() -> None:
    flags = [True, False, True, True, False] * 7
    built, grown = AwaitingCount(flags), AwaitingCount()
    for flag in flags:
        grown.append(flag)
    assert [built.before(s) for s in range(len(flags) + 1)] == [grown.before(s) for s in range(len(flags) + 1)]
    assert built.before(len(flags)) == flags.count(True)
