"""Built-in demo scenarios, generated in each provider's exact wire format.

Every demo is a complete recording as the provider would send it over HTTP: raw SSE
bytes, exactly what ``curl -N`` prints.

* OpenAI Chat Completions (``dialect="openai-chat"``): one ``data: {chat.completion.chunk}``
  event per chunk, tool calls keyed by ``choices[0].delta.tool_calls[].index``, a final
  chunk with ``finish_reason: "tool_calls"`` and ``data: [DONE]``
  (https://platform.openai.com/docs/api-reference/chat-streaming).
* Anthropic Messages (``dialect="anthropic"``): ``event: <type>`` + ``data: {...}`` pairs:
  ``message_start``, ``content_block_start`` (``tool_use`` with ``input: {}``),
  ``content_block_delta`` (``input_json_delta.partial_json``), ``content_block_stop``,
  ``message_delta`` (``stop_reason: "tool_use"``), ``message_stop``
  (https://docs.anthropic.com/en/docs/build-with-claude/streaming).

Argument text is split into many small fragments so a dashboard visibly fills each
call's buffer. The module is pure: no I/O, no randomness, no web imports; the same
bytes come out on every import.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

Dialect = Literal["openai-chat", "anthropic"]

#: A unique secret placed in the ``canary`` demo's arguments, split across fragments.
#: A dashboard must not show it (or any fragment of it) before the call commits.
CANARY_SECRET = "tl-canary-7Qm4Zx9Rv2Lp8Kw3"

#: The default ``max_tool_argument_bytes`` the oversized demos are built to exceed.
DEFAULT_MAX_TOOL_ARGUMENT_BYTES = 262_144

_CREATED = 1767225600  # 2026-01-01T00:00:00Z, fixed so the bytes are reproducible
_OPENAI_MODEL = "gpt-4o-2024-08-06"
_ANTHROPIC_MODEL = "claude-sonnet-4-5-20250929"
#: Fragment lengths (characters) cycled over when splitting argument text.
_PATTERN = (3, 5, 4, 7, 2, 6, 4, 8, 3, 5)


@dataclass
class Demo:
    """One built-in scenario.

    ``wire`` is the raw response body (UTF-8 SSE). ``tools`` is the request's ``tools``
    array in the dialect's own shape (OpenAI ``{"type": "function", "function": ...}``
    or Anthropic ``{"name", "input_schema"}``). ``cancel_after`` is the number of
    provider events (SSE events, ``[DONE]`` included) after which a replay issues a
    user cancel, or ``None``. ``expected`` gives, per call in provider order, the state
    it must end in, optionally with the reason code (``"failed:invalid_json"``);
    ``expected_end`` is the stream end kind.
    """

    name: str
    title: str
    dialect: Dialect
    description: str
    wire: bytes
    tools: list[dict[str, Any]]
    cancel_after: int | None = None
    expected: tuple[str, ...] = ()
    expected_end: str = "complete"
    events: int = field(default=0)


@dataclass(frozen=True)
class _Call:
    """A tool call to stream: ``fragments`` joined is its argument text."""

    name: str
    fragments: tuple[str, ...]


# ------------------------------------------------------------------ text helpers


def _split(text: str, offset: int = 0) -> list[str]:
    """Split ``text`` into small pieces whose lengths cycle through ``_PATTERN``."""
    out: list[str] = []
    i, n = 0, offset
    while i < len(text):
        size = _PATTERN[n % len(_PATTERN)]
        out.append(text[i : i + size])
        i += size
        n += 1
    return out


def _chunked(text: str, size: int) -> list[str]:
    """Split ``text`` into pieces of ``size`` characters (the last may be shorter)."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def _dumps(value: Any) -> str:
    """Argument text as models typically stream it: ``{"a": 1, "b": 2}``."""
    return json.dumps(value, ensure_ascii=False)


def _token(seed: str, length: int) -> str:
    """A stable, provider-looking alphanumeric token derived from ``seed``."""
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789"
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest)[:length]


# ------------------------------------------------------------------ tools


_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "get_weather": (
        "Current weather for a city.",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    ),
    "run_sql": (
        "Run a read-only SQL query.",
        {
            "type": "object",
            "properties": {"query": {"type": "string"}, "database": {"type": "string"}},
            "required": ["query"],
        },
    ),
    "list_open_tabs": ("List the browser tabs that are open.", {"type": "object", "properties": {}}),
    "write_file": (
        "Write a text file in the workspace.",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    ),
    "write_note": (
        "Save a markdown note.",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "body": {"type": "string"}},
            "required": ["path", "body"],
        },
    ),
    "connect_database": (
        "Open a database connection and run one query.",
        {
            "type": "object",
            "properties": {
                "host": {"type": "string"},
                "user": {"type": "string"},
                "password": {"type": "string"},
                "query": {"type": "string"},
            },
            "required": ["host", "user", "password", "query"],
        },
    ),
}


def _tools(dialect: Dialect, names: list[str]) -> list[dict[str, Any]]:
    """The request's ``tools`` array for ``names`` in the dialect's shape."""
    out: list[dict[str, Any]] = []
    for name in dict.fromkeys(names):
        description, schema = _SCHEMAS[name]
        if dialect == "openai-chat":
            out.append({"type": "function", "function": {"name": name, "description": description, "parameters": schema}})
        else:
            out.append({"name": name, "description": description, "input_schema": schema})
    return out


# ------------------------------------------------------------------ wire writers


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{head}data: {body}\n\n".encode()


def _openai_events(scenario: str, calls: list[_Call], text: str | None) -> tuple[list[bytes], list[int]]:
    """OpenAI Chat chunks; returns the events and, per call, the index of its last fragment event."""
    base = {
        "id": f"chatcmpl-{_token(scenario, 29)}",
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": _OPENAI_MODEL,
        "service_tier": "default",
        "system_fingerprint": "fp_" + _token(scenario + "fp", 10).lower(),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse({**base, "choices": [choice]})

    events = [chunk({"role": "assistant", "content": None, "refusal": None})]
    for piece in _split(text or ""):
        events.append(chunk({"content": piece}))
    last: list[int] = []
    for index, call in enumerate(calls):
        call_id = "call_" + _token(f"{scenario}/{index}", 24)
        start = {"index": index, "id": call_id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        events.append(chunk({"tool_calls": [start]}))
        for fragment in call.fragments:
            events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}))
        last.append(len(events) - 1)
    events.append(chunk({}, "tool_calls"))
    events.append(_sse("[DONE]"))
    return events, last


def _anthropic_events(scenario: str, calls: list[_Call], text: str | None) -> tuple[list[bytes], list[int]]:
    """Anthropic Messages events; returns the events and, per call, the index of its last fragment event."""
    message = {
        "id": "msg_01" + _token(scenario, 22),
        "type": "message",
        "role": "assistant",
        "model": _ANTHROPIC_MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 612, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 2},
    }
    events = [_sse({"type": "message_start", "message": message}, "message_start")]
    block = 0
    if text:
        start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
        events.append(_sse(start, "content_block_start"))
        events.append(_sse({"type": "ping"}, "ping"))
        for piece in _split(text):
            delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
            events.append(_sse(delta, "content_block_delta"))
        events.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
        block = 1
    last: list[int] = []
    for n, call in enumerate(calls):
        index = block + n
        use = {"type": "tool_use", "id": "toolu_01" + _token(f"{scenario}/{n}", 22), "name": call.name, "input": {}}
        events.append(_sse({"type": "content_block_start", "index": index, "content_block": use}, "content_block_start"))
        if not text and n == 0:
            events.append(_sse({"type": "ping"}, "ping"))
        for fragment in call.fragments or ("",):
            delta = {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": fragment}}
            events.append(_sse(delta, "content_block_delta"))
        last.append(len(events) - 1)
        events.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    output_tokens = 24 + sum(len("".join(c.fragments)) // 4 for c in calls)
    delta = {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": output_tokens}}
    events.append(_sse(delta, "message_delta"))
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    return events, last


# ------------------------------------------------------------------ scenarios


def _csv_export(min_bytes: int) -> str:
    """A deterministic CSV ledger of at least ``min_bytes`` UTF-8 bytes."""
    rows = ["date,invoice,customer,amount_eur"]
    customers = ("Nordlys AS", "Fjord Logistics", "Kvarts Studio", "Bergen Bakeri", "Polar Data")
    n = 0
    size = len(rows[0]) + 1
    while size < min_bytes:
        n += 1
        row = f"2024-{n % 12 + 1:02d}-{n % 28 + 1:02d},INV-{n:06d},{customers[n % 5]},{(n * 7919) % 100000 / 100:.2f}"
        rows.append(row)
        size += len(row) + 1
    return "\n".join(rows) + "\n"


_REPORT_PY = '''"""Monthly revenue report."""

import csv
from collections import defaultdict


def revenue_by_customer(path):
    totals = defaultdict(float)
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            totals[row["customer"]] += float(row["amount_eur"])
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


if __name__ == "__main__":
    for customer, total in revenue_by_customer("exports/ledger-2024.csv").items():
        print(f"{customer:<20} {total:>12,.2f}")
'''


def _scenarios() -> list[dict[str, Any]]:
    """Logical scenarios, dialect-independent: calls, text, expected outcome."""
    weather = _dumps({"city": "Oslo", "unit": "celsius"})
    sql = _dumps({"query": "SELECT customer, SUM(amount_eur) AS total FROM invoices WHERE paid = false GROUP BY customer ORDER BY total DESC LIMIT 20", "database": "billing"})
    tromso = _dumps({"city": "Tromsø", "unit": "celsius"})
    oversized = _dumps({"path": "exports/ledger-2024.csv", "content": _csv_export(DEFAULT_MAX_TOOL_ARGUMENT_BYTES + 24_000)})
    report = _dumps({"path": "src/report.py", "content": _REPORT_PY})
    note = _dumps({"path": "notes/release.md", "body": "# Release checklist\n\n- tag v0.4.0\n- publish the wheel\n- announce in #eng"})
    invalid = '{"path": "notes/todo.md", "body": "- rotate the staging deploy key\\n- update the runbook",}'
    return [
        dict(key="single", title="Single tool call", calls=[_Call("get_weather", tuple(_split(weather)))],
             expected=("committed",), description="One get_weather call, arguments in small fragments; commits at stream end."),
        dict(key="parallel", title="Two parallel tool calls", text="I'll check the weather and pull the unpaid invoices.",
             calls=[_Call("get_weather", tuple(_split(tromso))), _Call("run_sql", tuple(_split(sql, 3)))],
             expected=("committed", "committed"), description="Assistant text first (the dashboard shows calls, not text), then get_weather and run_sql; both commit, in provider order."),
        dict(key="noargs", title="Tool with no arguments", calls=[_Call("list_open_tabs", ())],
             expected=("committed",), description="list_open_tabs streams no argument text; it finalizes as {} and commits."),
        dict(key="oversized", title="Oversized arguments", calls=[_Call("write_file", tuple(_chunked(oversized, 4096)))],
             expected=("failed:arguments_exceed_max_bytes",),
             description=f"write_file with a {len(oversized.encode()) // 1024} KiB CSV in its arguments: over the 256 KiB limit, FAILED and the buffer dropped."),
        dict(key="cancel", title="Cancel mid-stream", calls=[_Call("write_file", tuple(_split(report)))], cancel_at=0.4,
             expected=("cancelled",), expected_end="cancelled",
             description="write_file streaming a Python module; the replay presses Stop part-way: CANCELLED with an error result."),
        dict(key="truncated", title="Truncated stream", calls=[_Call("write_note", tuple(_split(note)))], truncate_at=0.6,
             expected=("failed:stream_truncated",), expected_end="truncated",
             description="The connection drops mid-arguments: no normal end, so nothing commits."),
        dict(key="invalid", title="Invalid JSON arguments", calls=[_Call("write_note", tuple(_split(invalid)))],
             expected=("failed:invalid_json",), description="The stream ends normally but the arguments have a trailing comma: strict JSON rejects them."),
    ]


def _canary_fragments() -> tuple[str, ...]:
    """connect_database arguments with :data:`CANARY_SECRET` split across four fragments."""
    prefix = '{"host": "db.internal.example", "user": "report_bot", "password": "'
    suffix = '", "query": "SELECT count(*) FROM invoices WHERE paid = false"}'
    secret = [CANARY_SECRET[:10], CANARY_SECRET[10:16], CANARY_SECRET[16:22], CANARY_SECRET[22:]]
    return tuple(_split(prefix) + secret + _split(suffix, 2))


def _build(dialect: Dialect, prefix: str, spec: dict[str, Any]) -> Demo:
    name = f"{prefix}-{spec['key']}" if prefix else spec["key"]
    calls: list[_Call] = spec["calls"]
    writer = _openai_events if dialect == "openai-chat" else _anthropic_events
    events, last = writer(name, calls, spec.get("text"))
    cancel_after: int | None = None
    if "truncate_at" in spec:
        # Cut inside the last call's fragments: no finish chunk, no [DONE] / message_stop.
        first = last[-1] - len(calls[-1].fragments) + 1
        events = events[: first + int(len(calls[-1].fragments) * spec["truncate_at"])]
    if "cancel_at" in spec:
        first = last[-1] - len(calls[-1].fragments) + 1
        cancel_after = first + int(len(calls[-1].fragments) * spec["cancel_at"])
    label = "OpenAI Chat" if dialect == "openai-chat" else "Anthropic"
    return Demo(
        name=name,
        title=f"{spec['title']} ({label})",
        dialect=dialect,
        description=spec["description"],
        wire=b"".join(events),
        tools=_tools(dialect, [c.name for c in calls]),
        cancel_after=cancel_after,
        expected=spec["expected"],
        expected_end=spec.get("expected_end", "complete"),
        events=len(events),
    )


def _all_demos() -> dict[str, Demo]:
    demos: dict[str, Demo] = {}
    for spec in _scenarios():
        for dialect, prefix in (("openai-chat", "openai"), ("anthropic", "anthropic")):
            demo = _build(dialect, prefix, spec)  # type: ignore[arg-type]
            demos[demo.name] = demo
    canary = dict(
        key="canary",
        title="Canary: secret in arguments",
        calls=[_Call("connect_database", _canary_fragments())],
        expected=("committed",),
        description="connect_database with a password split across fragments. Before commit only name and byte counts may show.",
    )
    demos["canary"] = _build("openai-chat", "", canary)
    return demos


#: All demos by name: ``openai-single``, ``anthropic-single``, ..., ``canary``.
DEMOS: dict[str, Demo] = _all_demos()

__all__ = ["CANARY_SECRET", "DEMOS", "Demo", "DEFAULT_MAX_TOOL_ARGUMENT_BYTES"]
