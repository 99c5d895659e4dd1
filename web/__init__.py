"""toollatch's local dashboard: replays streams through the assembler and shows every call live.

Start it with ``toollatch serve [--captures DIR]`` or :func:`toollatch.web.app.run`. The dashboard
depends on the library (the rest of :mod:`toollatch`); the library never imports it.
"""

from toollatch.web.app import create_app, run
from toollatch.web.settings import Settings

__all__ = ["Settings", "create_app", "run"]
