"""Following sessions as they appear: the index's refreshed session list and "watch the
next live stream" (web/pages/follow.py), against a real server with the proxy and the mock."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import openai
import pytest

from toollatch.web import Settings, create_app

from .test_live_server import newest_live, serve

KEY = "sk-follow-canary-7f3e"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(create_app(Settings(mock_delay=0.0, data_dir=tmp_path_factory.mktemp("follow-data")))) as url:
        yield url


def run_agent(base: str, model: str = "parallel") -> list[object]:
    client = openai.OpenAI(base_url=f"{base}/proxy/openai/v1", api_key=KEY, max_retries=0)
    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "go"}], stream=True)
    return list(stream)


def test_the_index_session_list_polls_itself_and_lists_live_sessions(base: str) -> None:
    index = httpx.get(f"{base}/").text
    assert 'hx-get="/partials/sessions"' in index and 'hx-trigger="every 2s"' in index
    run_agent(base, "single")
    sid = newest_live(base)
    listed = httpx.get(f"{base}/partials/sessions")
    assert listed.status_code == 200
    assert f'href="/sessions/{sid}"' in listed.text and "Live: openai /v1/chat/completions · single" in listed.text
    assert listed.text.count('id="sessions"') == 1 and 'hx-get="/partials/sessions"' in listed.text  # keeps polling
    assert KEY not in listed.text


def test_the_next_live_stream_page_waits_then_redirects_to_the_new_session(base: str) -> None:
    page = httpx.get(f"{base}/live/next")
    assert page.status_code == 200 and "Waiting for the next live stream" in page.text
    match = re.search(r"/live/next/poll\?after=([0-9a-f]*)", page.text)
    assert match is not None
    before = match.group(1)  # the newest live session when the page was opened, if any
    waiting = httpx.get(f"{base}/live/next/poll", params={"after": before})
    assert waiting.status_code == 204 and "HX-Redirect" not in waiting.headers
    run_agent(base, "parallel")
    sid = newest_live(base)
    assert sid != before
    found = httpx.get(f"{base}/live/next/poll", params={"after": before})
    assert found.status_code == 200 and found.headers["HX-Redirect"] == f"/sessions/{sid}"
    assert httpx.get(f"{base}/live/next/poll", params={"after": sid}).status_code == 204  # nothing newer yet


def test_poll_with_a_strange_after_value_is_harmless(base: str) -> None:
    run_agent(base, "noargs")
    odd = httpx.get(f"{base}/live/next/poll", params={"after": "<script>" * 50})
    assert odd.status_code == 200 and odd.headers["HX-Redirect"].startswith("/sessions/")
    assert "<script>" not in odd.text


# ------------------------------------------------------------------ "newer" by creation number, not by id


def _live(store: object, n: int) -> object:
    from toollatch.web.live.session import LiveSource

    source = LiveSource(f"mock/v1/chat/completions#{n}", upstream="mock", endpoint="/v1/chat/completions", dialect="openai-chat", request=None)
    return store.create_live(source)  # type: ignore[attr-defined]


def test_the_poll_never_takes_an_older_live_session_for_the_next_when_the_awaited_one_was_evicted() -> None:
    from starlette.testclient import TestClient

    from toollatch.web.triage.sources import load_demo

    from .test_web_app import BASE

    settings = Settings(max_sessions=3)
    with TestClient(create_app(settings), base_url=BASE) as client:
        store = client.app.state.store  # type: ignore[attr-defined]
        older = _live(store, 1)  # still streaming: never evicted
        awaited = _live(store, 2)
        awaited.finish()  # type: ignore[attr-defined]
        page = client.get("/live/next").text
        match = re.search(r"/live/next/poll\?after=([0-9a-f]*)&amp;seq=([0-9]+)", page)
        assert match is not None and match.group(1) == awaited.id  # type: ignore[attr-defined]
        query = {"after": match.group(1), "seq": match.group(2)}
        assert client.get("/live/next/poll", params=query).status_code == 204
        for _ in range(3):  # replays push the finished live session out
            store.create(load_demo("openai-single", settings.config), autoplay=False)
        assert store.get(awaited.id) is None and store.get(older.id) is older  # type: ignore[attr-defined]
        for params in (query, {"seq": match.group(2)}):
            waiting = client.get("/live/next/poll", params=params)
            assert waiting.status_code == 204 and "HX-Redirect" not in waiting.headers, params
        first, second = _live(store, 3), _live(store, 4)
        found = client.get("/live/next/poll", params=query)
        assert found.status_code == 200 and found.headers["HX-Redirect"] == f"/sessions/{first.id}"  # type: ignore[attr-defined]
        assert client.get("/live/next/poll", params={"after": first.id}).headers["HX-Redirect"] == f"/sessions/{second.id}"  # type: ignore[attr-defined]
        assert client.get("/live/next/poll", params={"after": second.id}).status_code == 204  # type: ignore[attr-defined]


@pytest.mark.parametrize("seq", ["²", "1" * 40, "-1", "1.5", " 1"])
def test_a_seq_that_is_not_a_small_number_is_ignored(seq: str) -> None:
    from starlette.testclient import TestClient

    from .test_web_app import BASE

    with TestClient(create_app(Settings()), base_url=BASE) as client:
        store = client.app.state.store  # type: ignore[attr-defined]
        first = _live(store, 1)
        assert client.get("/live/next/poll", params={"after": first.id, "seq": seq}).status_code == 204  # type: ignore[attr-defined]
        assert client.get("/live/next/poll", params={"seq": seq}).headers["HX-Redirect"] == f"/sessions/{first.id}"  # type: ignore[attr-defined]
