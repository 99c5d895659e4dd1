"""A provider error's free text is untrusted: its type/code is shown, its message only when
a person asks (``--reveal``, *Reveal text*), never in a reason, report or reproducer."""

from __future__ import annotations

from pathlib import Path

import pytest

from toollatch.cli import main
from toollatch.dialects.base import provider_error
from toollatch.core.model import StreamError

from .test_web_app import make_client
from .test_web_triage import upload

SECRET = "hunter2-SECRET"
RAW = (
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"search","arguments":"{\\"q\\": \\"hun"}}]}}]}\n\n'
    b'data: {"error":{"message":"could not parse arguments {\\"q\\": \\"hunter2-SECRET\\"","type":"server_error"}}\n\n'
)


def test_the_detail_names_type_and_code_and_keeps_the_message_apart() -> None:
    assert provider_error({"type": "server_error", "code": 500, "message": "m"}) == StreamError("server_error: 500", "m")
    assert provider_error("a bare text") == StreamError("provider error", "a bare text")
    assert provider_error({"message": {"nested": 1}}, prefix="error: ") == StreamError("error", "{'nested': 1}")
    assert provider_error(None, (), prefix="ThrottlingException") == StreamError("ThrottlingException", None)
    assert provider_error({"type": 'could not parse {"q": "hunter2"}', "message": "m"}).detail == "(hidden code, 32 characters)"


def test_the_cli_shows_the_message_only_with_reveal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "err.sse"
    src.write_bytes(RAW)
    for argv in (["assemble", str(src)], ["assemble", str(src), "--json"], ["assemble", str(src), "--history"]):
        main(argv)
        out = capsys.readouterr().out
        assert SECRET not in out and "server_error" in out, argv
    assert main(["export", "--redact", "-o", str(tmp_path / "o.sse"), str(src)]) == 0
    for name in ("o.sse", "o.sse.report.json", "o.sse.md"):
        assert SECRET not in (tmp_path / name).read_text(), name
    main(["assemble", "--reveal", str(src)])
    assert SECRET in capsys.readouterr().out


def test_the_dashboard_shows_the_message_only_behind_reveal() -> None:
    with make_client() as client:
        sid = upload(client, "err.sse", RAW)
        for url in (f"/sessions/{sid}", f"/api/sessions/{sid}", f"/sessions/{sid}/triage", f"/sessions/{sid}/export.sse",
                    f"/sessions/{sid}/export.md", f"/sessions/{sid}/export.report.json"):
            assert SECRET not in client.get(url).text, url
        doc = client.get(f"/api/sessions/{sid}").json()
        assert doc["streams"][0]["calls"][0]["reason"] == "stream_error: server_error"
        assert client.get(f"/sessions/{sid}/triage").text.count("message is hidden") == 1
        client.post(f"/sessions/{sid}/reveal", data={"reveal": "on"})
        assert SECRET in client.get(f"/sessions/{sid}/triage").text
        client.post(f"/sessions/{sid}/reveal", data={"reveal": "off"})
        assert SECRET not in client.get(f"/sessions/{sid}/triage").text
