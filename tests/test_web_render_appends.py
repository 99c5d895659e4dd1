"""A render costs what changed, not what the session holds: a card that appears after every
card shown is appended alone (``beforeend:#calls``), the list is redone only when a card
comes between others (or replaces the "no tool calls" note), and a viewer that connects
with cards or verdicts not yet rendered never has them appended twice."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from toollatch import read_capture
from toollatch.core.config import DEFAULT_CONFIG
from toollatch.web.app import resource_dir
from toollatch.web.pages.cards import Changes
from toollatch.web.replay.fanout import Broadcaster
from toollatch.web.pages.render import Renderer
from toollatch.web.replay.session import Session
from toollatch.web.settings import Settings
from toollatch.web.triage.sources import LoadedSource

from .test_web_app import VirtualTime

ARTICLE = re.compile(r'<article id="(call-[\d-]+)"')
RENDERER = Renderer(resource_dir("templates"), Settings())


def chat(index: int, call_id: str) -> dict[str, Any]:
    entry = {"index": index, "id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"tool_calls": [entry]}, "finish_reason": None}]}


def session_of(indexes: list[int]) -> Session:
    events = [chat(i, f"c{i}") for i in indexes]
    events.append({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    data = ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()
    return Session("s", LoadedSource("upload", "s.sse", "s", "s", data, len(read_capture(data)), None, None, None), DEFAULT_CONFIG, 10.0)


def render_step(session: Session) -> str:
    session.step(1)
    return RENDERER.update(session, session.take_changes())


def test_a_card_after_every_card_shown_is_appended_alone() -> None:
    session = session_of(list(range(50)))
    session.take_changes()
    first = render_step(session)
    assert 'id="calls"' in first and ARTICLE.findall(first) == ["call-0-0-0-0"]  # replaces the "no tool calls" note
    for n in range(1, 50):
        html = render_step(session)
        assert 'id="calls"' not in html, f"card {n}: the whole list was redone"
        assert 'hx-swap-oob="beforeend:#calls"' in html
        assert ARTICLE.findall(html) == [f"call-0-0-{n}-0"], f"card {n}: only the new card is rendered"
    assert len(session.cards) == 50


def test_a_card_that_comes_between_cards_shown_redoes_the_list_in_provider_order() -> None:
    session = session_of([0, 5, 3])
    session.take_changes()
    render_step(session)
    assert ARTICLE.findall(render_step(session)) == ["call-0-0-5-0"]
    html = render_step(session)
    assert 'id="calls"' in html and "beforeend:#calls" not in html
    assert ARTICLE.findall(html) == ["call-0-0-0-0", "call-0-0-3-0", "call-0-0-5-0"]


def test_merged_changes_append_each_new_card_once_in_order() -> None:
    merged = Changes(added=["a", "b"]).merge(Changes(added=["b", "c"])).merge(Changes(added=["a"]))
    assert merged.added == ["a", "b", "c"] and merged.essential and merged.any()


def test_cards_in_several_renders_appended_between_two_renders_are_appended_together_in_order() -> None:
    session = session_of(list(range(6)))
    session.take_changes()
    render_step(session)
    session.step(3)
    html = RENDERER.update(session, session.take_changes())
    assert "beforeend:#calls" in html and ARTICLE.findall(html) == ["call-0-0-1-0", "call-0-0-2-0", "call-0-0-3-0"]


def test_the_ordered_cards_are_kept_not_sorted_per_read() -> None:
    session = session_of([4, 1, 3, 0, 2])
    session.step(10**6)
    assert session.ordered_cards is session.ordered_cards
    assert [c.view.key for c in session.ordered_cards] == sorted(c.view.key for c in session.cards.values())
    assert RENDERER.session_context(session)["cards"] is session.ordered_cards


def test_a_viewer_that_connects_with_cards_and_verdicts_not_yet_rendered_gets_each_once() -> None:
    async def scenario() -> None:
        time = VirtualTime()
        session = session_of([0, 1, 2])
        hub = Broadcaster(session, RENDERER, max_per_second=20, capacity=64, clock=time.clock, sleep=time.sleep)
        session.take_changes()
        session.step(10**6)  # cards and verdicts pending, not rendered: no viewer yet
        viewer = hub.subscribe()
        full = await viewer.get()
        assert ARTICLE.findall(full) == ["call-0-0-0-0", "call-0-0-1-0", "call-0-0-2-0"]
        hub.request()
        [after] = [await viewer.get()]
        assert "beforeend:#calls" not in after and "beforeend:#verdict-log" not in after
        assert 'id="calls"' in after and "innerHTML:#verdict-log" in after  # redone, not appended again
        assert after.count('class="v-') == full.count('class="v-') == 4

    asyncio.run(scenario())


# ------------------------------------------------------------------ the owed error results

RESULT_ITEM = re.compile(r'<li><code>([^<]+)</code> <span class="badge badge-failed">is_error</span>')


def failing_session(indexes: list[int]) -> Session:
    """Each call's arguments are over the byte limit: it fails (and owes a result) at its first event."""
    from dataclasses import replace

    session = session_of(indexes)
    data = session.source.data.replace(b'"arguments": "{}"', b'"arguments": "{\\"k\\": \\"long\\"}"')
    source = LoadedSource("upload", "s.sse", "s", "s", data, session.source.count, None, None, None)
    return Session("s", source, replace(DEFAULT_CONFIG, max_tool_argument_bytes=8), 10.0)


def test_a_result_owed_after_every_result_shown_is_appended_alone() -> None:
    session = failing_session(list(range(30)))
    session.take_changes()
    first = render_step(session)
    assert 'id="results"' in first and RESULT_ITEM.findall(first) == ["c0"]  # replaces the "none yet" note
    for n in range(1, 30):
        html = render_step(session)
        assert 'id="results"' not in html, f"result {n}: the whole list was redone"
        assert 'hx-swap-oob="beforeend:#result-list"' in html and RESULT_ITEM.findall(html) == [f"c{n}"]
    assert [r.tool_call_id for _, r in session.results] == [f"c{n}" for n in range(30)]


def test_a_result_owed_before_results_shown_redoes_the_list_in_provider_order() -> None:
    session = failing_session([0, 5, 3])
    session.take_changes()
    render_step(session)
    assert RESULT_ITEM.findall(render_step(session)) == ["c5"]
    html = render_step(session)
    assert 'id="results"' in html and "beforeend:#result-list" not in html
    assert RESULT_ITEM.findall(html) == ["c0", "c3", "c5"]


def test_a_viewer_that_connects_with_results_not_yet_rendered_gets_each_once() -> None:
    async def scenario() -> None:
        time = VirtualTime()
        session = failing_session([0, 1])
        hub = Broadcaster(session, RENDERER, max_per_second=20, capacity=64, clock=time.clock, sleep=time.sleep)
        session.take_changes()
        render_step(session)
        session.step(1)  # a result owed, not rendered
        viewer = hub.subscribe()
        full = await viewer.get()
        hub.request()
        after = await viewer.get()
        assert RESULT_ITEM.findall(full) == RESULT_ITEM.findall(after) == ["c0", "c1"]
        assert "beforeend:#result-list" not in after

    asyncio.run(scenario())
