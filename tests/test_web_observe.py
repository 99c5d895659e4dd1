"""/metrics in the Prometheus text format, and the effective configuration page."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from toollatch import AssembleConfig
from toollatch.web import Settings

from .test_web_app import TestClient, make_client
from .test_web_live import play_and_collect, start


def client(tmp_path: Path, **config: object) -> TestClient:
    settings = Settings(config=AssembleConfig(**config))  # type: ignore[arg-type]
    if hasattr(settings, "data_dir"):
        settings.data_dir = tmp_path  # type: ignore[misc]
    return make_client(settings)


def run_demo(c: TestClient, demo: str) -> None:
    play_and_collect(c, start(c, demo))


def test_metrics_count_what_the_sessions_assembled(tmp_path: Path) -> None:
    with client(tmp_path) as c:
        before = {f.name for f in text_string_to_metric_families(c.get("/metrics").text)}
        assert {"tool_assemble_args_bytes", "tool_assemble_invalid_json", "tool_assemble_overflow",
                "tool_assemble_to_commit_seconds", "tool_execute_rejected_not_committed"} <= before
        run_demo(c, "openai-invalid")
        run_demo(c, "anthropic-oversized")
        text = c.get("/metrics").text
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}
        assert samples[("tool_assemble_invalid_json_total", (("provider", "openai-chat"),))] == 1
        assert samples[("tool_assemble_overflow_total", (("provider", "anthropic"),))] == 1
        assert "tool_name" not in text


def test_settings_page_shows_the_effective_configuration(tmp_path: Path) -> None:
    with client(tmp_path, max_tool_argument_bytes=4096, finalize_order="arrival") as c:
        page = c.get("/settings")
        assert page.status_code == 200
        assert "max_tool_argument_bytes" in page.text and "4096" in page.text and "arrival" in page.text
        doc = c.get("/api/settings").json()
        assert doc["agent_stream_assemble"]["max_tool_argument_bytes"] == 4096
        assert [row["metric"] for row in doc["metrics"]][0] == "tool_assemble_args_bytes"


def test_restarting_a_replay_does_not_count_it_twice(tmp_path: Path) -> None:
    def invalid_total(c: TestClient) -> float:
        doc = c.get("/api/settings").json()
        return next(row["count"] for row in doc["metrics"] if row["metric"] == "tool_assemble_invalid_json_total")

    with client(tmp_path) as c:
        sid = start(c, "anthropic-invalid")
        play_and_collect(c, sid)
        assert invalid_total(c) == 1
        c.post(f"/sessions/{sid}/control", data={"action": "restart"}, headers={"HX-Request": "true"})
        play_and_collect(c, sid)
        assert invalid_total(c) == 1
