"""Assemblers under test: each turns one case's stream into the calls it hands an agent.

An adapter returns :class:`Handed` calls, each with a verdict:

- ``execute``: the agent would run it (an SDK with no notion of commit hands every call of
  its final message this way);
- ``reject``: handed over as not to run, owed an error result (toollatch's FAILED and
  CANCELLED calls; an SDK that raised at stream end, whose snapshot calls the agent can
  only answer with an error);
- ``server``: run by the provider (Anthropic ``server_tool_use``), owes nothing.

Built-in adapters: ``toollatch``, ``openai-python`` (``ChatCompletionStreamState``),
``anthropic-sdk`` (``accumulate_event`` of its ``MessageStream``), ``langchain-core``
(``AIMessageChunk`` merging), ``litellm`` (``stream_chunk_builder``); an adapter whose
package is not installed reports itself unavailable. ``--command CMD`` is :class:`CommandAdapter`.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import shlex
import subprocess
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from toollatch.wire.capture import ProviderEvent
from toollatch.core.pipeline import Pipeline
from toollatch.core.registry import ToolRegistry


@dataclass(frozen=True)
class Handed:
    """One call as an assembler hands it to the agent. ``arguments`` is the argument text."""

    name: str | None
    id: str | None
    arguments: str | None
    verdict: str


@dataclass(frozen=True)
class CaseInput:
    """What an adapter gets: the raw body, the provider events toollatch's decoder read from
    it (cut at the user stop when ``cancelled``), the request's tools, and the dialect."""

    name: str
    body: bytes
    events: list[ProviderEvent]
    dialect: str | None
    tools: list[dict[str, Any]] | None
    cancel_after: int | None

    @property
    def cancelled(self) -> bool:
        return self.cancel_after is not None


class AdapterError(RuntimeError):
    """The adapter itself failed (not the assembler's verdict); the case counts as wrong."""


class NotApplicable(Exception):
    """The assembler does not read this case's dialect: the case is ``n/a``, not scored."""


@dataclass(frozen=True)
class Adapter:
    """A named assembler. ``dialects``: the dialects it can read (None: any)."""

    name: str
    module: str | None
    dialects: frozenset[str] | None
    run: Callable[[CaseInput], list[Handed]]
    description: str = ""

    def unavailable(self) -> str | None:
        """Why it cannot run here (its package is missing), or None."""
        if self.module and importlib.util.find_spec(self.module) is None:
            return f"package {self.module!r} is not installed (pip install 'toollatch[conformance]')"
        return None


# --------------------------------------------------------------------------- toollatch


def run_toollatch(case: CaseInput) -> list[Handed]:
    """toollatch's pipeline: COMMITTED client calls execute, the rest are rejected."""
    registry = ToolRegistry.from_tools(case.tools) if case.tools else None
    pipeline = Pipeline(case.dialect, registry=registry, emit_events=False, name=case.name)
    for event in case.events:
        pipeline.feed(event)
    if case.cancelled:
        pipeline.cancel()
    else:
        pipeline.close()
    handed: list[Handed] = []
    for result in pipeline.results():
        for call in result.calls:
            if call.executor == "server":
                verdict = "server"
            elif call.state.value == "committed":
                verdict = "execute"
            else:
                verdict = "reject"
            text = json.dumps(call.arguments, ensure_ascii=False) if verdict != "reject" else None
            handed.append(Handed(call.name, call.call_id, text, verdict))
    return handed


# --------------------------------------------------------------------------- openai-python


def _is_sse(body: bytes) -> bool:
    """False for a JSON Lines body (first non-blank byte ``{``): a recording of the payloads."""
    return not body.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{")


def _sse_or_recorded(case: CaseInput, sdk: str = "openai") -> Iterator[tuple[str | None, str]]:
    """(event type, data text) pairs: decoded by the SDK's own ``SSEDecoder`` (``sdk``:
    ``openai`` or ``anthropic``) from an SSE body (so its framing is what is tested), else
    the recorded payloads of a JSON Lines body; cut at the user stop."""
    if _is_sse(case.body):
        SSEDecoder = importlib.import_module(f"{sdk}._streaming").SSEDecoder

        pairs: Iterable[tuple[str | None, str]] = ((sse.event, sse.data) for sse in SSEDecoder().iter_bytes(iter([case.body])))
    else:
        pairs = ((e.event, e.raw if e.raw is not None else json.dumps(e.data)) for e in case.events)
    for count, pair in enumerate(pairs):
        if case.cancel_after is not None and count >= case.cancel_after:
            return
        yield pair


def _openai_events(case: CaseInput) -> Iterator[Any]:
    """The JSON payloads the openai SDK's ``Stream.__stream__`` yields: stops at ``[DONE]``;
    raises what it raises (``APIError`` for an ``error`` payload, ``JSONDecodeError`` for a
    data field that is not JSON)."""
    from openai import APIError

    for _event, text in _sse_or_recorded(case):
        if text.startswith("[DONE]"):
            return
        data = json.loads(text)
        if isinstance(data, dict) and data.get("error"):
            raise APIError(message="An error occurred during streaming", request=None, body=data["error"])  # type: ignore[arg-type]
        yield data


def run_openai_python(case: CaseInput) -> list[Handed]:
    """``openai.lib.streaming.chat.ChatCompletionStreamState``: every tool call of
    ``get_final_completion()`` is handed to execute; when the SDK raises at the end
    (``LengthFinishReasonError``, ``APIError``...), the snapshot's calls are rejected."""
    from openai._models import construct_type
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    state = ChatCompletionStreamState()
    verdict = "execute"
    try:
        for data in _openai_events(case):
            state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=data))  # type: ignore[arg-type]
        completion: Any = state.get_final_completion()
    except Exception:  # the agent's loop sees an exception: it runs nothing
        verdict = "reject"
        try:
            completion = state.current_completion_snapshot
        except Exception:
            return []
    handed: list[Handed] = []
    for choice in completion.choices:
        for tc in choice.message.tool_calls or []:
            fn = getattr(tc, "function", None)
            handed.append(Handed(getattr(fn, "name", None), tc.id, getattr(fn, "arguments", None), verdict))
    return handed


# --------------------------------------------------------------------------- anthropic-sdk


def run_anthropic_sdk(case: CaseInput) -> list[Handed]:
    """``anthropic.lib.streaming._messages.accumulate_event``, as ``MessageStream`` runs it
    on the SDK's own SSE decoding: ``tool_use`` blocks of the final message are handed to
    execute (their ``input`` as parsed), ``server_tool_use`` as the provider's; an ``error``
    event raises in the SDK, and the snapshot's calls are then rejected."""
    from anthropic._models import construct_type
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent

    snapshot: Any = None
    done: list[Any] = []
    json_bufs: dict[int, bytes] = {}
    verdict = "execute"
    try:
        for event_type, text in _sse_or_recorded(case, "anthropic"):
            if event_type == "ping" or (event_type is None and _is_sse(case.body)):
                continue
            if event_type == "error":
                raise RuntimeError("error event")  # the SDK raises APIStatusError
            if not text:
                continue
            data = json.loads(text)
            if isinstance(data, dict) and data.get("type") == "error":
                raise RuntimeError("error event")
            event = construct_type(type_=RawMessageStreamEvent, value=data)  # type: ignore[arg-type]
            kind = getattr(event, "type", None)
            if snapshot is None and kind != "message_start":
                continue  # MessageStream passes events before message_start through unaccumulated
            if snapshot is not None and kind == "message_start":  # a recording of several messages
                done.append(snapshot)
                snapshot, json_bufs = None, {}
            snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)  # type: ignore[arg-type]
    except Exception:
        verdict = "reject"
    handed: list[Handed] = []
    for message in done + ([snapshot] if snapshot is not None else []):
        for block in message.content:
            kind = getattr(block, "type", None)
            if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
                text = json.dumps(block.input, ensure_ascii=False)
                handed.append(Handed(block.name, block.id, text, verdict if kind == "tool_use" else "server"))
    return handed


# --------------------------------------------------------------------------- langchain-core


def _sdk_payloads(case: CaseInput) -> tuple[list[dict[str, Any]], bool]:
    """The chunk payloads the openai SDK's stream yields (which ``langchain-openai`` and
    litellm's OpenAI provider read through), and whether it raised before the end."""
    payloads: list[dict[str, Any]] = []
    try:
        for data in _openai_events(case):
            if isinstance(data, dict):
                payloads.append(data)
    except Exception:
        return payloads, True
    return payloads, False


def run_langchain_core(case: CaseInput) -> list[Handed]:
    """``AIMessageChunk`` merging (``+``), with each chunk's tool-call deltas turned into
    ``tool_call_chunks`` as ``langchain-openai`` does (``choices[0]`` only; a chunk whose
    tool calls lack ``index`` is skipped): ``tool_calls`` of the merged message are handed to
    execute, ``invalid_tool_calls`` rejected; all rejected when the stream raised."""
    from langchain_core.messages import AIMessageChunk

    payloads, raised = _sdk_payloads(case)
    merged: Any = AIMessageChunk(content="")
    for data in payloads:
        if not data.get("choices"):
            continue
        delta = data["choices"][0].get("delta") or {}
        try:
            chunks = [
                {"name": (tc.get("function") or {}).get("name"), "args": (tc.get("function") or {}).get("arguments"), "id": tc.get("id"), "index": tc["index"]}
                for tc in delta.get("tool_calls") or []
            ]
        except KeyError:
            chunks = []
        if chunks:
            merged = merged + AIMessageChunk(content="", tool_call_chunks=chunks)
    verdict = "reject" if raised else "execute"
    handed = [Handed(tc["name"], tc["id"], json.dumps(tc["args"]), verdict) for tc in merged.tool_calls]
    handed += [Handed(tc["name"], tc["id"], tc["args"], "reject") for tc in merged.invalid_tool_calls]
    return handed


# --------------------------------------------------------------------------- litellm


def run_litellm(case: CaseInput) -> list[Handed]:
    """``litellm.stream_chunk_builder`` over the chunks (empty ``choices`` skipped): every
    tool call of the built response is handed to execute; all rejected when the stream
    raised. Its bundled model cost map is used (no fetch)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    logging.getLogger("LiteLLM").setLevel(logging.CRITICAL)  # its builder logs each failure it swallows

    payloads, raised = _sdk_payloads(case)
    chunks = [litellm.ModelResponse(stream=True, **d) for d in payloads if d.get("choices")]
    response: Any = litellm.stream_chunk_builder(chunks) if chunks else None
    verdict = "reject" if raised else "execute"
    handed: list[Handed] = []
    for choice in (response.choices if response else []):
        for tc in choice.message.tool_calls or []:
            handed.append(Handed(tc.function.name, tc.id, tc.function.arguments, verdict))
    return handed


# --------------------------------------------------------------------------- --command


@dataclass(frozen=True)
class CommandAdapter:
    """Any assembler behind a command: one process per case, the case as JSON on stdin,
    the calls as JSON on stdout (see ``docs/conformance.md``). ``timeout`` in seconds."""

    command: str
    timeout: float = 30.0

    def run(self, case: CaseInput) -> list[Handed]:
        request = {
            "case": case.name,
            "dialect": case.dialect,
            "cancelled": case.cancelled,
            "tools": case.tools,
            "events": [{"event": e.event, "data": e.data, "text": e.raw if e.raw is not None else _text(e.data)} for e in case.events],
        }
        try:
            done = subprocess.run(
                shlex.split(self.command), input=json.dumps(request).encode(), capture_output=True, timeout=self.timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AdapterError(f"command {self.command!r}: {exc}") from None
        if done.returncode != 0:
            raise AdapterError(f"command {self.command!r} exited {done.returncode}: {done.stderr.decode(errors='replace')[-200:]}")
        try:
            answer = json.loads(done.stdout)
            if isinstance(answer, dict) and answer.get("unsupported"):
                raise NotApplicable(str(answer["unsupported"])[:200])
            calls = answer["calls"]
            return [Handed(c.get("name"), c.get("id"), c.get("arguments"), c["verdict"]) for c in calls]
        except (ValueError, KeyError, TypeError) as exc:
            raise AdapterError(f"command {self.command!r}: output is not {{\"calls\": [...]}}: {exc}") from None

    def as_adapter(self) -> Adapter:
        return Adapter(name=f"command: {self.command}", module=None, dialects=None, run=self.run)


def _text(data: Any) -> str | None:
    if data is None:
        return None
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)


_CHAT = frozenset({"openai-chat"})

ADAPTERS: dict[str, Adapter] = {
    a.name: a
    for a in (
        Adapter("toollatch", None, None, run_toollatch, "this package's completion latch"),
        Adapter("openai-python", "openai", _CHAT, run_openai_python, "openai.lib.streaming.chat.ChatCompletionStreamState"),
        Adapter("anthropic-sdk", "anthropic", frozenset({"anthropic"}), run_anthropic_sdk, "anthropic MessageStream accumulate_event"),
        Adapter("langchain-core", "langchain_core", _CHAT, run_langchain_core, "AIMessageChunk merging"),
        Adapter("litellm", "litellm", _CHAT, run_litellm, "litellm.stream_chunk_builder"),
    )
}
