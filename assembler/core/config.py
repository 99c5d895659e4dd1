"""Assembly settings (DESIGN.md, section ``agent_stream_assemble``), read from YAML.

Every key is typed and range-checked; an unknown key is refused by name, with the nearest
valid key suggested, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from toollatch.wire.untrusted import short

SECTION = "agent_stream_assemble"

#: Keys whose value is one of a fixed set of words.
CHOICES: dict[str, tuple[str, ...]] = {
    "on_invalid_json": ("error_result", "drop_with_protocol_repair"),
    "on_args_overflow": ("error_result", "drop_with_protocol_repair"),
    "finalize_order": ("provider_index", "arrival"),
}


#: The largest ``max_tool_argument_depth`` accepted: deeper values could not be handed to
#: recursive consumers (``json``, JSON Schema validators, template engines) safely.
ARGUMENT_DEPTH_CEILING = 256


class ConfigError(ValueError):
    """A configuration file or value is unusable; the message names the file and the key."""


@dataclass(frozen=True, slots=True)
class AssembleConfig:
    """Limits and policies of the completion latch.

    - ``max_tool_argument_bytes``: UTF-8 bytes per call; beyond, the call FAILS
      ``arguments_exceed_max_bytes`` and its buffer is released.
    - ``max_tool_argument_depth``: nesting levels of arrays and objects in the arguments
      (``{"a": [1]}`` is 2), 1 to :data:`ARGUMENT_DEPTH_CEILING`; deeper text FAILS
      ``arguments_too_deep`` at finalization, before it is parsed.
    - ``max_tool_calls_in_flight_assemble``: calls assembling at once in one stream; beyond,
      a FAILED ``too_many_tool_calls`` placeholder.
    - ``max_tool_calls_per_run``: committed calls across the turns (streams) of one
      session; beyond, FAILED ``budget_exceeded``; ``None`` is unlimited.
    - ``assemble_idle_timeout_s``: seconds without a fragment before ``idle_timeout``.
    - ``execute_before_stream_end`` with ``allow_pipelined_execute``: those tools commit at
      their own block end instead of the stream end.
    - ``ui_forward_partial_args``: forward progress (name, bytes) to the UI before commit;
      never argument text. When false, a UI shows a call's name, id and state only until
      its verdict (:func:`toollatch.redaction.redact.hide_progress`).
    - ``arguments_must_be_object``: the arguments must be a JSON object.
    - ``on_invalid_json`` / ``on_args_overflow``: ``error_result`` (the call keeps exactly one
      error result) or ``drop_with_protocol_repair`` (the call is removed from the
      finalized assistant message and owes no result).
    - ``finalize_order``: ``provider_index`` or ``arrival`` order of calls and results.
    - ``metrics_tool_name_label``: add a ``tool_name`` label to metrics (higher cardinality).
    - ``telemetry_otlp_endpoint``: the base URL of an OpenTelemetry collector's OTLP/HTTP
      receiver (``http://collector:4318``) to export each stream's span and the metrics to;
      ``None`` (the default) leaves it to ``OTEL_EXPORTER_OTLP_ENDPOINT``. Needs the
      ``[otel]`` extra; credentials go in ``OTEL_EXPORTER_OTLP_HEADERS``, never in the URL
      (docs/telemetry.md).
    """

    max_tool_argument_bytes: int = 262_144
    max_tool_argument_depth: int = 64
    max_tool_calls_in_flight_assemble: int = 32
    max_tool_calls_per_run: int | None = None
    assemble_idle_timeout_s: float = 60.0
    execute_before_stream_end: bool = False
    allow_pipelined_execute: tuple[str, ...] = field(default_factory=tuple)
    ui_forward_partial_args: bool = True
    arguments_must_be_object: bool = True
    on_invalid_json: str = "error_result"
    on_args_overflow: str = "error_result"
    finalize_order: str = "provider_index"
    metrics_tool_name_label: bool = False
    telemetry_otlp_endpoint: str | None = None

    def pipelined(self, name: str | None) -> bool:
        """True if ``name`` may commit at its own block end."""
        return self.execute_before_stream_end and name is not None and name in self.allow_pipelined_execute

    def to_json(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}

    @classmethod
    def from_mapping(cls, raw: dict[str, Any], *, source: str = SECTION) -> "AssembleConfig":
        """Build from the ``agent_stream_assemble`` mapping; raise :class:`ConfigError` naming the key."""
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            if key not in known:
                near = difflib.get_close_matches(str(key), sorted(known), n=1)
                hint = f"; did you mean {near[0]!r}?" if near else ""
                raise ConfigError(f"{source}: unknown key {short(key)}{hint}")
            values[key] = _check(key, value, getattr(cls(), key), source)
        return cls(**values)

    @classmethod
    def load(cls, path: Path) -> "AssembleConfig":
        """Read a YAML file (``yaml.safe_load``) with an ``agent_stream_assemble`` section."""
        import yaml

        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not UTF-8 text") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise ConfigError(f"{path}: not valid YAML{where}") from None
        if doc is None:
            return cls()
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: expected a mapping with a section {SECTION!r}")
        unknown = [k for k in doc if k != SECTION]
        if unknown:
            near = difflib.get_close_matches(str(unknown[0]), [SECTION], n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ConfigError(f"{path}: unknown section {short(unknown[0])}{hint}")
        section = doc.get(SECTION) or {}
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: {SECTION} must be a mapping")
        return cls.from_mapping(section, source=f"{path}: {SECTION}")


#: The defaults, built once: an :class:`AssembleConfig` is immutable, so every pipeline
#: and assembler without a configuration of its own shares this one.
DEFAULT_CONFIG = AssembleConfig()


def _check(key: str, value: Any, default: Any, source: str) -> Any:
    def bad(expected: str) -> ConfigError:
        return ConfigError(f"{source}.{key}: {short(value)} is not {expected}")

    if key in CHOICES:
        if value not in CHOICES[key]:
            raise bad("one of " + ", ".join(CHOICES[key]))
        return value
    if key == "max_tool_calls_per_run":
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise bad("a whole number >= 0 (or null for no limit)")
        return value
    if key == "telemetry_otlp_endpoint":
        return _otlp_endpoint(value, f"{source}.{key}")
    if key == "max_tool_argument_depth":
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= ARGUMENT_DEPTH_CEILING:
            raise bad(f"a whole number from 1 to {ARGUMENT_DEPTH_CEILING}")
        return value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if isinstance(default, int):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise bad("a whole number >= 1")
        return value
    if isinstance(default, float):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
            raise bad("a number of seconds > 0")
        return float(value)
    if isinstance(default, tuple):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad("a list of tool names")
        return tuple(value)
    raise bad("valid")  # pragma: no cover - every field is handled above


def _otlp_endpoint(value: Any, where: str) -> str | None:
    """An ``http(s)://host[:port][/path]`` URL without userinfo, query or fragment, or None.
    The value is never quoted in the error: a URL given here may carry a credential."""
    if value is None:
        return None
    from urllib.parse import urlsplit

    wrong = ConfigError(f"{where}: expected an http(s)://host[:port] URL of an OTLP/HTTP receiver (or null)")
    if not isinstance(value, str):
        raise wrong
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise wrong from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise wrong
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ConfigError(f"{where}: expected a URL without credentials, query or fragment; put a collector's credentials in OTEL_EXPORTER_OTLP_HEADERS")
    return value
