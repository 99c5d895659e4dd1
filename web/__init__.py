"""toollatch's local dashboard: replays streams through the assembler and shows every call live.

Start it with ``toollatch serve [--captures DIR]`` or :func:`web.app.run`. The dashboard
depends on :mod:`assembler`; the assembler never imports it.
"""

from .app import create_app, run
from .settings import Settings

__all__ = ["Settings", "create_app", "run"]
