"""The Responses API output items that are tool calls: who runs each, and its argument text.

Provider documents: OpenAI API reference, "Responses → output items" and the tool guides
(function calling, custom tools, local shell, shell, apply patch, computer use, remote MCP);
xAI "Tools → Advanced usage" (mixing server-side and client-side tools).

| item type | runs on | call id | name | argument text |
|---|---|---|---|---|
| ``function_call`` | client | ``call_id`` | ``name`` | ``arguments`` |
| ``custom_tool_call`` | client (xAI's own sub-tools: server) | ``call_id`` | ``name`` | ``{"input": <input>}`` |
| ``local_shell_call`` | client | ``call_id`` | ``local_shell`` | ``action`` as JSON |
| ``shell_call`` | client (a hosted container: server) | ``call_id`` | ``shell`` | ``action`` as JSON |
| ``apply_patch_call`` | client | ``call_id`` | ``apply_patch`` | ``operation`` as JSON |
| ``computer_call`` | client | ``call_id`` | ``computer`` | ``action`` as JSON (``{"actions": [...]}`` for a batch) |
| ``tool_search_call`` | client if ``execution: client``, else server | ``call_id`` (else item ``id``) | ``tool_search`` | ``arguments`` as JSON |
| ``mcp_call`` | server | item ``id`` | ``name`` | ``arguments`` |

Every client item owes exactly one result; the items a provider runs itself
(``web_search_call``, ``file_search_call``, ``code_interpreter_call``, ``image_generation_call``
... and ``mcp_call``) owe nothing. Only ``mcp_call`` of those carries argument text, so it is
shown (``executor: server``); the others carry none and are not calls here.

**A tool search the client runs.** A ``tool_search_call`` is searched by the provider
unless its ``execution`` is ``client`` (a tool ``{"type": "tool_search", "execution":
"client"}``); then the client runs it and owes its ``tool_search_output``.

**A shell call run by the provider.** A ``shell_call`` whose ``environment`` is a
``container_reference`` runs in an OpenAI-hosted container, which also writes its output:
``executor: server``. Without an ``environment``, or a ``local`` one, the client runs it.

**xAI's own sub-tools.** xAI streams the sub-tools its server-side X search runs
(``x_keyword_search``, ``x_semantic_search``, ``x_user_search``, ``x_thread_fetch``,
``view_x_video``...) as ``custom_tool_call`` items, then goes on past them to
``response.completed``; xAI's client-side tools are only ever ``function_call`` items. The
signal that tells such an item from a custom tool a client must run is its ids: xAI names
an item its server runs after the response that runs it, ``ctc_<response id>_<call id>``
(its ``web_search_call`` items likewise: ``ws_<response id>_…``), and gives the X search
sub-tool calls ``call_id`` ``xs_call_<n>``. An OpenAI custom tool call's item id is
``ctc_<hex>`` and never holds the response's id. Either signal makes the item
``executor: server``; it owes no result. (Recorded in vercel/ai's xAI fixture
``xai-x-search-tool.chunks.txt``, grok-4-fast-reasoning.)
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, NamedTuple

from toollatch.core import jsontext
from toollatch.core.model import Executor, Op, Quirk


class ItemKind(NamedTuple):
    """How one item type is read: its executor, where its argument text is, its call's name."""

    executor: Executor
    field: str  # the item's field holding the argument text
    name: str | None  # the call's fixed name (the item type without ``_call``), else the item's ``name``
    streams: bool  # its argument text streams as ``.delta`` events (else it comes whole)


KINDS: dict[str, ItemKind] = {
    "function_call": ItemKind("client", "arguments", None, True),
    "custom_tool_call": ItemKind("client", "input", None, True),
    "mcp_call": ItemKind("server", "arguments", None, True),
    "local_shell_call": ItemKind("client", "action", "local_shell", False),
    "shell_call": ItemKind("client", "action", "shell", False),
    "apply_patch_call": ItemKind("client", "operation", "apply_patch", False),
    "computer_call": ItemKind("client", "action", "computer", False),
    "tool_search_call": ItemKind("server", "arguments", "tool_search", False),
}

#: Output item types that are tool calls, and who runs them unless the item says otherwise.
TOOL_ITEMS: dict[str, Executor] = {kind: k.executor for kind, k in KINDS.items()}

_WRAP_OPEN, _WRAP_CLOSE = '{"input":"', '"}'

#: Argument text events of the item kinds that stream it, and the finalized text's field.
_DELTAS = {
    "response.function_call_arguments.delta": "function_call",
    "response.custom_tool_call_input.delta": "custom_tool_call",
    "response.mcp_call_arguments.delta": "mcp_call",
}
_DONES = {
    "response.function_call_arguments.done": ("function_call", "arguments"),
    "response.custom_tool_call_input.done": ("custom_tool_call", "input"),
    "response.mcp_call_arguments.done": ("mcp_call", "arguments"),
}
#: Progress events of items whose argument text comes whole: routed to their item only.
_PREVIEWS = {
    "response.shell_call_command.added": "shell_call",
    "response.shell_call_command.delta": "shell_call",
    "response.shell_call_command.done": "shell_call",
    "response.apply_patch_call_operation_diff.delta": "apply_patch_call",
    "response.apply_patch_call_operation_diff.done": "apply_patch_call",
}


def digest(text: str) -> bytes:
    """SHA-256 of ``text``'s UTF-16 code units: a surrogate pair split across deltas hashes
    as the one character it is."""
    return hashlib.sha256(text.encode("utf-16-le", "surrogatepass")).digest()


def executor(item: dict[str, Any], response_id: str | None) -> Executor:
    """Who runs ``item`` (a tool item, see :data:`KINDS`); see the module docstring."""
    kind = item["type"]
    if kind == "custom_tool_call" and _xai_server_item(item, response_id):
        return "server"
    if kind == "tool_search_call":  # a hosted tool search, unless the request asked the client to run it
        return "client" if item.get("execution") == "client" else "server"
    if kind == "shell_call":
        env = item.get("environment")
        if isinstance(env, dict) and env.get("type") == "container_reference":
            return "server"
    return KINDS[kind].executor


def _xai_server_item(item: dict[str, Any], response_id: str | None) -> bool:
    item_id, call_id = item.get("id"), item.get("call_id")
    if isinstance(call_id, str) and call_id.startswith("xs_call_"):
        return True
    return bool(response_id) and isinstance(item_id, str) and item_id.startswith(f"ctc_{response_id}_")


def identity(item: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(call id, name)`` of a tool item; None for what it lacks."""
    kind = KINDS[item["type"]]
    ref = item.get("id") if item["type"] == "mcp_call" else item.get("call_id")
    if item["type"] == "tool_search_call" and not ref:  # a hosted search has no call_id: its item id names it
        ref = item.get("id")
    name = kind.name or item.get("name")
    return (ref if isinstance(ref, str) and ref else None, name if isinstance(name, str) and name else None)


def argument_value(item: dict[str, Any]) -> Any:
    """The item's argument text or value as it carries it (None: none yet). A batched
    ``computer_call`` (``actions``, no ``action``) gives ``{"actions": [...]}``."""
    kind = item["type"]
    value = item.get(KINDS[kind].field)
    if kind == "computer_call" and value is None and item.get("actions") is not None:
        return {"actions": item["actions"]}
    return value


def as_text(kind: str, value: Any, ops: list[Op]) -> str | None:
    """The argument text ``value`` gives a call of item type ``kind`` (None: none): a JSON
    value becomes its JSON text (quirk ``arguments_as_json_value`` for the kinds whose
    argument text is a string; an action or operation object is its JSON text by design);
    a custom tool's input is wrapped as ``{"input": ...}``."""
    if value is not None and not isinstance(value, str):
        if KINDS[kind].streams:
            ops.append(Quirk("arguments_as_json_value"))
        value = jsontext.dumps(value)
        if kind != "custom_tool_call":
            return value
    if not isinstance(value, str) or not value:
        return None
    return wrap(value) if kind == "custom_tool_call" else value


def wrap(text: str) -> str:
    """A custom tool's free-text input as the JSON object the latch judges."""
    return _WRAP_OPEN + escape(text) + _WRAP_CLOSE


def escape(text: str) -> str:
    """``text`` as the inside of a JSON string literal (encoding only; nothing is parsed)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]
