"""Dashboard settings: one dataclass, no environment magic.

Every field is documented here and in ``docs/dashboard.md`` (a test keeps the two in step).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from toollatch.core.config import AssembleConfig

#: Largest accepted upload, in bytes (50 MiB); uploads are read in 1 MiB pieces.
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
#: Base replay rates offered when starting a session, in provider events per second.
RATES = (1.0, 2.0, 5.0, 12.0, 30.0, 100.0, 1000.0)
#: Speeds offered on the session page, as multiples of the session's base rate.
SPEEDS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
#: The "max" speed: feed events as fast as the server can, renders still coalesced.
FULL_SPEED = math.inf
MIN_SPEED, MAX_SPEED = SPEEDS[0], SPEEDS[-1]


def default_data_dir() -> Path:
    """``$TOOLLATCH_DATA_DIR`` if set, else the platform's user data dir for toollatch."""
    env = os.environ.get("TOOLLATCH_DATA_DIR")
    return Path(env) if env else platformdirs.user_data_path("toollatch")


def speed_label(speed: float) -> str:
    """``0.25×``, ``1×``, ``20×`` or ``max``."""
    if math.isinf(speed):
        return "max"
    return f"{speed:g}×"


def speed_value(speed: float) -> str:
    """The form value of a speed: ``"0.25"``, ``"2"`` or ``"max"``."""
    return "max" if math.isinf(speed) else f"{speed:g}"


def parse_speed(raw: object) -> float | None:
    """A speed from a form or JSON value: ``"max"`` or a number in [0.25, 20]; else None."""
    if isinstance(raw, str) and raw.strip().lower() in ("max", "full", "inf"):
        return FULL_SPEED
    if isinstance(raw, bool):
        return None
    try:
        speed = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return speed if MIN_SPEED <= speed <= MAX_SPEED else None


@dataclass
class Settings:
    """How the dashboard runs.

    ``captures_dir``: directory searched recursively for ``*.sse`` / ``*.jsonl`` captures
    (``None``: no capture list). ``config``: the assembler configuration every session
    uses; its ``max_tool_argument_bytes`` is also the full scale of each call's bar.
    ``host`` / ``port``: where :func:`toollatch.web.app.run` binds; loopback by default.
    ``replay_rate``: default base replay rate in provider events per second (speed 1×).
    ``allowed_hosts``: extra ``Host`` header values accepted besides ``localhost``,
    ``127.0.0.1``, ``::1`` and ``host`` (DNS-rebinding guard).
    ``max_upload_bytes``: upload size limit. ``max_sessions``: sessions kept in memory;
    the oldest finished ones are dropped first.
    ``max_renders_per_second``: live updates rendered per session and second, at most;
    changes in between are coalesced into the next render.
    ``viewer_queue_frames``: frames queued for one WebSocket viewer before progress-only
    frames are dropped (transitions and verdicts are kept, or the viewer is resynced).
    ``data_dir``: where stored sources live (``toollatch.sqlite3``); default
    ``$TOOLLATCH_DATA_DIR``, else the platform's user data directory.
    ``upstreams``: the proxy's upstreams, ``{name: base_url}`` (``/proxy/<name>/<path>``
    goes to ``<base_url>/<path>``); ``openai``, ``anthropic`` and ``mock`` not listed go to
    the built-in mock provider. ``api_key_env``: ``{upstream: ENV_VAR}``, the variable a
    direct connection reads its API key from. ``mock_delay``: seconds between the mock's
    writes (``$TOOLLATCH_MOCK_DELAY``, default 0.02), for agents streaming through the proxy.
    ``mock_demo_delay``: seconds between the mock's writes when the dashboard's *Connect
    and stream* form drives it at *demo pace* (default 0.2: a scenario streams for seconds,
    slow enough to watch). ``mock_rechunk``: a seed to re-chunk
    the mock's bodies at random byte positions (``None``: one provider event a write).
    """

    captures_dir: Path | None = None
    config: AssembleConfig = field(default_factory=AssembleConfig)
    host: str = "127.0.0.1"
    port: int = 8765
    replay_rate: float = 12.0
    allowed_hosts: tuple[str, ...] = ()
    max_upload_bytes: int = MAX_UPLOAD_BYTES
    max_sessions: int = 64
    max_renders_per_second: float = 20.0
    viewer_queue_frames: int = 32
    data_dir: Path = field(default_factory=default_data_dir)
    upstreams: dict[str, str] = field(default_factory=dict)
    api_key_env: dict[str, str] = field(default_factory=dict)
    mock_delay: float = field(default_factory=lambda: float(os.environ.get("TOOLLATCH_MOCK_DELAY") or 0.02))
    mock_demo_delay: float = 0.2
    mock_rechunk: int | None = None

    def trusted_hosts(self) -> list[str]:
        """``Host`` values the app answers to (without port)."""
        hosts = ["localhost", "127.0.0.1", "::1", "[::1]", self.host, *self.allowed_hosts]
        return list(dict.fromkeys(h.lower() for h in hosts if h))
