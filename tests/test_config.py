"""YAML configuration: every key typed and range-checked, typos refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from toollatch.cli import main
from toollatch.core.config import AssembleConfig, ConfigError

from .conftest import ROOT


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_are_the_design_table() -> None:
    cfg = AssembleConfig()
    assert cfg.max_tool_argument_bytes == 262144 and cfg.max_tool_argument_depth == 64
    assert cfg.max_tool_calls_in_flight_assemble == 32
    assert cfg.assemble_idle_timeout_s == 60
    assert cfg.execute_before_stream_end is False and cfg.allow_pipelined_execute == ()
    assert cfg.ui_forward_partial_args is True and cfg.arguments_must_be_object is True
    assert (cfg.on_invalid_json, cfg.on_args_overflow, cfg.finalize_order) == ("error_result", "error_result", "provider_index")


def test_every_key_is_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
agent_stream_assemble:
  max_tool_argument_bytes: 1000
  max_tool_argument_depth: 12
  max_tool_calls_in_flight_assemble: 4
  max_tool_calls_per_run: 3
  assemble_idle_timeout_s: 2.5
  execute_before_stream_end: true
  allow_pipelined_execute: [get_weather]
  ui_forward_partial_args: false
  arguments_must_be_object: false
  on_invalid_json: drop_with_protocol_repair
  on_args_overflow: drop_with_protocol_repair
  finalize_order: arrival
  metrics_tool_name_label: true
  telemetry_otlp_endpoint: http://collector.internal:4318
""",
    )
    cfg = AssembleConfig.load(path)
    assert cfg.to_json() == {
        "max_tool_argument_bytes": 1000,
        "max_tool_argument_depth": 12,
        "max_tool_calls_in_flight_assemble": 4,
        "max_tool_calls_per_run": 3,
        "assemble_idle_timeout_s": 2.5,
        "execute_before_stream_end": True,
        "allow_pipelined_execute": ["get_weather"],
        "ui_forward_partial_args": False,
        "arguments_must_be_object": False,
        "on_invalid_json": "drop_with_protocol_repair",
        "on_args_overflow": "drop_with_protocol_repair",
        "finalize_order": "arrival",
        "metrics_tool_name_label": True,
        "telemetry_otlp_endpoint": "http://collector.internal:4318",
    }


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("agent_stream_assemble:\n  max_tool_argument_byte: 10\n", "did you mean 'max_tool_argument_bytes'"),
        ("agent_stream_assembl:\n  max_tool_argument_bytes: 10\n", "did you mean 'agent_stream_assemble'"),
        ("agent_stream_assemble:\n  max_tool_argument_bytes: -1\n", "max_tool_argument_bytes"),
        ("agent_stream_assemble:\n  max_tool_argument_bytes: true\n", "max_tool_argument_bytes"),
        ("agent_stream_assemble:\n  assemble_idle_timeout_s: 0\n", "assemble_idle_timeout_s"),
        ("agent_stream_assemble:\n  max_tool_argument_depth: 0\n", "max_tool_argument_depth: 0 is not a whole number from 1 to 256"),
        ("agent_stream_assemble:\n  max_tool_argument_depth: 257\n", "max_tool_argument_depth: 257 is not a whole number from 1 to 256"),
        ("agent_stream_assemble:\n  max_tool_argument_depth: 8.5\n", "max_tool_argument_depth"),
        ("agent_stream_assemble:\n  on_invalid_json: repair\n", "one of error_result, drop_with_protocol_repair"),
        ("agent_stream_assemble:\n  finalize_order: random\n", "finalize_order"),
        ("agent_stream_assemble:\n  allow_pipelined_execute: get_weather\n", "allow_pipelined_execute"),
        ("agent_stream_assemble:\n  execute_before_stream_end: yes please\n", "execute_before_stream_end"),
        ("agent_stream_assemble: [1, 2]\n", "must be a mapping"),
        ("agent_stream_assemble:\n  a: [\n", "not valid YAML at line"),
    ],
)
def test_bad_configuration_is_refused_by_name(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        AssembleConfig.load(write(tmp_path, text))
    assert needle in str(info.value)
    assert str(tmp_path / "cfg.yaml") in str(info.value)


def test_cli_refuses_a_typo_with_exit_2_and_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write(tmp_path, "agent_stream_assemble:\n  finalise_order: arrival\n")
    capture = tmp_path / "c.sse"
    capture.write_bytes(b'data: {"choices":[]}\n\ndata: [DONE]\n\n')
    assert main(["assemble", "--config", str(cfg), str(capture)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'finalise_order'" in err and "'finalize_order'" in err


def test_every_setting_is_documented_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [key for key in AssembleConfig().to_json() if f"`{key}`" not in readme]
    assert missing == []


@pytest.mark.parametrize(
    "value",
    ["collector:4318", "ftp://collector:4318", "http://:4318", "http://collector:port", 4318, ["http://c:4318"]],
)
def test_telemetry_endpoint_must_be_an_http_url(value: object) -> None:
    with pytest.raises(ConfigError, match=r"telemetry_otlp_endpoint: expected an http\(s\)://host"):
        AssembleConfig.from_mapping({"telemetry_otlp_endpoint": value})


@pytest.mark.parametrize("value", ["http://user:hunter2-secret@collector:4318", "http://collector:4318/?token=hunter2-secret"])
def test_telemetry_endpoint_refuses_credentials_without_quoting_them(value: str) -> None:
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_HEADERS") as caught:
        AssembleConfig.from_mapping({"telemetry_otlp_endpoint": value})
    assert "hunter2" not in str(caught.value)


def test_telemetry_endpoint_defaults_to_none() -> None:
    assert AssembleConfig().telemetry_otlp_endpoint is None
    assert AssembleConfig.from_mapping({"telemetry_otlp_endpoint": None}).telemetry_otlp_endpoint is None
