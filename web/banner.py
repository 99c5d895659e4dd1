"""What ``toollatch serve`` and ``toollatch mock`` say at start: a banner of where things are,
and a one-line refusal when the port is taken.

:func:`port_problem` binds a probe socket the way uvicorn binds its own (``SO_REUSEADDR``,
so a port left in ``TIME_WAIT`` is free, one another server listens on is not) and closes it.
:func:`serve_banner` lists the dashboard's URL, its data and captures directories, and the
base URL an SDK takes for each proxy upstream (OpenAI's SDKs append ``/chat/completions`` or
``/responses`` to a base URL that ends in ``/v1``; Anthropic's append ``/v1/messages`` to one
that does not).
"""

from __future__ import annotations

import errno
import socket

from toollatch.wire.urls import scrub_url

from toollatch.web.live.proxy import BUILTIN_UPSTREAMS
from toollatch.web.settings import Settings

#: The path an SDK's ``base_url`` takes below ``/proxy/<name>``, by upstream name.
SDK_BASE_SUFFIX = {"openai": "/v1", "mock": "/v1", "anthropic": ""}


def _host_in_url(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def base_url(host: str, port: int) -> str:
    """``http://host:port`` (an IPv6 address in brackets)."""
    return f"http://{_host_in_url(host)}:{port}"


def port_problem(host: str, port: int) -> str | None:
    """None when ``host:port`` can be listened on now; else one line saying why not
    (``port 8765 on 127.0.0.1 is in use``, or the OS's reason)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host.strip("[]"), port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return f"port {port} on {host} is in use (another server listens there)"
        return f"cannot listen on {host}:{port}: {exc.strerror or type(exc).__name__}"
    return None


def serve_banner(settings: Settings) -> str:
    """The lines ``toollatch serve`` prints before it starts listening: the dashboard URL,
    data dir, captures dir, and per upstream the proxy base URL an SDK takes and where it goes
    (a configured URL without userinfo or query, or the built-in mock)."""
    root = base_url(settings.host, settings.port)
    lines = [
        f"toollatch dashboard: {root}/",
        f"  data dir:      {settings.data_dir}",
        f"  captures dir:  {settings.captures_dir if settings.captures_dir is not None else '(none; --captures DIR lists a folder)'}",
        "  proxy base URLs (an SDK's base_url):",
    ]
    names = list(dict.fromkeys([*BUILTIN_UPSTREAMS, *settings.upstreams]))
    width = max(len(n) for n in names)
    rows = []
    for name in names:
        url = f"{root}/proxy/{name}{SDK_BASE_SUFFIX.get(name, '')}"
        target = scrub_url(settings.upstreams[name], limit=120) if name in settings.upstreams else "built-in mock (model = a scenario name)"
        rows.append((name, url, target))
    url_width = max(len(r[1]) for r in rows)
    lines += [f"    {name:<{width}}  {url:<{url_width}}  -> {target}" for name, url, target in rows]
    if not any(n in settings.upstreams for n in ("openai", "anthropic")):
        lines.append("  real providers: --upstream openai=https://api.openai.com --upstream anthropic=https://api.anthropic.com")
    return "\n".join(lines) + "\n"
