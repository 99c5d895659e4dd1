"""A non-streaming body is read off the event loop and assembled in steps (web/live/session.py
``LiveSession.settle``, web/live/offload.py): other coroutines run between the steps, the
parse never runs on the loop's thread, and calls past the in-flight limit are not re-told
one by one."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from toollatch.core.config import AssembleConfig
from toollatch.web.live import offload
from toollatch.web.live.session import LiveSession
from toollatch.web.live.source import LiveSource
from toollatch.wire.retell import retell_capped


def chat_completion(count: int) -> bytes:
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}} for i in range(count)]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    return json.dumps({"object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}).encode()


def json_session(body: bytes, config: AssembleConfig | None = None) -> LiveSession:
    source = LiveSource("up/v1/chat/completions", upstream="up", endpoint="/v1/chat/completions", dialect="openai-chat",
                        request={"model": "m", "stream": False})
    session = LiveSession("s1", source, config or AssembleConfig())
    source.answered(200, "application/json")
    session.feed_bytes(body)
    return session


def reasons(session: LiveSession) -> list[str]:
    return [(c["reason"] or c["state"]).split(":")[0] for c in session.to_json()["calls"]]


def test_other_coroutines_run_between_the_steps_of_a_body() -> None:
    session = json_session(chat_completion(20))
    seen: list[int] = []

    async def other() -> None:
        while not session.status.done:
            seen.append(session.position)
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(session.settle(step=3), other())

    asyncio.run(main())
    assert session.end_kind == "complete"
    assert reasons(session) == ["committed"] * 20
    between = sorted({p for p in seen if 0 < p < session.position})
    assert len(between) >= 5, seen  # the other coroutine saw the body half assembled, several times


def test_the_body_is_read_off_the_event_loop_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[threading.Thread] = []
    real = offload.retell_capped

    def spy(*args: Any) -> Any:
        threads.append(threading.current_thread())
        return real(*args)

    monkeypatch.setattr(offload, "retell_capped", spy)
    session = json_session(chat_completion(3))

    async def main() -> threading.Thread:
        await session.settle()
        return threading.current_thread()

    loop_thread = asyncio.run(main())
    assert threads and all(t is not loop_thread for t in threads)
    assert reasons(session) == ["committed"] * 3


def test_a_large_body_is_read_in_a_child_process_to_the_same_stream() -> None:
    body = chat_completion(40)

    async def main() -> tuple[bytes | None, str | None, int]:
        return await offload.retell_off_loop("openai-chat", body, "b", 5, thread_limit=0)

    assert asyncio.run(main()) == retell_capped("openai-chat", body, "b", 5)


def test_calls_past_the_in_flight_limit_are_not_retold_one_by_one() -> None:
    session = json_session(chat_completion(1000), AssembleConfig(max_tool_calls_in_flight_assemble=4))
    asyncio.run(session.settle())
    assert reasons(session) == ["committed"] * 4 + ["too_many_tool_calls"]
    doc = session.to_json()
    assert doc["live"]["untold_calls"] == 995
    assert session.notice is not None and "1000 tool calls" in session.notice and "too_many_tool_calls" in session.notice


def test_an_unreadable_body_fails_the_session_naming_the_fault() -> None:
    session = json_session(b'{"object": "chat.completion", "choices": [')
    asyncio.run(session.settle())
    assert session.status.value == "error" and session.error is not None and "could not be read" in session.error


def test_a_stop_during_the_steps_ends_the_session_cancelled() -> None:
    session = json_session(chat_completion(20))

    async def stopper() -> None:
        while session.position < 4:
            await asyncio.sleep(0)
        session.cancel("user stop")

    async def main() -> None:
        await asyncio.gather(session.settle(step=2), stopper())

    asyncio.run(main())
    assert session.end_kind == "cancelled"
    assert session.position < 20
