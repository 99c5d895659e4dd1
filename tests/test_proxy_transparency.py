"""The recording proxy is transparent, end to end through the real app on uvicorn: the
upstream gets the client's request and nothing of the proxy's own; the client gets the
upstream's answer and nothing of the dashboard's own; what the session records of either
is what was exchanged."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import socket
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from toollatch.web import Settings, create_app
from toollatch.web.live.connect import USER_AGENT

from .test_live_server import finished, newest_live, serve


class RawUpstream:
    """An upstream on a raw socket: keeps each request's bytes as received (``requests``)
    and answers each with the exact bytes ``answer(request)`` returns, then closes."""

    def __init__(self, answer: Callable[[bytes], bytes]) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, name="raw-upstream", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                got = conn.recv(65536)
                if not got:
                    return
                data += got
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(v) for k, v in header_lines(head) if k.lower() == "content-length"), 0)
            while len(body) < length:
                body += conn.recv(65536)
            self.requests.append(head + b"\r\n\r\n" + body)
            conn.sendall(self.answer(self.requests[-1]))

    def close(self) -> None:
        self.sock.close()


@contextmanager
def raw_upstream(answer: Callable[[bytes], bytes]) -> Iterator[RawUpstream]:
    upstream = RawUpstream(answer)
    try:
        yield upstream
    finally:
        upstream.close()


def header_lines(head: bytes) -> list[tuple[str, str]]:
    """The header lines of a request or response head (its first line left out), in order."""
    lines = head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]
    return [(k.decode("latin-1"), v.decode("latin-1").strip()) for k, _, v in (line.partition(b":") for line in lines)]


def raw_exchange(base: str, request: bytes) -> bytes:
    """Send ``request`` byte for byte to ``base`` and return every byte of the answer."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        while got := conn.recv(65536):
            answer += got
    return answer


def http_response(status: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
    """A complete HTTP/1.1 response: ``status`` (``"200 OK"``), the header lines as given, ``body``."""
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers), "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


JSON_OK = http_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2"), ("Connection", "close")], b"{}")


def test_the_upstream_gets_the_clients_headers_and_none_of_the_proxys_own(tmp_path: Path) -> None:
    """No ``User-Agent``, ``Accept`` or ``Connection`` of the proxy's HTTP client is added to
    a request whose client sent none; repeated headers arrive repeated, in order; a header
    the client did send arrives once, with its value."""
    body = b'{"model": "m", "messages": []}'
    with raw_upstream(lambda _: JSON_OK) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream.url}))) as base:
        head = (
            "POST /proxy/up/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Foo: 1\r\nX-Foo: 2\r\nCookie: c1=1\r\nCookie: c2=2\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        answer = raw_exchange(base, head.encode() + body)
        assert answer.startswith(b"HTTP/1.1 200")
        agent = httpx.post(f"{base}/proxy/up/v1/chat/completions", content=body, headers={"user-agent": "agent/1.0", "accept": "application/json"})
        assert agent.status_code == 200
    first, second = (header_lines(r) for r in upstream.requests)
    assert [(k.lower(), v) for k, v in first if k.lower() != "host"] == [
        ("x-foo", "1"), ("x-foo", "2"), ("cookie", "c1=1"), ("cookie", "c2=2"),
        ("content-type", "application/json"), ("accept-encoding", "identity"), ("content-length", str(len(body))),
    ]
    assert [v for k, v in second if k.lower() == "user-agent"] == ["agent/1.0"]
    assert [v for k, v in second if k.lower() == "accept"] == ["application/json"]
    assert upstream.requests[0].endswith(body) and upstream.requests[1].endswith(body)


def test_direct_connect_names_the_dashboard_as_its_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLLATCH_TEST_TRANSPARENCY_KEY", "k-0123456789")
    with raw_upstream(lambda _: JSON_OK) as upstream:
        settings = Settings(data_dir=tmp_path, upstreams={"up": upstream.url}, api_key_env={"up": "TOOLLATCH_TEST_TRANSPARENCY_KEY"})
        with serve(create_app(settings)) as base:
            connected = httpx.post(f"{base}/connect", data={"upstream": "up", "api": "chat", "model": "x", "tools": "", "prompt": "hi"})
            assert connected.status_code == 303
            finished(base, connected.headers["location"].rsplit("/", 1)[1])
    sent = [(k.lower(), v) for k, v in header_lines(upstream.requests[0])]
    assert [v for k, v in sent if k == "user-agent"] == [USER_AGENT]
    assert [v for k, v in sent if k == "accept"] == ["text/event-stream"]
    assert [v for k, v in sent if k == "authorization"] == ["Bearer k-0123456789"]


UPSTREAM_DATE = "Mon, 01 Jan 2001 00:00:00 GMT"


def test_a_proxied_response_carries_the_upstreams_date_and_server_once_and_no_other(tmp_path: Path) -> None:
    """The dashboard's server adds no ``Date`` or ``Server`` header to a proxied answer: the
    upstream's arrive once, and an upstream that sends none leaves the client none. The
    dashboard's own responses are dated."""
    dated = http_response("200 OK", [("Date", UPSTREAM_DATE), ("Server", "upstream-srv/1"), ("Content-Length", "2"), ("Connection", "close")], b"{}")
    with raw_upstream(lambda _: dated) as up, raw_upstream(lambda _: JSON_OK) as bare:
        with serve(create_app(Settings(data_dir=tmp_path, upstreams={"dated": up.url, "bare": bare.url}))) as base:
            answers = [httpx.get(f"{base}/proxy/{name}/v1/models") for name in ("dated", "bare")]
            own = httpx.get(f"{base}/api/live")
    assert [(a.headers.get_list("date"), a.headers.get_list("server")) for a in answers] == [([UPSTREAM_DATE], ["upstream-srv/1"]), ([], [])]
    assert len(own.headers.get_list("date")) == 1 and own.headers.get_list("server") == []


def test_the_dashboard_runs_with_no_header_of_the_servers_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    from toollatch.web.app import run

    options: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: options.update(kw))
    run(Settings(data_dir=tmp_path))
    assert options["server_header"] is False and options["date_header"] is False


def _answer_by_method(request: bytes) -> bytes:
    """``hello`` with ``X-Method``; a HEAD gets the same head and no body, an OPTIONS a 204 with ``Allow``."""
    method = request.split(b" ", 1)[0].decode()
    if method == "OPTIONS":
        return http_response("204 No Content", [("Allow", "GET, HEAD, POST, OPTIONS"), ("X-Method", method), ("Connection", "close")])
    head = http_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5"), ("X-Method", method), ("Connection", "close")])
    return head if method == "HEAD" else head + b"hello"


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "GET", "DELETE", "PUT", "PATCH"])
def test_every_method_an_sdk_sends_is_forwarded_as_sent(tmp_path: Path, method: str) -> None:
    with raw_upstream(_answer_by_method) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream.url}))) as base:
        answer = httpx.request(method, f"{base}/proxy/up/v1/files/file-1")
    assert [r.split(b" ", 2)[:2] for r in upstream.requests] == [[method.encode(), b"/v1/files/file-1"]]
    assert answer.headers["x-method"] == method
    if method == "OPTIONS":
        assert answer.status_code == 204 and answer.headers["allow"] == "GET, HEAD, POST, OPTIONS"
    else:
        assert answer.status_code == 200 and answer.headers["content-length"] == "5"
        assert answer.content == (b"" if method == "HEAD" else b"hello")


CALL = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
SSE = (
    f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'tool_calls': [CALL]}}]})}\n\n"
    f"data: {json.dumps({'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'tool_calls'}]})}\n\n"
    "data: [DONE]\n\n"
).encode()
COMPLETION = json.dumps({
    "id": "chatcmpl-1", "object": "chat.completion", "model": "m",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [{k: v for k, v in CALL.items() if k != "index"}]}}],
}).encode()


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def _chunked(body: bytes, size: int = 7) -> bytes:
    """``body`` in ``Transfer-Encoding: chunked`` framing, ``size`` bytes a chunk."""
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def _encoded_answer(coding: str, body: bytes, content_type: str) -> bytes:
    head = http_response("200 OK", [("Content-Type", content_type), ("Content-Encoding", coding), ("Transfer-Encoding", "chunked"), ("Connection", "close")])
    return head + _chunked(body)


ENCODED = [
    ("gzip", gzip.compress),
    ("x-gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("deflate", _raw_deflate),
    ("gzip", lambda data: gzip.compress(data[:40]) + gzip.compress(data[40:])),  # two gzip members
]


@pytest.mark.parametrize(("coding", "encode"), ENCODED)
@pytest.mark.parametrize("stream", [True, False])
def test_an_encoded_answer_reaches_the_client_as_sent_and_the_session_assembles_its_content(tmp_path: Path, coding: str, encode: Callable[[bytes], bytes], stream: bool) -> None:
    """An upstream that content-encodes its answer though asked for ``identity``: the client
    gets the encoded bytes and ``Content-Encoding`` unchanged; the session, its recording
    and its calls are made of the decoded content."""
    content, content_type = (SSE, "text/event-stream") if stream else (COMPLETION, "application/json")
    encoded = encode(content)
    with raw_upstream(lambda _: _encoded_answer(coding, encoded, content_type)) as upstream:
        with serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream.url}))) as base:
            with httpx.Client() as client, client.stream("POST", f"{base}/proxy/up/v1/chat/completions", json={"model": "m", "stream": stream}) as answer:
                received = b"".join(answer.iter_raw())
            doc = finished(base, newest_live(base))
            recording = httpx.get(f"{base}/sessions/{doc['id']}/recording")
    assert answer.status_code == 200 and answer.headers["content-encoding"] == coding and received == encoded
    assert (doc["status"], doc["live"]["end"]) == ("finished", "complete"), doc.get("error")
    assert [(c["call_id"], c["name"], c["arguments"], c["state"]) for c in doc["streams"][0]["calls"]] == [("call_1", "get_weather", {"city": "Paris"}, "committed")]
    assert recording.status_code == 200 and recording.content == content


def test_direct_connect_assembles_an_encoded_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLLATCH_TEST_TRANSPARENCY_KEY", "k-0123456789")
    with raw_upstream(lambda _: _encoded_answer("gzip", gzip.compress(SSE), "text/event-stream")) as upstream:
        settings = Settings(data_dir=tmp_path, upstreams={"up": upstream.url}, api_key_env={"up": "TOOLLATCH_TEST_TRANSPARENCY_KEY"})
        with serve(create_app(settings)) as base:
            connected = httpx.post(f"{base}/connect", data={"upstream": "up", "api": "chat", "model": "x", "tools": "", "prompt": "hi"})
            doc = finished(base, connected.headers["location"].rsplit("/", 1)[1])
    assert (doc["status"], doc["live"]["end"]) == ("finished", "complete"), doc.get("error")
    assert [(c["name"], c["arguments"]) for c in doc["streams"][0]["calls"]] == [("get_weather", {"city": "Paris"})]


@pytest.mark.parametrize(
    ("coding", "body", "named"),
    [
        ("x-unknown-coding", SSE, "x-unknown-coding"),
        ("gzip", b"\x1f\x8b\x08\x00 this is no gzip member " * 4, "gzip"),
        ("gzip", gzip.compress(SSE * 64)[:-40], "gzip"),  # cut short inside the compressed data
    ],
)
def test_an_answer_whose_coding_cannot_be_undone_is_forwarded_and_the_session_says_so(tmp_path: Path, coding: str, body: bytes, named: str) -> None:
    with raw_upstream(lambda _: _encoded_answer(coding, body, "text/event-stream")) as upstream:
        with serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream.url}))) as base:
            with httpx.Client() as client, client.stream("POST", f"{base}/proxy/up/v1/chat/completions", json={"model": "m", "stream": True}) as answer:
                received = b"".join(answer.iter_raw())
            doc = finished(base, newest_live(base))
    assert answer.status_code == 200 and received == body
    assert doc["status"] == "error" and f"Content-Encoding: {named}" in doc["error"], doc.get("error")


TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


@pytest.mark.parametrize(("coding", "encode"), [("gzip", gzip.compress), ("deflate", zlib.compress)])
def test_an_encoded_request_body_is_forwarded_as_sent_and_recorded_decoded(tmp_path: Path, coding: str, encode: Callable[[bytes], bytes]) -> None:
    """A client that content-encodes its request body: the upstream gets the body and its
    ``Content-Encoding`` unchanged; the session records the request (model, tools)."""
    body = encode(json.dumps({"model": "m-coded", "stream": True, "tools": TOOLS, "messages": []}).encode())
    stream = http_response("200 OK", [("Content-Type", "text/event-stream"), ("Content-Length", str(len(SSE))), ("Connection", "close")], SSE)
    with raw_upstream(lambda _: stream) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream.url}))) as base:
        answer = httpx.post(f"{base}/proxy/up/v1/chat/completions", content=body, headers={"content-type": "application/json", "content-encoding": coding})
        doc = finished(base, newest_live(base))
    assert answer.status_code == 200 and answer.content == SSE
    sent = upstream.requests[0]
    assert sent.endswith(b"\r\n\r\n" + body) and (("content-encoding", coding) in [(k.lower(), v) for k, v in header_lines(sent)])
    assert (doc["live"]["model"], doc["live"]["tools"], doc["live"]["streaming"]) == ("m-coded", ["get_weather"], True)
    assert [(c["name"], c["state"]) for c in doc["streams"][0]["calls"]] == [("get_weather", "committed")]


def test_a_request_body_whose_coding_cannot_be_undone_is_forwarded_and_recorded_as_no_json(tmp_path: Path) -> None:
    body = b"\x1f\x8b not gzip at all"
    with raw_upstream(lambda _: JSON_OK) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream.url}))) as base:
        answer = httpx.post(f"{base}/proxy/up/v1/chat/completions", content=body, headers={"content-type": "application/json", "content-encoding": "gzip"})
        doc = finished(base, newest_live(base))
    assert answer.status_code == 200 and upstream.requests[0].endswith(b"\r\n\r\n" + body)
    assert doc["live"]["model"] is None and doc["live"]["tools"] is None


KEY = "sk-CANARYecho0123456789"


def _echoing_in_headers(request: bytes) -> bytes:
    """An upstream that echoes the request's key in its status line and response headers."""
    return http_response(
        f"200 OK {KEY}",
        [("Content-Type", f"text/event-stream; charset=utf-8; key={KEY}"), ("Set-Cookie", f"session={KEY}; Path=/"), ("X-Echo", KEY),
         ("Content-Length", str(len(SSE))), ("Connection", "close")],
        SSE,
    )


def test_a_credential_echoed_in_response_headers_reaches_the_client_and_nothing_the_dashboard_serves(tmp_path: Path) -> None:
    with raw_upstream(_echoing_in_headers) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream.url}))) as base:
        answer = httpx.post(f"{base}/proxy/up/v1/chat/completions", json={"model": "m", "stream": True}, headers={"authorization": f"Bearer {KEY}"})
        sid = finished(base, newest_live(base))["id"]
        # a client that echoes its own key in the request body: its model names the session
        httpx.post(f"{base}/proxy/up/v1/chat/completions", json={"model": f"m-{KEY}", "stream": True}, headers={"x-api-key": KEY})
        other = finished(base, newest_live(base, 1))["id"]
        paths = (f"/sessions/{sid}", f"/api/sessions/{sid}", "/api/sessions", "/api/live", "/", f"/sessions/{sid}/recording", "/api/stored",
                 f"/sessions/{sid}/export.report.json", f"/sessions/{sid}/export.md", f"/sessions/{sid}/triage", f"/sessions/{other}", f"/compare?a={sid}")
        served = {path: httpx.get(f"{base}{path}").text for path in paths}
    assert answer.headers["content-type"].endswith(f"key={KEY}") and answer.headers["set-cookie"] == f"session={KEY}; Path=/"  # the client's, unchanged
    assert answer.headers["x-echo"] == KEY
    leaked = [path for path, text in served.items() if KEY in text]
    assert leaked == [], " ".join(leaked)
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert KEY.encode() not in stored


@pytest.mark.parametrize("via", ["proxy", "connect"])
def test_no_log_line_holds_a_credential_from_the_answers_head(tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, via: str) -> None:
    """An upstream's status line and headers, as the HTTP libraries log them (httpx's request
    line at INFO, httpcore's response head at DEBUG), hold no forwarded credential the
    upstream echoed, nor the value of a credential header it set (``Set-Cookie``)."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("TOOLLATCH_TEST_TRANSPARENCY_KEY", KEY)
    own = "upstream-session-token-0123456789"

    def answer(request: bytes) -> bytes:
        return _echoing_in_headers(request).replace(b"\r\n\r\n", f"\r\nSet-Cookie: sid={own}; HttpOnly\r\n\r\n".encode(), 1)

    with raw_upstream(answer) as upstream:
        settings = Settings(data_dir=tmp_path, upstreams={"up": upstream.url}, api_key_env={"up": "TOOLLATCH_TEST_TRANSPARENCY_KEY"})
        with serve(create_app(settings)) as base:
            if via == "proxy":
                answered = httpx.post(f"{base}/proxy/up/v1/chat/completions", json={"model": "m", "stream": True}, headers={"authorization": f"Bearer {KEY}"})
                assert answered.headers.get_list("set-cookie") == [f"session={KEY}; Path=/", f"sid={own}; HttpOnly"]
            else:
                httpx.post(f"{base}/connect", data={"upstream": "up", "api": "chat", "model": "x", "tools": "", "prompt": "hi"})
            finished(base, newest_live(base))
            thread = f"uvicorn-{base.rsplit(':', 1)[1]}"
    logged = [r.getMessage() for r in caplog.records if r.threadName == thread]
    assert any("receive_response_headers.complete" in m for m in logged) and any("HTTP Request: POST" in m for m in logged)
    assert [m for m in logged if KEY in m or own in m] == []
    assert any("b'X-Echo'" in m for m in logged)  # the head is still logged, credentials replaced


@pytest.mark.parametrize(
    "path",
    [
        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude/invoke-with-response-stream",
        "/v1/fine_tuning/jobs/ft%3Agpt-4o%3Aacme%2Fteam%3Aabc/events",
        "/v1/files/a%20b/%C3%A9/%7Ex/%2e%2e/%2E/y%2f",
        "/v1/models/gemini-2.5-flash:streamGenerateContent",
    ],
)
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_path_reaches_the_upstream_as_the_client_wrote_it(tmp_path: Path, path: str, method: str) -> None:
    """Escapes stay escapes: an encoded ``/`` (an ARN in a Bedrock model id), ``:`` or ``.``
    is not decoded on the way, so neither the path's segments nor a request signature over
    its bytes change; nothing is resolved against the upstream's base URL."""
    with raw_upstream(lambda _: JSON_OK) as upstream:
        settings = Settings(data_dir=tmp_path, upstreams={"up": upstream.url, "gw": f"{upstream.url}/gateway/v1"})
        with serve(create_app(settings)) as base:
            for name in ("up", "gw"):
                answer = raw_exchange(base, f"{method} /proxy/{name}{path}?alt=sse HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}".encode())
                assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert [r.split(b" ", 2)[1].decode() for r in upstream.requests] == [f"{path}?alt=sse", f"/gateway{path}?alt=sse" if path.startswith("/v1/") else f"/gateway/v1{path}?alt=sse"]


@pytest.mark.parametrize("path", ["/v1/../../admin", "/v1/./x", "/v1/x/.."])
def test_a_path_with_a_dot_segment_is_refused_and_never_leaves_the_base(tmp_path: Path, path: str) -> None:
    with raw_upstream(lambda _: JSON_OK) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"gw": f"{upstream.url}/gateway/v1"}))) as base:
        answer = raw_exchange(base, f"GET /proxy/gw{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 400") and b"dot segment" in answer and upstream.requests == []


def test_headers_named_by_connection_stay_on_their_hop_both_ways(tmp_path: Path) -> None:
    """RFC 9110 7.6.1: a header named in ``Connection`` belongs to that connection only: the
    proxy forwards it neither upstream nor back; every other header passes."""
    answer = http_response("200 OK", [("Content-Type", "application/json"), ("Connection", "close, X-Hop-Back"), ("X-Hop-Back", "1"), ("X-Keep-Back", "2"), ("Content-Length", "2")], b"{}")
    with raw_upstream(lambda _: answer) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream.url}))) as base:
        got = raw_exchange(base, b"GET /proxy/up/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: X-Hop, close\r\nX-Hop: 1\r\nX-Keep: 2\r\n\r\n")
    sent = [k.lower() for k, _ in header_lines(upstream.requests[0])]
    back = [k.lower() for k, _ in header_lines(got)]
    assert "x-keep" in sent and "x-hop" not in sent
    assert "x-keep-back" in back and "x-hop-back" not in back


HEADS = [
    ("429 Too Many Requests", [("Content-Type", "application/json"), ("Retry-After", "7"), ("X-Request-Id", "req_1"), ("Content-Length", "2")], b"{}"),
    ("307 Temporary Redirect", [("Location", "http://127.0.0.1:9/elsewhere"), ("Content-Length", "0")], b""),
    ("204 No Content", [("X-Request-Id", "req_2")], b""),
    ("304 Not Modified", [("ETag", '"e1"')], b""),
    ("200 OK", [("Content-Type", "application/json"), ("Set-Cookie", "a=1; Path=/"), ("Set-Cookie", "b=2; Path=/"), ("X-Dup", "1"), ("X-Dup", "2"), ("Content-Length", "2")], b"{}"),
    ("503 Service Unavailable", [("Content-Type", "text/html"), ("Content-Length", "9")], b"<b>no</b>"),
]


@pytest.mark.parametrize(("status", "headers", "body"), HEADS, ids=[h[0].split()[0] for h in HEADS])
def test_the_upstreams_status_headers_and_body_reach_the_client_as_sent(tmp_path: Path, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
    """Status, every header (repeated ones repeated, in order) and body: a redirect is the
    client's to follow, an error its to read."""
    answer = http_response(status, [*headers, ("Connection", "close")], body)
    with raw_upstream(lambda _: answer) as upstream, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": upstream.url}))) as base:
        got = raw_exchange(base, b"POST /proxy/up/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
    head, _, received = got.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == status.split()[0].encode() and len(upstream.requests) == 1
    assert [(k.lower(), v) for k, v in header_lines(head) if k.lower() != "connection"] == [(k.lower(), v) for k, v in headers]
    assert received == body


def test_a_stream_one_client_left_half_read_reaches_no_other_client(tmp_path: Path) -> None:
    """A client that goes away mid-stream leaves the upstream connection closed, not pooled
    with the rest of its answer: the next requests get their own answers, whole."""

    async def upstream(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        tag = dict(scope["headers"]).get(b"x-tag", b"?").decode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for i in range(40 if tag == "A" else 3):
            await send({"type": "http.response.body", "body": f"data: {tag}{i}\n\n".encode(), "more_body": True})
            await asyncio.sleep(0.02 if tag == "A" else 0)
        await send({"type": "http.response.body", "body": b""})

    with serve(upstream) as up, serve(create_app(Settings(data_dir=tmp_path, upstreams={"up": up}))) as base:
        url = f"{base}/proxy/up/v1/chat/completions"
        with httpx.Client() as client, client.stream("POST", url, json={"stream": True}, headers={"x-tag": "A"}) as first:
            assert next(first.iter_raw()) == b"data: A0\n\n"
        others = [httpx.post(url, json={"stream": True}, headers={"x-tag": f"B{k}"}).content for k in range(3)]
    assert others == [b"".join(f"data: B{k}{i}\n\n".encode() for i in range(3)) for k in range(3)]
