"""Adversarial review (second round): ``ui_forward_partial_args: false`` on the paths beside
the session page.

Each test states the correct behaviour and is marked ``xfail(strict=True)`` while the bug
exists, so the suite passes and the test flips to a failure (XPASS) once it is fixed.
"""

from __future__ import annotations

from pathlib import Path


from toollatch.core.config import AssembleConfig
from toollatch.web import Settings

from .test_live_exports import OPEN, REST, live
from .test_web_app import make_client


def test_counts_of_a_call_without_verdict_are_withheld_from_every_document(tmp_path: Path) -> None:
    with make_client(Settings(data_dir=tmp_path, config=AssembleConfig(ui_forward_partial_args=False))) as client:
        session = live(client)
        session.feed_bytes(OPEN)
        other = live(client)
        other.feed_bytes(OPEN + REST)
        other.finish()
        sid = session.id
        twin = client.get(f"/api/sessions/{sid}").json()
        assert [(c["state"], c["bytes"], c["fragments"]) for c in twin["calls"]] == [("open", 0, 0)]  # the twin withholds them
        report = client.get(f"/sessions/{sid}/export.report.json").json()
        markdown = client.get(f"/sessions/{sid}/export.md").text
        compared = client.get(f"/api/compare?a={sid}&b={other.id}").json()
    (call,) = report["streams"][0]["calls"]
    assert (call["bytes"], call["fragments"]) == (0, 0), call
    (row,) = [line for line in markdown.splitlines() if line.startswith("| 0 |")]
    assert "| 70 |" not in row, row
    (pair,) = compared["streams"][0]["calls"]
    assert (pair["a"]["bytes"], pair["a"]["fragments"]) == (0, 0), pair["a"]
