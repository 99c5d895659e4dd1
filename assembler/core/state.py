"""The call state machine: every legal transition in one table.

An illegal move raises :class:`IllegalTransition` and leaves the state unchanged
(modelled on h11's ``_state.py``)::

    OPEN ──args_complete──▶ ARGS_COMPLETE ──commit──▶ COMMITTED
      │                           ├────────fail─────▶ FAILED
      │                           └───────cancel────▶ CANCELLED
      ├──fail──▶ FAILED   (overflow, too many calls, truncated, idle, provider error)
      └──cancel─▶ CANCELLED (user stop / deadline)
"""

from __future__ import annotations

import enum

from toollatch.core.model import CallState


class CallInput(enum.Enum):
    """What may happen to a call."""

    ARGS_COMPLETE = "args_complete"  # block stop or stream end: no more fragments for this key
    COMMIT = "commit"  # the latch held: transport, identity, strict JSON, schema, budget
    FAIL = "fail"
    CANCEL = "cancel"

    __hash__ = object.__hash__  # identity, as CallState: the table is read per transition


class IllegalTransition(RuntimeError):
    """Raised for a (state, input) pair that is not in :data:`TRANSITIONS`."""

    def __init__(self, state: CallState, event: CallInput) -> None:
        super().__init__(f"illegal transition: {event.value} in state {state.name}")
        self.state = state
        self.event = event


#: Each input as a plain name (an enum member read through the class costs a descriptor call).
ARGS_DONE, COMMIT, FAIL, CANCEL = CallInput.ARGS_COMPLETE, CallInput.COMMIT, CallInput.FAIL, CallInput.CANCEL

#: The only legal moves. Terminal states have no outgoing transitions.
TRANSITIONS: dict[tuple[CallState, CallInput], CallState] = {
    (CallState.OPEN, CallInput.ARGS_COMPLETE): CallState.ARGS_COMPLETE,
    (CallState.OPEN, CallInput.FAIL): CallState.FAILED,
    (CallState.OPEN, CallInput.CANCEL): CallState.CANCELLED,
    (CallState.ARGS_COMPLETE, CallInput.COMMIT): CallState.COMMITTED,
    (CallState.ARGS_COMPLETE, CallInput.FAIL): CallState.FAILED,
    (CallState.ARGS_COMPLETE, CallInput.CANCEL): CallState.CANCELLED,
}


class CallStateMachine:
    """Holds one call's state; :meth:`apply` moves it by the table or raises."""

    __slots__ = ("state",)

    def __init__(self, state: CallState = CallState.OPEN) -> None:
        self.state = state

    def apply(self, event: CallInput) -> CallState:
        """Move by ``event``; return the new state.

        Raises :class:`IllegalTransition` (state unchanged) for a move not in the table.
        """
        try:
            new = TRANSITIONS[(self.state, event)]
        except KeyError:
            raise IllegalTransition(self.state, event) from None
        self.state = new
        return new
