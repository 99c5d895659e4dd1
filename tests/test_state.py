"""The call state machine: every (state, input) pair, as h2's test_state_machines does."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toollatch.core.model import CallState
from toollatch.core.state import TRANSITIONS, CallInput, CallStateMachine, IllegalTransition

ALL_PAIRS = list(itertools.product(CallState, CallInput))

#: DESIGN.md "Core model", written out independently of state.py's table.
EXPECTED_LEGAL = {
    (CallState.OPEN, CallInput.ARGS_COMPLETE): CallState.ARGS_COMPLETE,
    (CallState.OPEN, CallInput.FAIL): CallState.FAILED,
    (CallState.OPEN, CallInput.CANCEL): CallState.CANCELLED,
    (CallState.ARGS_COMPLETE, CallInput.COMMIT): CallState.COMMITTED,
    (CallState.ARGS_COMPLETE, CallInput.FAIL): CallState.FAILED,
    (CallState.ARGS_COMPLETE, CallInput.CANCEL): CallState.CANCELLED,
}


def test_table_matches_the_design() -> None:
    assert TRANSITIONS == EXPECTED_LEGAL


def test_a_new_machine_is_open() -> None:
    assert CallStateMachine().state is CallState.OPEN


@pytest.mark.parametrize(("state", "event"), ALL_PAIRS, ids=lambda v: v.name)
def test_every_pair(state: CallState, event: CallInput) -> None:
    machine = CallStateMachine(state)
    if (state, event) in EXPECTED_LEGAL:
        new = machine.apply(event)
        assert new is EXPECTED_LEGAL[(state, event)]
        assert machine.state is new
    else:
        with pytest.raises(IllegalTransition) as info:
            machine.apply(event)
        assert machine.state is state, "an illegal move must leave the state unchanged"
        assert info.value.state is state
        assert info.value.event is event
        assert event.value in str(info.value) and state.name in str(info.value)


@pytest.mark.parametrize("state", [s for s in CallState if s.terminal], ids=lambda s: s.name)
def test_terminal_states_have_no_exits(state: CallState) -> None:
    assert not [pair for pair in TRANSITIONS if pair[0] is state]
    machine = CallStateMachine(state)
    for event in CallInput:
        with pytest.raises(IllegalTransition):
            machine.apply(event)
        assert machine.state is state


def test_terminal_property() -> None:
    assert {s for s in CallState if s.terminal} == {CallState.COMMITTED, CallState.FAILED, CallState.CANCELLED}


def test_commit_needs_args_complete_first() -> None:
    # the latch: an OPEN buffer can never jump to COMMITTED
    with pytest.raises(IllegalTransition):
        CallStateMachine().apply(CallInput.COMMIT)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list(CallInput)), max_size=12))
def test_random_input_sequences(events: list[CallInput]) -> None:
    machine = CallStateMachine()
    state = CallState.OPEN
    for event in events:
        before = machine.state
        assert before is state
        try:
            after = machine.apply(event)
        except IllegalTransition:
            assert (before, event) not in EXPECTED_LEGAL
            assert machine.state is before
        else:
            assert after is EXPECTED_LEGAL[(before, event)]
            state = after
        if before.terminal:
            assert machine.state is before
    assert machine.state is state
