"""Responses output items a client runs owe one result each; items a provider runs owe none.

Streams are written as SSE bytes and read through the whole pipeline (and, where it
matters, through the redacted export and the finalized history).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toollatch.wire.capture import read_capture
from toollatch.redaction.export import redact_capture
from toollatch.core.history import build_history, check_protocol
from toollatch.core.model import CallState, StreamResult, ToolResult
from toollatch.core.pipeline import assemble_events
from toollatch.core.registry import ToolRegistry

from .test_export import verdicts

CREATED = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}
COMPLETED = {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}}

SHELL_ACTION = {"commands": ["ls -la", "cat README.md"], "timeout_ms": 60000, "max_output_length": 4096}
LOCAL_ACTION = {"type": "exec", "command": ["ls", "-la"], "env": {}, "timeout_ms": 1000, "working_directory": "/tmp"}
PATCH_OPERATION = {"type": "update_file", "path": "app.py", "diff": "@@\n-old\n+new\n"}
CLICK = {"type": "click", "button": "left", "x": 10, "y": 20}


def sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def added(index: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": index, "item": {**item, "status": "in_progress"}}


def done(index: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.done", "output_index": index, "item": {**item, "status": "completed"}}


def run(wire: bytes, tools: list[dict[str, Any]] | None = None) -> StreamResult:
    registry = ToolRegistry.from_tools(tools) if tools is not None else None
    (result,) = assemble_events(read_capture(wire), registry=registry)
    return result


def shell_item(**extra: Any) -> dict[str, Any]:
    return {"type": "shell_call", "id": "sh_1", "call_id": "call_sh", "action": SHELL_ACTION, **extra}


def shell_stream(item: dict[str, Any], *, complete: bool = True) -> bytes:
    start = {**item, "action": {"commands": [], "timeout_ms": None, "max_output_length": None}}
    events = [
        CREATED,
        added(0, start),
        {"type": "response.shell_call_command.added", "output_index": 0, "command_index": 0, "command": ""},
        {"type": "response.shell_call_command.delta", "output_index": 0, "command_index": 0, "delta": "ls -la"},
        {"type": "response.shell_call_command.done", "output_index": 0, "command_index": 0, "command": "ls -la"},
        {"type": "response.shell_call_command.delta", "output_index": 0, "command_index": 1, "delta": "cat README.md"},
    ]
    if complete:
        events += [done(0, item), COMPLETED]
    return sse(*events)


CLIENT_ITEMS: dict[str, tuple[dict[str, Any], str, Any]] = {
    # item type: (the item, the call's name, its committed arguments)
    "local_shell_call": ({"type": "local_shell_call", "id": "lsh_1", "call_id": "call_ls", "action": LOCAL_ACTION}, "local_shell", LOCAL_ACTION),
    "shell_call": (shell_item(), "shell", SHELL_ACTION),
    "apply_patch_call": ({"type": "apply_patch_call", "id": "apc_1", "call_id": "call_ap", "operation": PATCH_OPERATION}, "apply_patch", PATCH_OPERATION),
    "computer_call": ({"type": "computer_call", "id": "cu_1", "call_id": "call_cu", "action": CLICK, "pending_safety_checks": []}, "computer", CLICK),
}
TOOLS = [{"type": "local_shell"}, {"type": "shell", "environment": {"type": "local"}}, {"type": "apply_patch"}, {"type": "computer_use_preview", "display_width": 1024, "display_height": 768, "environment": "browser"}]


def one_item_stream(kind: str, *, complete: bool = True) -> bytes:
    item = CLIENT_ITEMS[kind][0]
    if kind == "shell_call":
        return shell_stream(item, complete=complete)
    return sse(CREATED, added(0, item), *([done(0, item), COMPLETED] if complete else []))


@pytest.mark.parametrize("kind", sorted(CLIENT_ITEMS))
def test_client_item_commits_with_its_action_as_arguments(kind: str) -> None:
    item, name, arguments = CLIENT_ITEMS[kind]
    result = run(one_item_stream(kind), TOOLS)
    (call,) = result.calls
    assert (call.call_id, call.name, call.executor, call.item) == (item["call_id"], name, "client", kind)
    assert call.state is CallState.COMMITTED, call.reason
    assert call.arguments == arguments and result.results == []
    history = build_history(result)
    assert history[0]["type"] == kind and history[0]["call_id"] == item["call_id"]
    field = "operation" if kind == "apply_patch_call" else "action"
    assert history[0][field] == arguments


@pytest.mark.parametrize("kind", sorted(CLIENT_ITEMS))
def test_truncated_client_item_never_commits_and_owes_one_error_result(kind: str) -> None:
    item = CLIENT_ITEMS[kind][0]
    result = run(one_item_stream(kind, complete=False), TOOLS)
    (call,) = result.calls
    assert result.end == "truncated" and call.state is CallState.FAILED
    assert (call.reason or "").startswith("stream_truncated")
    assert [(r.tool_call_id, r.is_error) for r in result.results] == [(item["call_id"], True)]
    history = build_history(result)
    assert check_protocol(history) == []
    assert [m["type"] for m in history] == [kind, f"{kind}_output"]


@pytest.mark.parametrize("kind", sorted(CLIENT_ITEMS))
def test_client_item_whose_tool_was_not_declared_fails_unknown_tool(kind: str) -> None:
    (call,) = run(one_item_stream(kind), [{"type": "function", "name": "other", "parameters": {"type": "object"}}]).calls
    assert call.state is CallState.FAILED and (call.reason or "").startswith("unknown_tool")


def test_builtin_client_tools_register_the_names_their_calls_carry() -> None:
    assert sorted(ToolRegistry.from_tools(TOOLS).names) == ["apply_patch", "computer", "local_shell", "shell"]


def test_shell_call_commits_the_final_action_not_the_command_preview() -> None:
    result = run(shell_stream(shell_item()))
    (call,) = result.calls
    assert call.arguments == SHELL_ACTION and "done_arguments_differ" not in result.quirks


def test_shell_command_delta_before_its_item_starts_the_call() -> None:
    wire = sse(CREATED, {"type": "response.shell_call_command.delta", "output_index": 0, "command_index": 0, "delta": "ls"}, done(0, shell_item()), COMPLETED)
    result = run(wire)
    (call,) = result.calls
    assert call.state is CallState.COMMITTED and call.arguments == SHELL_ACTION
    assert result.quirks.get("delta_before_output_item_added") == 1


def test_batched_computer_actions_are_one_object() -> None:
    actions = [CLICK, {"type": "type", "text": "hello"}]
    item = {"type": "computer_call", "id": "cu_1", "call_id": "call_cu", "actions": actions, "pending_safety_checks": []}
    result = run(sse(CREATED, added(0, item), done(0, item), COMPLETED))
    (call,) = result.calls
    assert call.arguments == {"actions": actions}
    assert build_history(result)[0]["actions"] == actions


def test_shell_call_in_a_hosted_container_is_run_by_the_provider() -> None:
    item = shell_item(environment={"type": "container_reference", "container_id": "cntr_1"})
    (call,) = run(shell_stream(item)).calls
    assert call.executor == "server" and call.state is CallState.COMMITTED
    truncated = run(shell_stream(item, complete=False))
    assert truncated.calls[0].state is CallState.FAILED and truncated.results == []


def test_a_client_item_answered_in_history_keeps_its_shape() -> None:
    result = run(sse(CREATED, *[e for i, kind in enumerate(sorted(CLIENT_ITEMS)) for e in (added(i, CLIENT_ITEMS[kind][0]),)]))
    history = build_history(result)
    assert check_protocol(history) == []
    outputs = {m["type"]: m for m in history if m["type"].endswith("_output")}
    assert outputs["local_shell_call_output"]["id"] == "call_ls"
    assert outputs["shell_call_output"]["output"][0]["outcome"] == {"type": "exit", "exit_code": 1}
    assert outputs["apply_patch_call_output"]["status"] == "failed"
    assert outputs["computer_call_output"]["output"] == {"type": "computer_screenshot"}


def test_provider_run_items_are_not_calls() -> None:
    search = {"type": "web_search_call", "id": "ws_1", "action": {"type": "search", "query": "q"}}
    code = {"type": "code_interpreter_call", "id": "ci_1", "code": "print(1)", "container_id": "c"}
    result = run(sse(CREATED, added(0, search), done(0, search), added(1, code), done(1, code), COMPLETED))
    assert result.calls == [] and result.results == [] and result.end == "complete"


@pytest.mark.parametrize("kind", sorted(CLIENT_ITEMS))
def test_redacted_export_of_a_client_item_replays_to_identical_verdicts(kind: str) -> None:
    for wire in (one_item_stream(kind), one_item_stream(kind, complete=False)):
        redacted = redact_capture(wire)
        assert verdicts(redacted) == verdicts(wire)
        assert b"README" not in redacted and b"app.py" not in redacted and b"/tmp" not in redacted


# ------------------------------------------------------------------ xAI's own sub-tools

XAI_RESPONSE = "b7b464ea-cc85-d44a-0f2f-1f7320e703c3"


def xai_stream(call_id: str, item_id: str) -> bytes:
    """An xAI X search turn (after vercel/ai's recorded ``xai-x-search-tool`` fixture): a
    sub-tool ``custom_tool_call`` the server runs, then a client function call."""
    sub = {"type": "custom_tool_call", "id": item_id, "call_id": call_id, "name": "x_keyword_search", "input": ""}
    text = '{"query":"from:xai","limit":20,"mode":"Latest"}'
    fn = {"type": "function_call", "id": "fc_1", "call_id": "call_w", "name": "get_weather", "arguments": '{"city":"Austin"}'}
    return sse(
        {"type": "response.created", "response": {"id": XAI_RESPONSE, "model": "grok-4-fast-reasoning", "status": "in_progress"}},
        added(0, sub),
        {"type": "response.custom_tool_call_input.delta", "item_id": item_id, "output_index": 0, "delta": text},
        {"type": "response.custom_tool_call_input.done", "item_id": item_id, "output_index": 0, "input": text},
        done(0, {**sub, "input": text}),
        added(1, fn),
        done(1, fn),
        {"type": "response.completed", "response": {"id": XAI_RESPONSE, "status": "completed"}},
    )


@pytest.mark.parametrize(
    ("call_id", "item_id"),
    [
        ("xs_call_24148162", f"ctc_{XAI_RESPONSE}_xs_call_24148162"),  # as recorded: both signals
        ("call_7", f"ctc_{XAI_RESPONSE}_call_7"),  # the item id names the response
        ("xs_call_1", "ctc_1"),  # the X search call id
    ],
    ids=["recorded", "item-id", "call-id"],
)
def test_xai_search_sub_tool_is_run_by_xai_and_owes_no_result(call_id: str, item_id: str) -> None:
    result = run(xai_stream(call_id, item_id))
    sub, fn = result.calls
    assert (sub.name, sub.executor, sub.state) == ("x_keyword_search", "server", CallState.COMMITTED)
    assert (fn.name, fn.executor, fn.state) == ("get_weather", "client", CallState.COMMITTED)
    history = build_history(result)
    assert [m["call_id"] for m in history] == ["call_w"]  # the sub-tool is not in it: xAI answered it


def test_openai_custom_tool_call_stays_a_client_call() -> None:
    result = run(xai_stream("call_abc", "ctc_68b9f0e2a1c4819c"))
    assert result.calls[0].executor == "client"


# ------------------------------------------------------------------ a non-streaming body


def test_client_items_of_a_non_streaming_body_are_calls() -> None:
    from toollatch.wire.retell import retell_body, untold_arguments

    output = [{**item, "status": "completed"} for item, _, _ in CLIENT_ITEMS.values()]
    hosted = shell_item(call_id="call_h", environment={"type": "container_reference", "container_id": "c"})
    body = json.dumps({"object": "response", "id": "resp_1", "status": "completed", "output": [*output, hosted]}).encode()
    wire, problem = retell_body("openai-responses", body)
    assert problem is None and wire is not None
    result = run(wire, TOOLS)
    assert [(c.call_id, c.name, c.item, c.state, c.arguments) for c in result.calls] == [
        (item["call_id"], name, item["type"], CallState.COMMITTED, arguments) for item, name, arguments in CLIENT_ITEMS.values()
    ]
    assert untold_arguments("openai-responses", body) == ["output[4]"]  # the hosted shell call: no client runs it
    batched = {"type": "computer_call", "id": "cu_2", "call_id": "call_b", "actions": [CLICK], "pending_safety_checks": []}
    wire, _ = retell_body("openai-responses", json.dumps({"object": "response", "status": "completed", "output": [batched]}).encode())
    assert run(wire or b"").calls[0].arguments == {"actions": [CLICK]}


# ------------------------------------------------------------------ tool search


def tool_search_stream(execution: str | None, *, final_call_id: str = "call_final") -> bytes:
    """After vercel/ai's recorded ``openai-client-tool-search`` fixture: the item added with a
    provisional call id and empty arguments, finalized with another call id."""
    item: dict[str, Any] = {"type": "tool_search_call", "id": "tsc_1", "arguments": {}, "call_id": "call_provisional"}
    if execution is not None:
        item["execution"] = execution
    final = {**item, "call_id": final_call_id, "arguments": {"goal": "find a weather tool"}}
    return sse(CREATED, added(0, item), done(0, final), {**COMPLETED, "response": {**COMPLETED["response"], "output": [final]}})


def test_client_tool_search_is_a_call_under_its_final_call_id() -> None:
    result = run(tool_search_stream("client"), [{"type": "tool_search", "execution": "client"}])
    (call,) = result.calls
    assert (call.call_id, call.name, call.executor, call.state) == ("call_final", "tool_search", "client", CallState.COMMITTED)
    assert call.arguments == {"goal": "find a weather tool"} and result.quirks == {"call_id_replaced": 1}
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    history = build_history(result, {"call_final": ToolResult("call_final", False, json.dumps(tools))})
    assert history[0]["type"] == "tool_search_call" and history[1] == {
        "type": "tool_search_output", "call_id": "call_final", "execution": "client", "tools": tools}
    assert check_protocol(history) == []


def test_truncated_client_tool_search_owes_one_error_result_under_its_provisional_id() -> None:
    wire = tool_search_stream("client").split(b"event: response.output_item.done")[0]
    result = run(wire)
    assert [(r.tool_call_id, r.is_error) for r in result.results] == [("call_provisional", True)]
    assert build_history(result)[1] == {"type": "tool_search_output", "call_id": "call_provisional", "execution": "client", "tools": []}


def test_hosted_tool_search_is_run_by_the_provider() -> None:
    for execution in (None, "server"):
        (call,) = run(tool_search_stream(execution)).calls
        assert call.executor == "server" and call.state is CallState.COMMITTED


def test_a_final_call_id_replaces_the_provisional_one_for_any_item() -> None:
    fn = {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "f", "arguments": "{}"}
    result = run(sse(CREATED, added(0, fn), done(0, {**fn, "call_id": "call_b"}), COMPLETED))
    assert [c.call_id for c in result.calls] == ["call_b"] and result.quirks["call_id_replaced"] == 1
    redacted = redact_capture(sse(CREATED, added(0, fn), done(0, {**fn, "call_id": "call_b"}), COMPLETED))
    assert run(redacted).calls[0].call_id == "call_b"


def test_response_completed_restating_a_done_item_with_another_call_id_is_a_conflict_not_a_replacement() -> None:
    """The item's output_item.done finalized it (a pipelined call may have committed under
    that id): a response.completed that names it with another call id keeps the first
    (quirk id_conflict), whatever the call's state; the tool_call_id stays the one acted on."""
    fn = {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "f", "arguments": "{}"}
    restated = {**COMPLETED, "response": {**COMPLETED["response"], "output": [{**fn, "call_id": "call_b"}]}}
    result = run(sse(CREATED, added(0, fn), done(0, fn), restated))
    assert [(c.call_id, c.state) for c in result.calls] == [("call_a", CallState.COMMITTED)]
    assert result.quirks.get("id_conflict") == 1 and "call_id_replaced" not in result.quirks


@pytest.mark.parametrize("kind", sorted(CLIENT_ITEMS))
def test_client_item_never_finalized_fails_though_the_response_completed(kind: str) -> None:
    """The action of ``output_item.added`` is a placeholder (``"commands": []``): without an
    ``output_item.done`` (or the item in ``response.completed``) nothing final was sent."""
    item = CLIENT_ITEMS[kind][0]
    result = run(sse(CREATED, added(0, item), COMPLETED))
    (call,) = result.calls
    assert result.end == "complete" and call.state is CallState.FAILED
    assert (call.reason or "").startswith(f"stream_truncated: {kind} never finalized")
    assert [r.tool_call_id for r in result.results] == [item["call_id"]]
    final = run(sse(CREATED, added(0, item), {**COMPLETED, "response": {**COMPLETED["response"], "output": [{**item, "status": "completed"}]}}))
    assert final.calls[0].state is CallState.COMMITTED


def test_client_item_only_in_response_completed_is_a_final_call() -> None:
    item = {**CLIENT_ITEMS["apply_patch_call"][0], "status": "completed"}
    result = run(sse(CREATED, {**COMPLETED, "response": {**COMPLETED["response"], "output": [item]}}))
    (call,) = result.calls
    assert call.state is CallState.COMMITTED and call.arguments == PATCH_OPERATION
    assert result.quirks == {"item_only_in_response_completed": 1}
