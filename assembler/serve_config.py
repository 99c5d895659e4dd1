"""The ``toollatch serve`` configuration: the YAML file's serve sections and the upstream options.

A configuration file may hold, besides ``agent_stream_assemble`` (the assembler's limits,
:class:`~toollatch.core.config.AssembleConfig`), the sections ``upstreams`` (name → base URL),
``api_key_env`` (upstream name → environment variable holding its key) and ``mock``
(``delay`` seconds, ``rechunk`` seed). Every fault raises
:class:`~toollatch.core.config.ConfigError` naming the file, section and key; URLs are quoted
without userinfo or query (:func:`toollatch.wire.urls.scrub_url`).
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Any

from toollatch.core.config import AssembleConfig, ConfigError
from toollatch.wire.untrusted import short
from toollatch.wire.urls import scrub_url


#: Sections of a ``serve`` configuration file besides ``agent_stream_assemble``.
SERVE_SECTIONS = ("upstreams", "api_key_env", "mock")


def parse_pairs(values: list[str] | None, option: str) -> dict[str, str]:
    """``NAME=VALUE`` options as a mapping; ConfigError naming the option when malformed."""
    out: dict[str, str] = {}
    for raw in values or []:
        name, sep, value = raw.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ConfigError(f"{option} {scrub_url(raw, limit=200)!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def read_serve_config(path: str | None) -> tuple[AssembleConfig, dict[str, Any]]:
    """The assembler configuration and the serve sections (``upstreams``, ``api_key_env``,
    ``mock``) of a YAML file; a file without serve sections reads exactly as ``--config``."""
    if not path:
        return AssembleConfig(), {}
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return AssembleConfig.load(Path(path)), {}  # raises ConfigError with its own message
    if not isinstance(doc, dict) or not any(k in doc for k in SERVE_SECTIONS):
        return AssembleConfig.load(Path(path)), {}
    extra = {k: doc.pop(k) for k in SERVE_SECTIONS if k in doc}
    for key in ("upstreams", "api_key_env"):
        value = extra.get(key) or {}
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in value.items()):
            raise ConfigError(f"{path}: {key} must map names to strings")
        extra[key] = value
    mock = extra.get("mock") or {}
    if not isinstance(mock, dict):
        raise ConfigError(f"{path}: mock takes delay (seconds) and rechunk (a seed)")
    for key in mock:
        if key not in ("delay", "rechunk"):
            raise ConfigError(f"{path}: mock: unknown key {short(key)}{nearest(str(key), ('delay', 'rechunk'))}; mock takes delay (seconds) and rechunk (a seed)")
    delay, seed = mock.get("delay"), mock.get("rechunk")
    if delay is not None and (not isinstance(delay, (int, float)) or isinstance(delay, bool) or delay < 0):
        raise ConfigError(f"{path}: mock.delay: {short(delay)} is not a number of seconds >= 0")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ConfigError(f"{path}: mock.rechunk: {short(seed)} is not a whole number")
    extra["mock"] = mock
    unknown = [k for k in doc if k != "agent_stream_assemble"]
    if unknown:
        raise ConfigError(f"{path}: unknown section {short(unknown[0])}; known: agent_stream_assemble, {', '.join(SERVE_SECTIONS)}")
    section = doc.get("agent_stream_assemble") or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: agent_stream_assemble must be a mapping")
    return AssembleConfig.from_mapping(section, source=f"{path}: agent_stream_assemble"), extra


#: Upstreams that exist without configuration (the built-in mock serves them).
BUILT_IN_UPSTREAMS = ("openai", "anthropic", "mock")


def nearest(name: str, known: tuple[str, ...] | list[str]) -> str:
    near = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {near[0]!r}?" if near else ""


def check_upstreams(upstreams: dict[str, str], key_env: dict[str, str], source: str | None) -> None:
    """Refuse malformed upstreams and ``api_key_env`` entries for no upstream; warn (stderr)
    about an upstream named like a built-in one, which then still goes to the mock."""
    where = f"{source}: " if source else ""
    for name, url in upstreams.items():
        if not url.startswith(("http://", "https://")) or "/" in name:
            # quoted as one URL, without userinfo or query: a URL given without NAME= splits at
            # the "=" of its query, and either part may carry a credential
            raise ConfigError(f"{where}upstream {scrub_url(f'{name}={url}', limit=200)}: expected NAME=http(s)://host[:port][/path]")
    known = sorted({*BUILT_IN_UPSTREAMS, *upstreams})
    for name in key_env:
        if name not in known:
            raise ConfigError(f"{where}api_key_env: {name!r} is not an upstream{nearest(name, known)} (upstreams: {', '.join(known)})")
    for name in upstreams:
        near = difflib.get_close_matches(name, [b for b in BUILT_IN_UPSTREAMS if b not in upstreams], n=1)
        if name not in BUILT_IN_UPSTREAMS and near:
            print(f"toollatch: warning: upstream {name!r} is configured, and {near[0]!r} still goes to the built-in mock; did you mean {near[0]!r}?", file=sys.stderr)
