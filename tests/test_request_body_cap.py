"""Request bodies over their cap are refused while they stream in: the app stops reading at
the cap (413), so a chunked body of any size never sits whole in memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from toollatch.web import Settings, create_app

from .test_web_app import BASE

LIMIT = 256 * 1024
CHUNK = 16 * 1024
OFFERED = 64 * 1024 * 1024  # what the client would send: far over the limit


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(data_dir=tmp_path, upstreams={"up": "http://127.0.0.1:9"}, max_upload_bytes=LIMIT))
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as c:
        yield c


def post_chunked(client: TestClient, path: str, content_length: int | None = None) -> tuple[int, int]:
    """POST a body of :data:`OFFERED` bytes in :data:`CHUNK` pieces straight to the ASGI app
    (no ``Content-Length`` unless given: chunked); returns (status, bytes the app pulled)."""
    pulled = 0
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        if pulled >= OFFERED:
            return {"type": "http.disconnect"}
        pulled += CHUNK
        return {"type": "http.request", "body": b"x" * CHUNK, "more_body": pulled < OFFERED}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    headers = [(b"host", b"127.0.0.1:8765"), (b"content-type", b"application/json")]
    if content_length is not None:
        headers.append((b"content-length", str(content_length).encode()))
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8765),
    }

    async def run() -> None:
        await client.app(scope, receive, send)  # type: ignore[arg-type]

    client.portal.call(run)  # type: ignore[union-attr]
    return status, pulled


def test_a_chunked_proxy_body_over_the_cap_is_refused_at_the_cap(client: TestClient) -> None:
    status, pulled = post_chunked(client, "/proxy/up/v1/chat/completions")
    assert status == 413
    assert pulled <= LIMIT + CHUNK  # read up to the cap, never the 64 MiB offered


def test_a_declared_length_over_the_cap_is_refused_before_reading(client: TestClient) -> None:
    status, pulled = post_chunked(client, "/proxy/up/v1/chat/completions", content_length=OFFERED)
    assert status == 413 and pulled == 0


def test_a_mirror_body_over_its_cap_is_refused_at_the_cap(client: TestClient) -> None:
    from toollatch.web.live.mirror import MAX_BODY

    status, pulled = post_chunked(client, "/api/mirror")
    assert status == 400
    assert pulled <= MAX_BODY + CHUNK


def test_a_session_create_body_is_capped(client: TestClient) -> None:
    from toollatch.web.pages.api import MAX_CREATE_BYTES

    status, pulled = post_chunked(client, "/api/sessions")
    assert status == 413 and pulled <= MAX_CREATE_BYTES + CHUNK
