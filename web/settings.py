"""Dashboard settings: one dataclass, no environment magic.

Every field is documented here and in ``toollatch-dashboard --help`` (``web.__main__``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from assembler.config import AssembleConfig

#: Largest accepted upload, in bytes (20 MiB).
MAX_UPLOAD_BYTES = 20 * 1024 * 1024
#: Replay rates offered in the rate selector, in provider events per second.
RATES = (1.0, 2.0, 5.0, 12.0, 30.0, 100.0, 1000.0)


@dataclass
class Settings:
    """How the dashboard runs.

    ``captures_dir``: directory searched recursively for ``*.sse`` / ``*.jsonl`` captures
    (``None``: no capture list). ``config``: the assembler configuration every session
    uses; its ``max_tool_argument_bytes`` is also the full scale of each call's bar.
    ``host`` / ``port``: where :func:`web.app.run` binds; loopback by default.
    ``replay_rate``: default replay pace in provider events per second.
    ``allowed_hosts``: extra ``Host`` header values accepted besides ``localhost``,
    ``127.0.0.1``, ``::1`` and ``host`` (DNS-rebinding guard).
    ``max_upload_bytes``: upload size limit. ``max_sessions``: sessions kept in memory;
    the oldest finished ones are dropped first.
    """

    captures_dir: Path | None = None
    config: AssembleConfig = field(default_factory=AssembleConfig)
    host: str = "127.0.0.1"
    port: int = 8765
    replay_rate: float = 12.0
    allowed_hosts: tuple[str, ...] = ()
    max_upload_bytes: int = MAX_UPLOAD_BYTES
    max_sessions: int = 64

    def trusted_hosts(self) -> list[str]:
        """``Host`` values the app answers to (without port)."""
        hosts = ["localhost", "127.0.0.1", "::1", "[::1]", self.host, *self.allowed_hosts]
        return list(dict.fromkeys(h.lower() for h in hosts if h))
