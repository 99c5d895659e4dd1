"""Assembly settings (DESIGN.md, section ``agent_stream_assemble``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration file or value is unusable; the message names the key."""


@dataclass(frozen=True, slots=True)
class AssembleConfig:
    """Limits and policies of the completion latch.

    ``max_tool_argument_bytes`` counts UTF-8 bytes per call; ``assemble_idle_timeout_s``
    is in seconds.
    """

    max_tool_argument_bytes: int = 262_144
    max_tool_calls_in_flight_assemble: int = 32
    assemble_idle_timeout_s: float = 60.0
    execute_before_stream_end: bool = False
    allow_pipelined_execute: tuple[str, ...] = field(default_factory=tuple)
    ui_forward_partial_args: bool = True
    arguments_must_be_object: bool = True
    on_invalid_json: str = "error_result"
    on_args_overflow: str = "error_result"
    finalize_order: str = "provider_index"

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> "AssembleConfig":
        """Build from the ``agent_stream_assemble`` mapping; unknown keys raise ConfigError."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            if key not in known:
                raise ConfigError(f"unknown key {key!r} in agent_stream_assemble")
            default = getattr(cls(), key)
            if isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, int):
                ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
            elif isinstance(default, float):
                ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
            elif isinstance(default, tuple):
                ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
                value = tuple(value) if ok else value
            else:
                ok = isinstance(value, str)
            if not ok:
                raise ConfigError(f"agent_stream_assemble.{key}: {value!r} is not a valid {type(default).__name__}")
            values[key] = float(value) if isinstance(default, float) else value
        return cls(**values)

    @classmethod
    def load(cls, path: Path) -> "AssembleConfig":
        """Read a YAML file (``safe_load``) with an ``agent_stream_assemble`` section."""
        import yaml

        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot read configuration: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("agent_stream_assemble", {}), dict):
            raise ConfigError(f"{path}: expected a mapping with section agent_stream_assemble")
        return cls.from_mapping(doc.get("agent_stream_assemble") or {})
