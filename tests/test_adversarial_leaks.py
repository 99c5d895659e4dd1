"""Standing adversarial suite: canaries in every failing call, through every route, looked
for in everything the dashboard and the CLI show, serve, store or log.

A canary is put in a call's argument text as an object key, a string value and a number,
and in a provider error's free text. Each call fails in one of the ways a call can fail
(truncated, invalid JSON, schema, cancelled, too large, too deep, a provider error event)
and is fed by every route: an upload, a paste, the proxy (a local fake upstream), direct
connect. Every page, JSON twin, triage partial, export, recording, websocket frame, log
line, ``/metrics`` and the SQLite files (those of live streams: an upload is stored as
given) are then searched for any 8-character piece of a
canary: there must be none. The CLI is searched the same way (without ``--reveal``).
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send
from websockets.sync.client import connect as ws_connect

from toollatch.cli import main
from toollatch.core.config import AssembleConfig
from toollatch.web import Settings, create_app

from .test_live_server import finished, newest_live, serve, wait_for
from .test_web_app import WS_BASE, TestClient, make_client

KEY = "kCANARYq7Wz3Lp9"  # an object key
ARG = "aCANARYm4Rx8Tn2"  # a string value
NUM = "73556081234567"  # a number
ERR = "eCANARYv5Hs1Jd6"  # a provider error's free text
CANARIES = (KEY, ARG, NUM, ERR)
API_KEY = "sk-advCANARY-Gf4Kp8Wq2Zt6Ym1Rn5"

KINDS = ("truncated", "invalid", "schema", "cancelled", "too_large", "too_deep", "error_event")
CONFIG = AssembleConfig(max_tool_argument_bytes=300, max_tool_argument_depth=8)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {"type": "object", "required": ["q"], "additionalProperties": False, "properties": {"q": {"type": "string"}}},
        },
    }
]
DONE = re.compile(r'class="pill status-(finished|cancelled|error)"')
BODY = f'{{"{KEY}": "{ARG}", "n": {NUM}'


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-adv", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _start() -> dict[str, Any]:
    return _chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_adv", "type": "function", "function": {"name": "lookup", "arguments": ""}}]})


def _args(text: str) -> dict[str, Any]:
    return _chunk({"tool_calls": [{"index": 0, "function": {"arguments": text}}]})


def events(kind: str) -> list[Any]:
    """The provider events of a stream whose one call fails in way ``kind`` (``[DONE]`` as a string)."""
    end: list[Any] = [_chunk({}, "tool_calls"), "[DONE]"]
    if kind in ("truncated", "cancelled"):
        return [_start(), _args(BODY[:9]), _args(BODY[9:] + ', "more": "')]
    if kind == "invalid":
        return [_start(), _args(BODY), _args("]"), *end]
    if kind == "schema":
        return [_start(), _args(BODY), _args("}"), *end]
    if kind == "too_large":
        return [_start(), _args(BODY + ', "pad": "'), _args("p" * 400 + '"}'), *end]
    if kind == "too_deep":
        return [_start(), _args(f'{{"{KEY}": ' + "[" * 10), _args(f'"{ARG}", {NUM}' + "]" * 10 + "}"), *end]
    if kind == "error_event":
        message = f"could not parse arguments {BODY} ({ERR})"
        return [_start(), _args(BODY), {"error": {"message": message, "type": "server_error", "code": "server_error"}}]
    raise AssertionError(kind)


def sse(items: list[Any]) -> bytes:
    return "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in items).encode()


def pieces(secret: str, n: int = 8) -> set[str]:
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


def hits(text: str, secrets: tuple[str, ...] = CANARIES) -> list[str]:
    """The canaries any 8-character piece of which is in ``text`` (HTML entities undone too)."""
    plain = html.unescape(text)
    return [s for s in secrets if any(p in text or p in plain for p in pieces(s))]


class Tally:
    """What was tried and what held: one entry per (route, kind, output)."""

    def __init__(self) -> None:
        self.tried = 0
        self.leaks: list[str] = []

    def check(self, route: str, kind: str, output: str, text: str | bytes, secrets: tuple[str, ...] = CANARIES) -> None:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        self.tried += 1
        found = hits(text, secrets)
        if found:
            self.leaks.append(f"{route}/{kind}/{output}: {found}")


def stored_bytes(data_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file())


def check_session_outputs(tally: Tally, route: str, kind: str, get: Any, sid: str, *, live: bool, secrets: tuple[str, ...] = CANARIES) -> None:
    urls = [f"/sessions/{sid}{o}" for o in ("", "/triage", "/export.sse", "/export.report.json", "/export.md")] + [f"/api/sessions/{sid}"]
    if live:
        urls.append(f"/sessions/{sid}/recording")
    for url in urls:
        response = get(url)
        assert response.status_code == 200, (route, kind, url, response.status_code)  # a leak-free error page proves nothing
        tally.check(route, kind, url.replace(sid, "{id}"), response.content, secrets)


# ------------------------------------------------------------------ uploads and pastes


def _play(client: TestClient, sid: str, kind: str) -> list[str]:
    with client.websocket_connect(f"{WS_BASE}/ws/sessions/{sid}") as ws:
        frames = [ws.receive_text()]
        if kind == "cancelled":  # three events in, the person presses Stop
            client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": "3"}, headers={"HX-Request": "true"})
            client.post(f"/sessions/{sid}/control", data={"action": "cancel"}, headers={"HX-Request": "true"})
        else:
            client.post(f"/sessions/{sid}/control", data={"action": "play"}, headers={"HX-Request": "true"})
        while not DONE.search(frames[-1]):
            frames.append(ws.receive_text())
    return frames


def test_uploads_and_pastes_never_show_a_failed_calls_text(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    tally = Tally()
    data_dir = tmp_path / "data"
    states: dict[tuple[str, str], str] = {}
    with make_client(Settings(config=CONFIG, data_dir=data_dir)) as client:
        for route in ("upload", "paste"):
            for kind in KINDS:
                raw = sse(events(kind) if kind != "cancelled" else [*events(kind), _args("x"), _chunk({}, "tool_calls"), "[DONE]"])
                form: dict[str, Any] = {"rate": "12"}
                files: dict[str, Any] = {"tools": ("tools.json", json.dumps(TOOLS).encode(), "application/json")}
                if route == "upload":
                    files["file"] = (f"{kind}.sse", raw, "text/plain")
                else:
                    form["paste"] = raw.decode()
                response = client.post("/sessions/upload", files=files, data=form, follow_redirects=False)
                assert response.status_code == 303, response.text[:300]
                sid = response.headers["location"].rsplit("/", 1)[1]
                client.post(f"/sessions/{sid}/control", data={"action": "pause"})
                for i, frame in enumerate(_play(client, sid, kind)):
                    tally.check(route, kind, f"ws frame {i}", frame)
                check_session_outputs(tally, route, kind, client.get, sid, live=False)
                doc = client.get(f"/api/sessions/{sid}").json()
                states[(route, kind)] = doc["streams"][0]["calls"][0]["state"]
        for page in ("/", "/api/sessions", "/api/stored", "/metrics"):
            response = client.get(page)
            assert response.status_code == 200, page
            tally.check("all", "-", page, response.content)
    # The SQLite file keeps an upload or paste as given (the person's own capture, which
    # Reveal text reads again); what a proxied or connected stream stores is checked below.
    tally.check("all", "-", "log", "\n".join(f"{r.getMessage()} {r.args!r}" for r in caplog.records))
    assert set(states.values()) <= {"failed", "cancelled"} and "cancelled" in states.values(), states
    assert tally.leaks == [], tally.leaks
    assert tally.tried >= 2 * len(KINDS) * 7


def test_the_canary_demo_shows_nothing_before_commit_and_nothing_while_values_are_masked() -> None:
    from toollatch.demo.demos import CANARY_SECRET

    tally = Tally()
    with make_client() as client:
        response = client.post("/sessions", data={"kind": "demo", "name": "canary", "rate": "12"}, follow_redirects=False)
        sid = response.headers["location"].rsplit("/", 1)[1]
        client.post(f"/sessions/{sid}/control", data={"action": "pause"})
        for i, frame in enumerate(_play(client, sid, "demo")):
            tally.check("demo", "committed", f"ws frame {i}", frame, (CANARY_SECRET,))
        check_session_outputs(tally, "demo", "committed", client.get, sid, live=False, secrets=(CANARY_SECRET,))
        assert client.get(f"/api/sessions/{sid}").json()["streams"][0]["calls"][0]["state"] == "committed"
    assert tally.leaks == [], tally.leaks


# ------------------------------------------------------------------ proxy and direct connect


def fake_upstream(echo_key_in_text: bool = False) -> Any:
    """A provider that answers each request with the stream of the failing way named by its
    ``model``; ``cancelled`` holds the stream open after three events until the client goes."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body or b"{}")
        kind = str(request.get("model"))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        if kind in ("echo", "echo_in_key"):  # the forwarded key echoed in pieces, and a call that commits
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()[7:]
            quarter = len(auth) // 4 + 1
            items: list[Any] = [_chunk({"role": "assistant", "content": "your key: "})]
            if kind == "echo":  # in four text pieces
                items += [_chunk({"content": auth[i : i + quarter]}) for i in range(0, len(auth), quarter)]
                items += [_start(), _args('{"q": "ok"}'), _chunk({}, "tool_calls"), "[DONE]"]
            else:  # as an object key of a call that commits, over two fragments (a committed call's keys are kept)
                items += [_start(), _args('{"q": "ok", "' + auth[:quarter]), _args(auth[quarter:] + '": 1}'), _chunk({}, "tool_calls"), "[DONE]"]
            await send({"type": "http.response.body", "body": sse(items), "more_body": False})
            return
        for item in events(kind):
            await send({"type": "http.response.body", "body": sse([item]), "more_body": True})
            await asyncio.sleep(0.01)
        if kind == "cancelled":
            try:
                await asyncio.wait_for(receive(), timeout=10)  # until the client goes away
            except TimeoutError:
                pass
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    monkeypatch.setenv("TOOLLATCH_ADV_KEY", API_KEY)
    data_dir = tmp_path / "data"
    with serve(fake_upstream()) as upstream:
        settings = Settings(config=CONFIG, data_dir=data_dir, upstreams={"fake": upstream}, api_key_env={"fake": "TOOLLATCH_ADV_KEY"}, mock_delay=0.0)
        with serve(create_app(settings)) as base:
            yield base, data_dir


def _agent_request(base: str, body: dict[str, Any], headers: dict[str, str]) -> None:
    try:
        with httpx.stream("POST", f"{base}/proxy/fake/v1/chat/completions", json=body, headers=headers, timeout=10) as response:
            for _ in response.iter_bytes():
                pass
    except httpx.HTTPError:
        pass  # the stream stopped under it: what a Stop does


def _first_frame(base: str, sid: str) -> str:
    with ws_connect(f"{base.replace('http', 'ws')}/ws/sessions/{sid}") as ws:
        return str(ws.recv(timeout=5))


def test_proxy_and_direct_connect_never_show_a_failed_calls_text(live: tuple[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    base, data_dir = live
    tally = Tally()
    secrets = (*CANARIES, API_KEY)
    count = 0
    with httpx.Client(base_url=base, timeout=10) as client:
        for route in ("proxy", "connect"):
            for kind in KINDS:
                if route == "proxy":
                    body = {"model": kind, "stream": True, "messages": [{"role": "user", "content": "go"}], "tools": TOOLS}
                    headers = {"Authorization": f"Bearer {API_KEY}"}
                    if kind == "cancelled":  # the agent's request runs on while a person presses Stop
                        agent = threading.Thread(target=_agent_request, args=(base, body, headers), daemon=True)
                        agent.start()
                        sid = newest_live(base, count)
                        wait_for(lambda: client.get(f"/api/sessions/{sid}").json()["live"]["size"] > 0, what="bytes")
                        tally.check(route, kind, "ws frame (open)", _first_frame(base, sid), secrets)
                        client.post(f"/sessions/{sid}/control", data={"action": "cancel"})
                        agent.join(timeout=10)
                    else:
                        response = client.post("/proxy/fake/v1/chat/completions", json=body, headers=headers)
                        assert response.status_code == 200
                        sid = newest_live(base, count)
                else:  # direct connect; a Stop is pressed on the cancelled one
                    form = {"upstream": "fake", "api": "chat", "model": kind, "tools": json.dumps(TOOLS), "prompt": "go"}
                    response = client.post("/connect", data=form)
                    assert response.status_code == 303, response.text[:300]
                    sid = response.headers["location"].rsplit("/", 1)[1]
                    if kind == "cancelled":
                        wait_for(lambda: client.get(f"/api/sessions/{sid}").json()["live"]["size"] > 0, what="bytes")
                        tally.check(route, kind, "ws frame (open)", _first_frame(base, sid), secrets)
                        client.post(f"/sessions/{sid}/control", data={"action": "cancel"})
                count += 1
                doc = finished(base, sid)
                assert doc["streams"][0]["calls"][0]["state"] in ("failed", "cancelled"), (route, kind, doc["streams"])
                tally.check(route, kind, "ws frame", _first_frame(base, sid), secrets)
                check_session_outputs(tally, route, kind, lambda url: client.get(url), sid, live=True, secrets=secrets)
        for page in ("/", "/api/sessions", "/api/live", "/api/stored", "/metrics"):
            response = client.get(page)
            assert response.status_code == 200, page
            tally.check("all", "-", page, response.content, secrets)
    tally.check("all", "-", "sqlite", stored_bytes(data_dir), secrets)
    ours = [r for r in caplog.records if r.name.split(".")[0] not in ("httpx2",)]
    tally.check("all", "-", "log", "\n".join(f"{r.getMessage()} {r.args!r}" for r in ours), secrets)
    assert tally.leaks == [], tally.leaks
    assert count == 2 * len(KINDS)


@pytest.mark.parametrize("kind", ["echo", "echo_in_key"])
def test_a_key_echoed_in_pieces_is_never_stored_or_served(tmp_path: Path, kind: str) -> None:
    data_dir = tmp_path / "data"
    with serve(fake_upstream()) as upstream:
        with serve(create_app(Settings(data_dir=data_dir, upstreams={"fake": upstream}))) as base:
            body = {"model": kind, "stream": True, "messages": [{"role": "user", "content": "go"}]}
            response = httpx.post(f"{base}/proxy/fake/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {API_KEY}"})
            assert response.status_code == 200
            assert API_KEY not in response.text and API_KEY[:8] in response.text  # the client gets what the upstream sent, in pieces
            doc = finished(base, newest_live(base))
            assert doc["streams"][0]["calls"][0]["state"] == "committed"
            recording = httpx.get(f"{base}/sessions/{doc['id']}/recording").content
            exported = httpx.get(f"{base}/sessions/{doc['id']}/export.sse")
    stored = stored_bytes(data_dir)
    assert exported.status_code == 200 and recording
    for piece in pieces(API_KEY):
        assert piece.encode() not in recording, piece
        assert piece.encode() not in exported.content, piece
        assert piece.encode() not in stored, piece


# ------------------------------------------------------------------ the command line


def test_the_command_line_never_prints_a_failed_calls_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tally = Tally()
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    config = tmp_path / "config.yaml"
    config.write_text("agent_stream_assemble:\n  max_tool_argument_bytes: 300\n  max_tool_argument_depth: 8\n")
    for kind in KINDS:
        src = tmp_path / f"{kind}.sse"
        src.write_bytes(sse(events(kind)))
        args = ["--tools", str(tools), "--config", str(config)]
        for extra in ([], ["--json"]):
            main(["assemble", str(src), *args, *extra])
            out, err = capsys.readouterr()
            tally.check("cli", kind, f"assemble {' '.join(extra)}", out + err)
        out_path = tmp_path / f"{kind}.redacted.sse"
        assert main(["export", "--redact", "-o", str(out_path), str(src), *args]) == 0
        capsys.readouterr()
        for suffix in ("", ".report.json", ".md"):
            tally.check("cli", kind, f"export{suffix}", Path(f"{out_path}{suffix}").read_bytes())
    assert tally.leaks == [], tally.leaks
    main(["assemble", "--reveal", str(tmp_path / "error_event.sse")])  # asked for: the provider's text is shown
    assert ERR in capsys.readouterr().out


@pytest.mark.parametrize("early", ["too_large", "shared_id"])
def test_a_word_of_a_call_that_failed_before_the_end_is_hidden_in_every_output(early: str, tmp_path: Path) -> None:
    """A call that fails before the stream ends (too large; its id taken) releases its text,
    so its buffer can no longer be searched for the words of the end: an identifier-shaped
    error type quoting it was shown on the card, the JSON twin, export.md, the report and in
    websocket frames. Such a word (outside the providers' vocabulary) is now hidden."""
    word = "zq_canary_secret_w7"

    def start(i: int, cid: str) -> dict[str, Any]:
        return _chunk({"tool_calls": [{"index": i, "id": cid, "type": "function", "function": {"name": "lookup", "arguments": ""}}]})

    def args(i: int, text: str) -> dict[str, Any]:
        return _chunk({"tool_calls": [{"index": i, "function": {"arguments": text}}]})

    if early == "too_large":  # over CONFIG's 300 bytes: it fails at once, its text released
        items = [start(0, "call_a"), args(0, '{"q": "' + word + '", "pad": "' + "p" * 400), start(1, "call_b"), args(1, '{"q": "x"')]
    else:  # the later call carries the first one's id: it fails at its start, its text never kept
        items = [start(0, "call_a"), args(0, '{"q": "x"'), start(1, "call_a"), args(1, '{"q": "' + word + '"')]
    raw = sse([*items, {"error": {"message": "m", "type": word, "code": word}}])
    tally = Tally()
    with make_client(Settings(config=CONFIG, data_dir=tmp_path / "d")) as client:
        files = {"tools": ("tools.json", json.dumps(TOOLS).encode(), "application/json"), "file": ("x.sse", raw, "text/plain")}
        sid = client.post("/sessions/upload", files=files, data={"rate": "12"}, follow_redirects=False).headers["location"].rsplit("/", 1)[1]
        client.post(f"/sessions/{sid}/control", data={"action": "pause"})
        for i, frame in enumerate(_play(client, sid, "error_event")):
            tally.check("upload", early, f"ws frame {i}", frame, (word,))
        check_session_outputs(tally, "upload", early, client.get, sid, live=False, secrets=(word,))
    assert tally.leaks == [], tally.leaks


WORD = "zq_canary_w9"  # identifier-shaped: passes the word shape of a reason, type or code
_ADDED = {"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_A", "name": "lookup", "arguments": ""}}


def _r_delta(text: str) -> dict[str, Any]:
    return {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": text}


def _r_done(text: str) -> dict[str, Any]:
    return {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": text}


def _gemini(parts: list[Any], reason: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if reason:
        candidate["finishReason"] = reason
    return {"candidates": [candidate]}


def _a_event(doc: dict[str, Any]) -> dict[str, Any]:
    return {"_event": doc["type"], **doc}


def _named_sse(docs: list[dict[str, Any]]) -> bytes:
    return "".join(f"event: {d['type']}\ndata: {json.dumps(d)}\n\n" if "type" in d else f"data: {json.dumps(d)}\n\n" for d in docs).encode()


_CREATED = {"type": "response.created", "response": {"id": "r"}}
#: Argument text that reaches a stream end's detail in ways no call buffer shows: text a
#: final text replaced, text an adapter dropped, text an adapter never passed on (Gemini
#: partialArgs still open), a call of an earlier stream, text after a pipelined commit.
WORD_ROUTES: dict[str, tuple[str, bytes, list[str]]] = {
    "responses-final-replaces-deltas": ("openai-responses", _named_sse([_CREATED, _ADDED, _r_delta('{"q": "' + WORD + '"}'), _r_done('{"q": "x"}'),
        {"type": "response.incomplete", "response": {"id": "r", "incomplete_details": {"reason": WORD}}}]), []),
    "responses-delta-after-done": ("openai-responses", _named_sse([_CREATED, _ADDED, _r_done('{"q": "x"'), _r_delta(WORD + '"}'),
        {"type": "response.failed", "response": {"id": "r", "error": {"code": WORD, "message": "m"}}}]), []),
    "gemini-open-partial-args": ("gemini", _named_sse([
        _gemini([{"functionCall": {"name": "lookup", "partialArgs": [{"jsonPath": "$.q", "stringValue": WORD}], "willContinue": True}}]), _gemini([], WORD)]), []),
    "responses-earlier-stream": ("openai-responses", _named_sse([{"type": "response.created", "response": {"id": "r1"}}, _ADDED, _r_delta('{"q": "' + WORD),
        {"type": "response.incomplete", "response": {"id": "r1", "incomplete_details": {"reason": "max_output_tokens"}}},
        {"type": "response.created", "response": {"id": "r2"}}, {"type": "response.failed", "response": {"id": "r2", "error": {"code": WORD, "message": "m"}}}]), []),
    "anthropic-after-pipelined-commit": ("anthropic", _named_sse([
        {"type": "message_start", "message": {"id": "m", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"q": "x"}'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"q": "' + WORD + '"}'}},
        {"type": "error", "error": {"type": WORD, "message": "m"}}]), ["agent_stream_assemble:", "  execute_before_stream_end: true", "  allow_pipelined_execute: [lookup]"]),
}


@pytest.mark.parametrize("route", sorted(WORD_ROUTES))
def test_a_provider_word_quoting_text_no_buffer_shows_is_hidden_from_the_command_line(route: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Only the providers' documented words are shown as they are in a stream's end: a word
    that quotes argument text reached it by routes no buffer search can see."""
    dialect, raw, config = WORD_ROUTES[route]
    (tmp_path / "in.sse").write_bytes(raw)
    (tmp_path / "t.json").write_text(json.dumps(TOOLS))
    args = ["assemble", "--json", "--dialect", dialect, "--tools", str(tmp_path / "t.json")]
    if config:
        (tmp_path / "c.yaml").write_text("\n".join(config) + "\n")
        args += ["--config", str(tmp_path / "c.yaml")]
    main([*args, str(tmp_path / "in.sse")])
    out = capsys.readouterr().out
    assert WORD not in out and "hidden value, 12 characters" in out


def upload_leaks(tmp_path: Path, route: str, raw: bytes, name: str = "x.sse") -> list[str]:
    """Upload ``raw`` (file ``name``) with :data:`TOOLS`, play it, and grep every websocket
    frame and every output of the session for :data:`WORD`: the leaks found."""
    tally = Tally()
    with make_client(Settings(data_dir=tmp_path / "d")) as client:
        files = {"tools": ("tools.json", json.dumps(TOOLS).encode(), "application/json"), "file": (name, raw, "application/octet-stream")}
        sid = client.post("/sessions/upload", files=files, data={"rate": "12"}, follow_redirects=False).headers["location"].rsplit("/", 1)[1]
        client.post(f"/sessions/{sid}/control", data={"action": "pause"})
        for i, frame in enumerate(_play(client, sid, route)):
            tally.check("upload", route, f"ws frame {i}", frame, (WORD,))
        check_session_outputs(tally, "upload", route, client.get, sid, live=False, secrets=(WORD,))
    assert tally.tried > 5
    return tally.leaks


@pytest.mark.parametrize("route", ["gemini-open-partial-args", "responses-earlier-stream", "responses-final-replaces-deltas"])
def test_a_provider_word_quoting_text_no_buffer_shows_is_hidden_in_every_output(route: str, tmp_path: Path) -> None:
    assert upload_leaks(tmp_path, route, WORD_ROUTES[route][1]) == []


def test_a_gemini_block_reason_quoting_argument_text_is_masked_in_every_output(tmp_path: Path) -> None:
    """promptFeedback.blockReason was copied as it came into the reproducer (export.sse)."""
    raw = _named_sse([
        _gemini([{"functionCall": {"name": "lookup", "partialArgs": [{"jsonPath": "$.q", "stringValue": WORD}], "willContinue": True}}]),
        {"promptFeedback": {"blockReason": WORD, "blockReasonMessage": WORD}},
    ])
    assert upload_leaks(tmp_path, "gemini-block-reason", raw) == []
