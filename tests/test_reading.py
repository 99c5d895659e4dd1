"""A finished live session's recording, read through once: the as-received check, the search
for an echoed credential and the reproducer come from one decoding of the stream; read in
steps, the same answer as reading it in one go, with the event loop served between steps;
the event-by-event redactor it uses."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toollatch.wire.capture import read_capture
from toollatch.core.config import AssembleConfig
from toollatch.demo.demos import DEMOS
from toollatch.redaction.export import UNREAD_STREAM, EventRedactor, redact_capture, redact_events, stray_argument_text
from toollatch.demo.stress import stress_demo
from toollatch.web.live import echo_search
from toollatch.web.live.reading import download_as_received, read_in_steps, read_recording, unescape
from toollatch.web.live.session import LiveSession, LiveSource

from .conftest import CAPTURES

SAMPLES = {name: demo.wire for name, demo in DEMOS.items()}
SAMPLES.update({p.name: p.read_bytes() for p in sorted(CAPTURES.rglob("*"))[:400] if p.suffix in (".sse", ".jsonl") and p.stat().st_size < 200_000})


def chat(delta: dict[str, Any], finish: str | None = None, **choice: Any) -> bytes:
    doc = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **choice}]}
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


CALL = chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"s": "x"}'}}]})
END = chat({}, "tool_calls") + b"data: [DONE]\n\n"
KEY = "sk-echo-Abc123Def456Ghi789"  # a forwarded credential
#: Argument text in a place no adapter reads (a whole message inside a chunk): the calls
#: commit, yet the bytes hold text none of them took.
UNREAD_PLACE = CALL + chat({}, message={"tool_calls": [{"id": "c9", "function": {"name": "g", "arguments": '{"t": "CANARY"}'}}]}) + END


def finished(data: bytes, *, dialect: str | None = "openai-chat", stop_after: int | None = None) -> LiveSession:
    source = LiveSource("up/v1/chat/completions", upstream="up", endpoint="/v1/chat/completions", dialect=dialect, request={"model": "m", "stream": True})
    session = LiveSession("s", source, AssembleConfig())
    source.http_status, source.content_type = 200, "text/event-stream"
    session.feed_bytes(data if stop_after is None else data[:stop_after])
    if stop_after is None:
        session.finish()
    else:
        session.cancel("client disconnected")
    return session


def both(session: LiveSession) -> tuple[bool, bool]:
    return download_as_received(session), asyncio.run(read_in_steps(session, [])).as_received


def test_the_stepped_check_answers_as_the_one_pass_check() -> None:
    assert both(finished(CALL + END)) == (True, True)
    assert both(finished(UNREAD_PLACE)) == (False, False)  # decided by reading the bytes through
    assert both(finished(CALL + END, stop_after=len(CALL))) == (False, False)  # cancelled
    assert both(finished(stress_demo(events=400, calls=4).wire)) == (True, True)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_stepped_check_answers_as_the_one_pass_check_for_every_sample(name: str) -> None:
    session = finished(SAMPLES[name], dialect=None)
    one, stepped = both(session)
    assert one == stepped


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_reproducer_made_in_steps_is_the_one_pass_reproducer(name: str) -> None:
    session = finished(SAMPLES[name], dialect=None)
    session.echoed_secret = True  # the recording keeps the reproducer, whatever its calls
    pipeline = session.pipeline
    try:
        expected = redact_capture(session.live_source.stream_data, name, pipeline.dialect, registry=pipeline.registry, config=pipeline.config)
    except ValueError:
        expected = b""  # what a recording keeps of a stream that cannot be redacted
    stepped, whole = asyncio.run(read_in_steps(session, [], step=3)), read_recording(session, [])
    assert stepped == whole and stepped.reproducer == expected and stepped.echoed


def test_the_check_yields_to_the_event_loop_between_steps() -> None:
    session = finished(stress_demo(events=1000, calls=4).wire)

    async def main() -> tuple[bool, int]:
        turns = 0
        done = False

        async def other() -> None:  # another stream's work, waiting for its turn
            nonlocal turns
            while not done:
                turns += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        await asyncio.sleep(0)
        answer = (await read_in_steps(session, [], step=16)).as_received
        done = True
        await task
        return answer, turns

    answer, turns = asyncio.run(main())
    assert answer is True and turns >= 1000 // 16


def test_events_are_held_until_one_tells_the_dialect_then_released_in_order() -> None:
    events = read_capture(b"data: {\"note\": 1}\n\n" + CALL + END)
    redactor = EventRedactor()
    assert redactor.feed(events[0]) == []  # no dialect known yet
    released = redactor.feed(events[1])
    assert [e.line for e in released] == [events[0].line, events[1].line]
    rest = [m for e in events[2:] for m in redactor.feed(e)]
    held, stray = redactor.finish()
    assert held == [] and released + rest == redact_events(events) and stray == stray_argument_text(events) == []


def test_without_copies_the_redactor_reports_the_same_stray_places() -> None:
    for data in (UNREAD_PLACE, b'{"model": "llama", "message": {"content": "CANARY"}}\n', CALL + END):
        events = read_capture(data)
        keep, bare = EventRedactor(), EventRedactor(keep=False)
        kept = [m for e in events for m in keep.feed(e)]
        assert [m for e in events for m in bare.feed(e)] == []
        held, stray = keep.finish()
        assert bare.finish() == ([], stray) and kept + held == redact_events(events)
    assert stray_argument_text(read_capture(UNREAD_PLACE)) != [] and EventRedactor(keep=False).finish()[1] == [UNREAD_STREAM]


def test_the_store_calls_on_idle_once_the_last_recording_is_saved_and_no_stream_plays(tmp_path: Any) -> None:
    from toollatch.web.app import resource_dir
    from toollatch.web.live.store import LiveRenderer, LiveSessionStore
    from toollatch.web.settings import Settings
    from toollatch.web.store import Store

    settings = Settings(data_dir=tmp_path)
    store = LiveSessionStore(settings, LiveRenderer(resource_dir("templates"), settings))
    store.recordings = Store(tmp_path)
    calls: list[list[str | None]] = []

    def source() -> LiveSource:
        src = LiveSource("up/v1/chat/completions", upstream="up", endpoint="/v1/chat/completions", dialect="openai-chat", request={"model": "m", "stream": True})
        src.http_status, src.content_type = 200, "text/event-stream"
        return src

    first, second = store.create_live(source()), store.create_live(source())
    store.on_idle = lambda: calls.append([first.live_source.recording, second.live_source.recording])

    async def main() -> None:
        first.feed_bytes(CALL + END)
        first.finish()
        saving = asyncio.create_task(store.finished(first, []))
        await asyncio.sleep(0.2)
        assert calls == [] and first.live_source.recording is None  # the other stream still plays
        second.feed_bytes(CALL + END)
        second.finish()
        await store.finished(second, [])
        await saving

    asyncio.run(main())
    store.recordings.close()
    assert len(calls) == 1 and all(calls[0])  # once, after both recordings were saved


@pytest.mark.parametrize("late", ["final differs from deltas", "later final differs", "delta after final"])
def test_responses_text_a_final_text_left_aside_is_never_downloaded_as_received(late: str) -> None:
    def sse(e: dict[str, Any]) -> bytes:
        return f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()

    item = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": ""}
    delta = {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": '{"s": "CANARY"}'}
    final = '{"s": "x"}' if late == "final differs from deltas" else '{"s": "CANARY"}'
    events = [
        {"type": "response.created", "response": {"id": "r1", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        delta,
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": final},
        {"type": "response.output_item.done", "output_index": 0, "item": {**item, "arguments": '{"s": "y"}' if late == "later final differs" else final}},
        {"type": "response.completed", "response": {"id": "r1", "status": "completed"}},
    ]
    if late == "delta after final":
        events.insert(4, {**delta, "delta": "CANARY2"})
    session = finished(b"".join(sse(e) for e in events), dialect="openai-responses")
    (result,) = session.pipeline.results()
    assert [c.state.value for c in result.calls] == ["committed"]
    assert both(session) == (False, False)


def test_one_huge_event_is_read_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # a whole call's arguments in one delta (tens of MiB through the proxy) is one step of
    # seconds: no step runs on the event loop's thread, for the check and the reproducer
    import threading

    from toollatch.redaction import export

    huge = chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"s": "' + "y" * 5000}}]})
    session = finished(huge + END)  # an unterminated string: the check reads the bytes through
    feeds: list[str] = []
    real_feed = export.EventRedactor.feed

    def feed(self: Any, event: Any) -> Any:
        feeds.append(threading.current_thread().name)
        return real_feed(self, event)

    monkeypatch.setattr(export.EventRedactor, "feed", feed)
    loop_thread: list[str] = []

    async def main() -> tuple[bool, bytes | None]:
        loop_thread.append(threading.current_thread().name)
        reading = await read_in_steps(session, [])
        return reading.as_received, reading.reproducer

    answer, reproducer = asyncio.run(main())
    assert answer is False and reproducer and b"yyyyyyyy" not in reproducer
    assert feeds and loop_thread[0] not in feeds, feeds


# ---------------------------------------------------------------------- one pass


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often saving reads the stream: decodings of its bytes, assemblies (pipelines),
    readings through a redactor, ``stream_data`` joins and searches of the joined text."""
    from toollatch.redaction import export
    from toollatch.web.live import reading as reading_module

    counts = {"decode": 0, "assemble": 0, "read": 0, "stream_data": 0, "search": 0}

    def counted(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(export, "iter_capture", counted("decode", export.iter_capture))
    monkeypatch.setattr(export, "Pipeline", counted("assemble", export.Pipeline))
    monkeypatch.setattr(export, "EventRedactor", counted("read", export.EventRedactor))
    searched = counted("search", reading_module.echoed_in_texts)
    monkeypatch.setattr(reading_module, "echoed_in_texts", searched)
    monkeypatch.setattr(echo_search, "echoed_in_texts", searched)
    monkeypatch.setattr(LiveSource, "stream_data", property(counted("stream_data", LiveSource.stream_data.fget)))  # type: ignore[attr-defined]
    return counts


#: The stream is decoded and assembled once; two redactors (the reading and the masked
#: writing). With a forwarded key looked for, its joined text is searched, and so is the
#: reproducer's, as its masked events are written (never decoded again): it must not hold
#: the key either.
ONE_PASS = {"decode": 1, "assemble": 1, "read": 2, "stream_data": 1, "search": 2}


def test_saving_a_recording_decodes_and_assembles_its_stream_once(passes: dict[str, int], tmp_path: Any) -> None:
    # a call that never commits, and a forwarded key echoed in pieces: every question is
    # asked (as received? echoed? the reproducer), each answered from one decoding
    from toollatch.web.live.recordings import save_recording
    from toollatch.web.store import Store

    pieces = [KEY[i : i + 7] for i in range(0, len(KEY), 7)]
    data = b"".join(chat({"content": p}) for p in pieces) + CALL
    session = finished(data)
    assert [c.state.value for r in session.pipeline.results() for c in r.calls] == ["failed"]
    store = Store(tmp_path)
    try:
        stored = store.get(save_recording(store, session, [KEY]))
    finally:
        store.close()
    assert stored is not None and stored.body and stored.meta["download"] == "redacted" and session.echoed_secret
    assert not any(p.encode() in stored.body for p in pieces)
    assert passes == ONE_PASS

    passes.update(dict.fromkeys(passes, 0))
    stepped = asyncio.run(read_in_steps(finished(data), [KEY], step=2))
    assert stepped.echoed and stepped.reproducer and not stepped.as_received
    assert passes == ONE_PASS


def test_a_recording_kept_as_received_is_decoded_once_and_never_assembled(passes: dict[str, int]) -> None:
    reading = read_recording(finished(CALL + END), [KEY])
    assert (reading.as_received, reading.echoed, reading.reproducer) == (True, False, None)
    assert passes == {"decode": 1, "assemble": 0, "read": 1, "stream_data": 1, "search": 1}


# ---------------------------------------------------------------------- the joined text


def _chat(delta: dict[str, object]) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta}]}


def _sse(*events: object) -> bytes:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()


def _args(*fragments: str) -> bytes:
    start = _chat({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}]})
    return _sse(start, *(_chat({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}) for f in fragments))


def echoed(data: bytes) -> bool:
    return read_recording(finished(data), [KEY]).echoed


def test_unescape() -> None:
    assert unescape('a\\u0041\\"\\\\\\n') == 'aA"\\\n'


def test_found_in_text_pieces_arguments_and_escaped_forms() -> None:
    pieces = [KEY[i : i + 7] for i in range(0, len(KEY), 7)]
    assert echoed(_sse(*(_chat({"content": p}) for p in pieces)))
    assert echoed(_args('{"k": "', *pieces, '"}'))
    escaped = "".join(f"\\u{ord(c):04x}" for c in KEY)  # every character \u-escaped in argument text
    assert echoed(_args('{"k": "' + escaped[:20], escaped[20:] + '"}'))
    assert not echoed(_args('{"k": "', KEY[:10], "and", KEY[10:], '"}'))
    assert not echoed(_sse(_chat({"content": "nothing here"})))


# ------------------------------------------------------------------ an echoed key kept nowhere in pieces

ECHO = "sk-echoPIECE-Zq81Lm47Tv"


def eight_char_pieces(data: bytes, secret: str = ECHO) -> list[str]:
    """Every 8-character piece of ``secret`` found in ``data``."""
    return [secret[i : i + 8] for i in range(len(secret) - 7) if secret[i : i + 8].encode() in data]


def call_piece(args: str, *, first: bool = False, name: str = "f", index: int = 0) -> bytes:
    entry: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if first:
        entry.update(id=f"c{index}", type="function")
        entry["function"]["name"] = name
    return chat({"tool_calls": [entry]})


def test_a_key_echoed_in_two_interleaved_choices_texts_is_found() -> None:
    # two choices (n=2) in turn: choice 0's text is the key, choice 1's pieces come between
    data = chat({"content": ECHO[:9]}) + chat({"content": "zz"}, index=1) + chat({"content": ECHO[9:]}) + chat({}, "stop") + b"data: [DONE]\n\n"
    reading = read_recording(finished(data), [ECHO])
    assert reading.echoed and reading.reproducer is not None
    assert eight_char_pieces(reading.reproducer) == []


def test_a_key_echoed_in_interleaved_anthropic_blocks_is_found() -> None:
    def block(index: int, text: str) -> bytes:
        doc = {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}
        return b"event: content_block_delta\ndata: " + json.dumps(doc).encode() + b"\n\n"

    start = b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"c"}}\n\n'
    opens = b"".join(
        b'event: content_block_start\ndata: {"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}\n\n' % i for i in (0, 1)
    )
    end = b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'
    data = start + opens + block(0, ECHO[:9]) + block(1, "zz") + block(0, ECHO[9:]) + end
    assert read_recording(finished(data, dialect="anthropic"), [ECHO]).echoed


def test_a_key_echoed_as_a_committed_calls_object_key_over_two_fragments_is_not_kept() -> None:
    # a committed call keeps its object keys in the reproducer: not when they hold the key
    data = call_piece('{"' + ECHO[:10], first=True) + call_piece(ECHO[10:] + '": 1}') + END
    session = finished(data)
    reading = read_recording(session, [ECHO])
    assert session.pipeline.results()[0].calls[0].state.value == "committed"
    assert reading.echoed and reading.reproducer and eight_char_pieces(reading.reproducer) == []


def test_a_key_echoed_in_a_tool_name_over_two_chunks_is_not_kept() -> None:
    data = call_piece("{}", first=True, name=ECHO[:10]) + chat({"tool_calls": [{"index": 0, "function": {"name": ECHO[10:]}}]}) + END
    reading = read_recording(finished(data), [ECHO])
    assert reading.echoed and reading.reproducer is not None
    assert eight_char_pieces(reading.reproducer) == []


def test_a_key_echoed_in_bedrock_invoke_chunks_is_found() -> None:
    # InvokeModel streams carry each Anthropic event base64-encoded in chunk.bytes
    import base64

    from .test_eventstream import event_frame

    def chunk(doc: dict[str, Any]) -> bytes:
        return event_frame("chunk", {"bytes": base64.b64encode(json.dumps(doc).encode()).decode()})

    docs: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "model": "c"}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ECHO[:10]}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ECHO[10:]}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    ]
    session = finished(b"".join(chunk(d) for d in docs), dialect="bedrock-invoke")
    assert session.pipeline.results()[0].end == "complete"
    reading = read_recording(session, [ECHO])
    assert reading.echoed and reading.reproducer
    inner = b"".join(base64.b64decode(json.loads(line)["chunk"]["bytes"]) for line in reading.reproducer.splitlines())
    assert b"message_stop" in inner and eight_char_pieces(inner) == []


def test_a_short_forwarded_value_is_looked_for_whole_in_the_reproducer() -> None:
    # a user name or a short query value can share a piece with other text: only a key or
    # token (16 characters or more) is looked for piece by piece
    session = finished(call_piece('{"service-user-02": 1}', first=True) + END)
    session.echoed_secret = True  # the recording keeps the reproducer, whatever its calls
    assert b'"service-user-02' in (read_recording(session, ["service-user-01"]).reproducer or b"")
    assert b"service-user-02" not in (read_recording(session, ["service-user-0123456"]).reproducer or b"")


@pytest.mark.parametrize("name", ["openai-truncated", "anthropic-invalid", "canary"])
def test_a_large_recording_is_read_in_a_child_process_with_the_same_answer(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # over CHILD_READ_BYTES the reading (parse, masks, reproducer) runs in a child process
    # of its own: a worker thread would share the GIL, which one event of megabytes holds
    from toollatch.web.live import offload, reading

    session = finished(SAMPLES[name], dialect=None)
    session.echoed_secret = True  # a reproducer is made whatever the calls
    children: list[str] = []
    real = offload.in_child

    async def counted(fn: Any, *args: Any) -> Any:
        children.append(fn.__name__)
        return await real(fn, *args)

    monkeypatch.setattr(reading, "CHILD_READ_BYTES", 0)
    monkeypatch.setattr(reading, "in_child", counted)
    in_child = asyncio.run(read_in_steps(session, ["sk-not-in-the-stream-0123456789"]))
    assert children == ["read_job_whole"]
    assert in_child == read_recording(session, ["sk-not-in-the-stream-0123456789"])
    assert in_child.reproducer


def test_a_child_process_that_cannot_start_leaves_the_reading_to_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from toollatch.web.live import offload, reading

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("no processes left")

    session = finished(CALL + END)
    monkeypatch.setattr(reading, "CHILD_READ_BYTES", 0)
    monkeypatch.setattr(offload, "ProcessPoolExecutor", refuse)
    assert asyncio.run(read_in_steps(session, [])) == read_recording(session, [])
