"""With ``ui_forward_partial_args: false``, the documents beside the session page (JSON report,
Markdown summary, the compare page and its JSON) of a live stream still arriving withhold the
byte and fragment counts of a call without a verdict, and only of such a call."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from toollatch.core.config import AssembleConfig
from toollatch.web import Settings

from .test_live_exports import chat, event, live
from .test_web_app import make_client

LIMIT = 64


def call(index: int, call_id: str | None, args: str) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if call_id:
        out.update(id=call_id, type="function")
        out["function"]["name"] = f"f{index}"
    return out


#: Call 0 fails at once (over the byte limit: a verdict while the stream runs); call 1 is open.
STREAM = event(chat({"tool_calls": [call(0, "c0", '{"a": "' + "y" * LIMIT)]})) + event(chat({"tool_calls": [call(1, "c1", '{"b": 12345, "c": "zz')]}))


def documents(forward: bool, tmp_path: Path) -> dict[str, Any]:
    config = AssembleConfig(ui_forward_partial_args=forward, max_tool_argument_bytes=LIMIT)
    with make_client(Settings(data_dir=tmp_path, config=config)) as client:
        session = live(client)
        session.feed_bytes(STREAM)
        other = live(client)
        other.feed_bytes(STREAM)
        sid = session.id
        twin = client.get(f"/api/sessions/{sid}").json()
        return {
            "twin": [(c["state"], c["bytes"], c["fragments"]) for c in twin["streams"][0]["calls"]],
            "report": [(c["bytes"], c["fragments"]) for c in client.get(f"/sessions/{sid}/export.report.json").json()["streams"][0]["calls"]],
            "markdown": [line for line in client.get(f"/sessions/{sid}/export.md").text.splitlines() if line.startswith(("| 0 |", "| 1 |"))],
            "compare": [(p["a"]["bytes"], p["a"]["fragments"]) for p in client.get(f"/api/compare?a={sid}&b={other.id}").json()["streams"][0]["calls"]],
            "compare_page": client.get(f"/compare?a={sid}&b={other.id}").text,
        }


def test_counts_of_open_calls_are_withheld_and_of_judged_calls_kept(tmp_path: Path) -> None:
    docs = documents(False, tmp_path)
    (failed, open_) = docs["twin"]
    assert failed[0] == "failed" and failed[1] > LIMIT and open_ == ("open", 0, 0)
    assert docs["report"] == [failed[1:], (0, 0)]
    assert docs["compare"] == [failed[1:], (0, 0)]
    assert "| 0 | `f0` | `c0` | FAILED |" in docs["markdown"][0]
    open_bytes = len('{"b": 12345, "c": "zz')
    assert f"| {open_bytes} |" not in docs["markdown"][1] and str(open_bytes) in json.dumps(documents(True, tmp_path / "on")["report"])
    cells = re.findall(r'<td class="num[^"]*">([\d,]+)</td>', docs["compare_page"])
    assert str(open_bytes) not in cells and f"{failed[1]:,}" in cells


def test_with_progress_forwarded_the_documents_show_the_counts_so_far(tmp_path: Path) -> None:
    docs = documents(True, tmp_path)
    open_bytes = len('{"b": 12345, "c": "zz')
    assert docs["twin"][1] == ("open", open_bytes, 1)
    assert docs["report"][1] == (open_bytes, 1) and docs["compare"][1] == (open_bytes, 1)
