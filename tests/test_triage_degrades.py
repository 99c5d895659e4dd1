"""The triage panel of a stream with hostile provider events: a step that cannot read them
(the naive-client lane, the token classes around a break) is unavailable on its own, named;
the rest of the panel (diagnoses, other failures, exports) is still shown."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toollatch.web.triage import breakpoint

from .test_web_app import make_client
from .test_web_triage import doc, upload


def chat(index: Any, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def hostile_stream(index: Any) -> bytes:
    """One call whose arguments are cut (invalid JSON at the end), under ``choices[].index``."""
    events = [
        chat(index, {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": '}}]}),
        chat(index, {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"} }'}}]}),
        chat(index, {}, "tool_calls"),
    ]
    return ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()


@pytest.mark.parametrize("index", [[1], {"n": 1}, [[0]]], ids=["a list", "an object", "a nested list"])
def test_a_hostile_choice_index_leaves_only_the_naive_lane_unavailable(index: Any) -> None:
    with make_client() as client:
        sid = upload(client, "hostile.sse", hostile_stream(index))
        twin = doc(client, sid)
        panel = client.get(f"/sessions/{sid}/triage")
    triage = twin["triage"]
    assert twin["status"] == "finished" and triage["ready"]
    assert "error" not in triage  # the panel did not fail as a whole
    [dx] = triage["diagnoses"]
    assert dx["name"] == "get_weather" and dx["reason"] == "invalid_json" and dx["text"]
    assert triage["naive_lane"] is None
    assert triage["naive_lane_error"] == (
        "The naive-client lane is unavailable for this stream: a provider event has a shape the naive strategies cannot read (TypeError)."
    )
    assert panel.status_code == 200
    assert "Triage failed" not in panel.text and triage["naive_lane_error"] in panel.text
    assert "Shown when the replay is over." not in panel.text.split("lane-h")[1]  # the lane says why, not "later"
    for export in ("export.report.json", "export.md", "export.sse"):
        assert client.get(f"/sessions/{sid}/{export}").status_code == 200, export


def test_a_well_formed_stream_has_its_lane_and_no_lane_error() -> None:
    with make_client() as client:
        sid = upload(client, "ok.sse", hostile_stream(0))
        triage = doc(client, sid)["triage"]
    assert triage["naive_lane"] and triage["naive_lane_error"] is None


def test_a_break_context_that_cannot_be_recovered_is_unavailable_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise RecursionError("an event nested too deep to re-read")

    monkeypatch.setattr(breakpoint, "call_fragments", unreadable)
    with make_client() as client:
        sid = upload(client, "ok.sse", hostile_stream(0))
        triage = doc(client, sid)["triage"]
        panel = client.get(f"/sessions/{sid}/triage").text
    assert "error" not in triage and triage["naive_lane"]
    [dx] = triage["diagnoses"]
    assert dx["context"] is None and dx["text"]
    assert dx["context_error"] == "The token classes around the break could not be recovered (RecursionError)."
    assert dx["context_error"] in panel and "Triage failed" not in panel
