"""Direct connect: the server makes a streaming request itself and shows it live.

The dashboard's form picks an upstream, an API (Chat Completions, Responses or Messages),
a model, a tools JSON array and a prompt. :func:`build_request` writes the provider's
request body (``stream: true``) with the tools converted to that API's shape, and
:func:`auth_headers` reads the API key from the environment variable named in
``Settings.api_key_env`` for that upstream. The key is never typed into the page, stored,
logged or shown; the built-in mock needs none. With the mock and no tools given, the
scenario's own tools are used, so its calls are checked against their schemas.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from toollatch.demo.demos import DEMOS
from toollatch.demo.mockwire import MockDialect
from toollatch.core.registry import RegistryError
from toollatch.wire.untrusted import parse_json

from toollatch.web.triage.sources import registry_from_tools

API = Literal["chat", "responses", "messages"]
#: Form value → (dialect, path below the upstream's base URL).
APIS: dict[str, tuple[MockDialect, str]] = {
    "chat": ("openai-chat", "v1/chat/completions"),
    "responses": ("openai-responses", "v1/responses"),
    "messages": ("anthropic", "v1/messages"),
}
ANTHROPIC_VERSION = "2023-06-01"
#: The ``User-Agent`` of the dashboard's own requests (the proxy's HTTP client adds none).
USER_AGENT = "toollatch-dashboard"
MAX_PROMPT = 20_000


class ConnectError(ValueError):
    """The form cannot be sent; the message is fit for the page."""


@dataclass(frozen=True)
class Plan:
    """What a direct connection sends (headers come separately, from the environment)."""

    upstream: str
    api: str
    dialect: MockDialect
    path: str
    body: dict[str, Any]


def _spec(tool: Any) -> dict[str, Any]:
    """``{"name", "description", "parameters"}`` from any of the three tool shapes."""
    if not isinstance(tool, dict):
        raise ConnectError("Each tool must be a JSON object.")
    inner = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    name = inner.get("name")
    if not isinstance(name, str) or not name:
        raise ConnectError("Each tool needs a \"name\".")
    schema = inner.get("parameters", inner.get("input_schema", {"type": "object", "properties": {}}))
    out = {"name": name, "parameters": schema}
    if isinstance(inner.get("description"), str):
        out["description"] = inner["description"]
    return out


def convert_tools(tools: list[Any], api: str) -> list[dict[str, Any]]:
    """Tools in the shape ``api`` expects (OpenAI Chat, Responses or Anthropic)."""
    specs = [_spec(t) for t in tools]
    if api == "chat":
        return [{"type": "function", "function": s} for s in specs]
    if api == "responses":
        return [{"type": "function", **s} for s in specs]
    return [{"name": s["name"], **({"description": s["description"]} if "description" in s else {}), "input_schema": s["parameters"]} for s in specs]


def scenario_tools(model: str) -> list[dict[str, Any]]:
    """The tools of a mock scenario (OpenAI Chat shape), or ``[]``."""
    demo = DEMOS.get(f"openai-{model}") or DEMOS.get(model)
    return list(demo.tools) if demo is not None else []


def build_request(upstream: str, api: str, model: str, tools_text: str, prompt: str, *, mock: bool) -> Plan:
    """The request a direct connection sends; :class:`ConnectError` for a bad form (its
    message names the field and the fault: tools that are not JSON, not an array of tool
    objects, or not usable as the session's registry)."""
    if api not in APIS:
        raise ConnectError(f"Unknown API {api!r}: choose chat, responses or messages.")
    model = model.strip()
    if not model:
        raise ConnectError("Give a model" + (" (for the mock: a scenario such as parallel)." if mock else "."))
    if len(prompt) > MAX_PROMPT:
        raise ConnectError(f"The prompt is longer than {MAX_PROMPT:,} characters.")
    tools: list[Any] = []
    if tools_text.strip():
        parsed, problem = parse_json(tools_text)
        if problem is not None:
            raise ConnectError(f"Tools are {problem}.")
        if isinstance(parsed, dict) and "tools" in parsed:
            parsed = parsed["tools"]
        if not isinstance(parsed, list):
            raise ConnectError("Tools must be a JSON array.")
        tools = parsed
    elif mock:
        tools = scenario_tools(model)
    dialect, path = APIS[api]
    converted = convert_tools(tools, api)
    try:
        registry_from_tools(converted).ensure_usable()  # the session judges calls by them: refuse what it cannot use
    except RegistryError as exc:
        raise ConnectError(f"The tools cannot be used: {exc}.") from None
    text = prompt.strip() or "Use the tools."
    body: dict[str, Any] = {"model": model, "stream": True}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": text}]
    elif api == "responses":
        body["input"] = text
    else:
        body["max_tokens"] = 4096
        body["messages"] = [{"role": "user", "content": text}]
    if converted:
        body["tools"] = converted
    return Plan(upstream, api, dialect, path, body)


def auth_headers(upstream: str, api: str, api_key_env: dict[str, str], *, mock: bool) -> list[tuple[str, str]]:
    """Request headers with the API key from ``$<api_key_env[upstream]>``; none for the mock.
    They name the dashboard as the client (:data:`USER_AGENT`).

    Raises :class:`ConnectError` naming the variable when it is not configured or empty
    (the value itself is never put into a message)."""
    headers = [("content-type", "application/json"), ("accept", "text/event-stream"), ("user-agent", USER_AGENT)]
    if api == "messages":
        headers.append(("anthropic-version", ANTHROPIC_VERSION))
    if mock:
        return headers
    var = api_key_env.get(upstream)
    if not var:
        raise ConnectError(f"No API key variable for upstream {upstream!r}: set api_key_env: {{{upstream}: ENV_VAR}} in the configuration.")
    key = os.environ.get(var, "")
    if not key:
        raise ConnectError(f"The environment variable {var} (API key for {upstream!r}) is not set.")
    headers.append(("x-api-key", key) if api == "messages" else ("authorization", f"Bearer {key}"))
    return headers
