"""The Markdown summary (``export --redact`` and ``/sessions/{id}/export.md``) shows every
provider-controlled string as text: rendered as GitHub renders an issue (cmark-gfm), a tool
name such as ``x](https://evil.example/t.png) ![y`` is no image or link, a value full of
backticks or pipes stays in its own table cell, and the table keeps its columns.

Before, names, ids and the provider's end detail were written raw into the table.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import cmarkgfm
import pytest

from toollatch.cli import main
from toollatch.redaction.report import code_span
from toollatch.web import Settings

from .test_web_app import make_client

HOSTILE = [
    "x](https://evil.example/t.png) ![y",
    "![i](https://evil.example/i.png)",
    "<img src=https://evil.example/p.png>",
    "a`b",
    "``x",
    "x```y`",
    "`",
    " lead and trail ",
    "*em* _u_ **b** [l](https://evil.example) <https://evil.example>",
    "pipe | in | cell",
    "back\\|slash",
    "line\nbreak\r\nand\u2028more",
]


def render(markdown: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(markdown)


@pytest.mark.parametrize("value", HOSTILE)
def test_a_code_span_renders_as_the_value_itself(value: str) -> None:
    shown = " ".join(value.splitlines())
    assert render(code_span(value)) == f"<p><code>{html.escape(shown, quote=False)}</code></p>\n"


@pytest.mark.parametrize("value", HOSTILE)
def test_a_code_span_in_a_table_cell_stays_in_its_cell(value: str) -> None:
    table = f"| a | b | c |\n|---|---|---|\n| 1 | {code_span(value, in_table=True)} | 3 |\n"
    cells = re.findall(r"<td>(.*?)</td>", render(table), re.S)
    shown = " ".join(value.splitlines())
    assert cells == ["1", f"<code>{html.escape(shown, quote=False)}</code>", "3"]


def hostile_capture() -> bytes:
    """One OpenAI Chat call per hostile name (its id hostile too), then an error event
    whose type is hostile: every string the summary shows is provider-controlled."""
    events = []
    for i, value in enumerate(HOSTILE):
        call = {"index": i, "id": f"id {value}", "type": "function", "function": {"name": value, "arguments": "{}"}}
        events.append({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    events.append({"error": {"type": "](https://evil.example/e.png)", "message": "m"}})
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def assert_all_text(markdown: str) -> None:
    page = render(markdown)
    assert "<img" not in page and "<a " not in page, page
    assert page.count("<strong>") == 1 and page.count("<em>") == 1, "only the summary's own: the stream's title, the closing note"
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)
    body = rows[1:]
    assert len(body) == len(HOSTILE)
    for row, value in zip(body, HOSTILE):
        cells = re.findall(r"<td>(.*?)</td>", row, re.S)
        shown = html.escape(" ".join(value.splitlines()), quote=False)
        assert len(cells) == 9, row
        assert cells[1] == f"<code>{shown}</code>" and cells[2] == f"<code>id {shown}</code>", row


def test_the_exported_summary_shows_provider_strings_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = tmp_path / "hostile.sse"
    capture.write_bytes(hostile_capture())
    out = tmp_path / "repro.sse"
    assert main(["export", "--redact", str(capture), "-o", str(out)]) == 0
    assert_all_text(out.with_name("repro.sse.md").read_text(encoding="utf-8"))


def test_the_dashboard_summary_shows_provider_strings_as_text(tmp_path: Path) -> None:
    with make_client(Settings(data_dir=tmp_path)) as client:
        response = client.post("/sessions/upload", files={"file": ("x](https:evil) `a`.sse", hostile_capture(), "text/plain")}, data={"rate": "max"}, follow_redirects=False)
        sid = response.headers["location"].rsplit("/", 1)[1]
        client.post(f"/sessions/{sid}/control", data={"action": "seek", "position": str(len(HOSTILE) + 1)})
        markdown = client.get(f"/sessions/{sid}/export.md").text
    assert_all_text(markdown)
    heading = render(markdown.splitlines()[0])
    assert "<a " not in heading and "<code>" in heading
