"""One push decoder for every intake (``assembler/wire/intake.py``): files, standard input,
``latch()`` and live sessions read the same events from the same bytes, whatever the split:
SSE, JSON Lines, the AWS event stream, an HTTP head in front, gzip."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from toollatch.wire.capture import iter_file
from toollatch.core.config import AssembleConfig
from toollatch.wire.inputs import assemble_path
from toollatch.wire.intake import PushDecoder
from toollatch.web.live.session import LiveSession, LiveSource
from toollatch.web.replay.session import Status

from .conftest import CAPTURES, CASES, require_shared
from .test_eventstream import encode_events

BEDROCK = sorted((CAPTURES / "bedrock").glob("*.jsonl")) if (CAPTURES / "bedrock").is_dir() else []
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/vnd.amazon.eventstream\r\n\r\n"


def _eventstream(path: Path) -> bytes:
    return encode_events([json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()])


def _splits(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(data):
        n = rng.randint(1, 40)
        out.append(data[i : i + n])
        i += n
    return out


def _push(pieces: list[bytes]) -> list[tuple[object, object, object]]:
    decoder = PushDecoder("<x>")
    events = [e for p in pieces for e in decoder.feed(p)] + decoder.close()
    return [(e.event, e.data, e.error) for e in events]


@pytest.mark.parametrize("path", BEDROCK, ids=lambda p: p.name)
def test_event_stream_http_head_and_gzip_at_any_split_give_the_files_events(path: Path) -> None:
    require_shared(CAPTURES)
    want = [(e.event, e.data, e.error) for e in iter_file(path)]
    wire = _eventstream(path)
    for data in (wire, HEAD + wire, gzip.compress(wire), HEAD + gzip.compress(wire)):
        for seed in range(3):
            got = _push(_splits(data, seed))
            assert [d for _, d, _ in got] == [d for _, d, _ in want] and all(err is None for _, _, err in got)


def _live(pieces: list[bytes], secrets: list[str] | None = None) -> LiveSession:
    source = LiveSource("bedrock/model/m/converse-stream", upstream="bedrock", endpoint="/model/m/converse-stream", dialect=None, request={"stream": True}, secrets=secrets)
    session = LiveSession("s1", source, AssembleConfig())
    for piece in pieces:
        session.feed_bytes(piece)
    session.finish()
    return session


def _calls(results: list) -> list[tuple]:
    return [(c.name, c.call_id, c.state.value, c.reason, c.arguments) for r in results for c in r.calls]


@pytest.mark.parametrize("path", BEDROCK, ids=lambda p: p.name)
def test_a_bedrock_event_stream_live_assembles_as_from_a_file(path: Path, tmp_path: Path) -> None:
    require_shared(CAPTURES)
    wire = _eventstream(path)
    saved = tmp_path / "stream.bin"
    saved.write_bytes(wire)
    want = [r for _, r in assemble_path(saved)]
    for data in (wire, HEAD + wire):
        session = _live(_splits(data, 7))
        assert session.status is Status.FINISHED and session.error is None
        assert _calls(session.pipeline.results()) == _calls(want) and session.pipeline.results()[-1].end == want[-1].end


def test_a_credential_echoed_in_an_event_stream_payload_is_scrubbed() -> None:
    secret = "sk-live-ECHOED-credential-123456"
    events = [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": f"your key is {secret}"}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "end_turn"}},
    ]
    decoder = PushDecoder("<x>", scrub=lambda text: text.replace(secret, "[redacted]"))
    got = decoder.feed(encode_events(events)) + decoder.close()
    assert secret not in json.dumps([e.data for e in got]) and "[redacted]" in json.dumps([e.data for e in got])
    session = _live([encode_events(events)], secrets=[secret])
    assert session.status is Status.FINISHED and session.pipeline.dialect == "bedrock-converse"


def _array_of(scenario: str, dialect: str, pairs: bool) -> bytes:
    from toollatch.wire.capture import read_capture
    from toollatch.demo.mockwire import scenario_events

    events = read_capture(b"".join(scenario_events(scenario, dialect)))
    if pairs:
        return json.dumps([{"event": e.event, "data": e.data} if e.event else {"data": e.data} for e in events], indent=1).encode()
    return json.dumps([e.data for e in events if e.data != "[DONE]"]).encode()


@pytest.mark.parametrize(("dialect", "pairs"), [("openai-chat", False), ("openai-chat", True), ("anthropic", False), ("anthropic", True)])
def test_a_json_array_of_events_assembles_as_the_stream(dialect: str, pairs: bool, tmp_path: Path) -> None:
    from toollatch import latch
    from toollatch.demo.mockwire import scenario_events

    wire = tmp_path / "wire.sse"
    wire.write_bytes(b"".join(scenario_events("parallel", dialect)))
    array = tmp_path / "events.json"
    array.write_bytes(_array_of("parallel", dialect, pairs))
    want = _calls([r for _, r in assemble_path(wire)])
    assert _calls([r for _, r in assemble_path(array)]) == want
    s = latch(_splits(array.read_bytes(), 3))
    for _ in s:
        pass
    assert _calls(list(s.turn.streams)) == want and s.turn.end == "complete"


def test_an_unreadable_json_array_element_is_named() -> None:
    decoder = PushDecoder("cap.json")
    good, bad = decoder.feed(b'[{"a": 1},\n{"a": } ]') + decoder.close()
    assert good.data == {"a": 1} and bad.error is not None
    assert bad.error.startswith("cap.json:2 (byte 11): event data is not JSON")


def _through_the_proxy(path: str, body: bytes, media_type: str, request: dict[str, object], tmp_path: Path) -> dict[str, object]:
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    from toollatch.web import Settings, create_app

    from .test_live_server import finished, newest_live, serve

    async def answer(request: Request) -> StreamingResponse:
        async def pieces():  # type: ignore[no-untyped-def]
            for piece in _splits(body, 5):
                yield piece

        return StreamingResponse(pieces(), media_type=media_type)

    upstream = Starlette(routes=[Route(path, answer, methods=["POST"])])
    with serve(upstream) as remote, serve(create_app(Settings(upstreams={"up": remote}, data_dir=tmp_path / "data"))) as base:
        got = httpx.post(f"{base}/proxy/up{path}", json=request, timeout=10)
        assert got.content == body  # forwarded byte for byte
        return finished(base, newest_live(base))


def test_geminis_default_json_array_body_through_the_proxy_assembles_as_from_a_file(tmp_path: Path) -> None:
    from .test_jsonarray import gemini_body

    body = gemini_body()
    saved = tmp_path / "gemini.json"
    saved.write_bytes(body)
    want = [r for _, r in assemble_path(saved)]
    assert [(r.end, [(c.name, c.state.value) for c in r.calls]) for r in want] == [("complete", [("get_time", "committed")])]
    path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    doc = _through_the_proxy(path, body, "application/json; charset=UTF-8", {"contents": []}, tmp_path)
    assert doc["status"] == "finished" and doc["error"] is None and doc["dialect"] == "gemini"
    got = [(c["name"], c["state"], c["arguments"]) for r in doc["streams"] for c in r["calls"]]  # type: ignore[union-attr]
    assert got == [(c.name, c.state.value, c.arguments) for r in want for c in r.calls]


def test_a_keepalive_comment_wrapped_as_data_first_through_the_proxy_gets_its_verdict(tmp_path: Path) -> None:
    require_shared(CASES)
    body = (CASES / "n06-keepalive-comment-rewrapped-as-data.sse").read_bytes()
    assert body.startswith(b"data: : OPENROUTER PROCESSING\n\n")
    doc = _through_the_proxy("/v1/chat/completions", body, "text/event-stream", {"stream": True, "messages": []}, tmp_path)
    assert doc["dialect"] == "openai-chat" and doc["error"] is None
    (stream,) = doc["streams"]  # type: ignore[misc]
    assert stream["end"] == "error" and stream["calls"] == [] and ":1 (byte 0): event data is not JSON" in stream["end_detail"]


@pytest.mark.parametrize("path", BEDROCK[:2], ids=lambda p: p.name)
def test_a_bedrock_event_stream_through_the_proxy_assembles_as_from_a_file(path: Path, tmp_path: Path) -> None:
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    from toollatch.web import Settings, create_app

    from .test_live_server import finished, newest_live, serve

    require_shared(CAPTURES)
    wire = _eventstream(path)

    async def converse(request: Request) -> StreamingResponse:
        async def body():  # type: ignore[no-untyped-def]
            for piece in _splits(wire, 11):
                yield piece

        return StreamingResponse(body(), media_type="application/vnd.amazon.eventstream")

    upstream = Starlette(routes=[Route("/model/{model}/converse-stream", converse, methods=["POST"])])
    saved = tmp_path / "stream.bin"
    saved.write_bytes(wire)
    want = [r for _, r in assemble_path(saved)]
    with serve(upstream) as remote, serve(create_app(Settings(upstreams={"bedrock": remote}, data_dir=tmp_path / "data"))) as base:
        answer = httpx.post(f"{base}/proxy/bedrock/model/amazon.nova-micro-v1:0/converse-stream", json={"messages": []}, timeout=10)
        assert answer.content == wire  # forwarded byte for byte
        doc = finished(base, newest_live(base))
    assert doc["status"] == "finished" and doc["error"] is None and doc["dialect"] == want[0].dialect
    got = [(c["name"], c["call_id"], c["state"], c["reason"], c["arguments"]) for r in doc["streams"] for c in r["calls"]]
    assert got == [(n, i, s, r, a) for n, i, s, r, a in _calls(want)]
