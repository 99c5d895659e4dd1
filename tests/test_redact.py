"""The redacted records (toollatch.redaction.redact): the fast builders give the classes' own objects."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from toollatch.core.model import CallState, Transition
from toollatch.redaction.redact import AssemblyEvent, CallView, assembly_event, call_view, hide_progress

VIEW_FIELDS = (("k",), "call_1", "read_file", CallState.OPEN, None, 12, 3, "client", (Transition(CallState.OPEN, 0.5),))


def test_call_view_builds_the_same_view_as_the_class() -> None:
    built, made = call_view(*VIEW_FIELDS), CallView(*VIEW_FIELDS)  # type: ignore[arg-type]
    assert type(built) is CallView and built == made and hash(built) == hash(made)
    assert dataclasses.astuple(built) == dataclasses.astuple(made) == VIEW_FIELDS
    assert built.to_json() == made.to_json() and pickle.loads(pickle.dumps(built)) == made
    assert hide_progress(built) == hide_progress(made) and hide_progress(built).bytes == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.bytes = 0  # type: ignore[misc]


def test_assembly_event_builds_the_same_event_as_the_class() -> None:
    view = call_view(*VIEW_FIELDS)  # type: ignore[arg-type]
    fields = (7, 1.25, "fragment", 2, view, None, None)
    built, made = assembly_event(*fields), AssemblyEvent(*fields)  # type: ignore[arg-type]
    assert type(built) is AssemblyEvent and built == made and dataclasses.astuple(built) == dataclasses.astuple(made)
    assert built.to_json() == made.to_json()
    ended = (8, 2.0, "stream_end", 0, None, "complete", "finish_reason")
    assert assembly_event(*ended) == AssemblyEvent(*ended)  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.seq = 0  # type: ignore[misc]
