"""Fleet telemetry records: what a finished stream exports, with no argument text.

This module is pure: it turns what the latch decided (:class:`~toollatch.core.model.StreamResult`
records) into plain :class:`SpanRecord` values, and knows nothing of OpenTelemetry.
:mod:`toollatch.observe.otel` sends them over OTLP/HTTP when telemetry is configured
(:func:`endpoint`); docs/telemetry.md lists every attribute.

It is the redaction boundary for telemetry: an attribute is built from an allow-list of
fields only, so nothing of a call's argument text, committed or not, can cross (no
``arguments``, no ``diagnosis``), and no provider free text either: a reason is reduced to
its code (``stream_error``, not the provider's message), a stream end to its kind
(``end_detail`` is left out), quirks to the project's own quirk names. Names and ids are
cut to :data:`MAX_LABEL_CHARS` characters.

Attribute names follow the OpenTelemetry GenAI semantic conventions where one fits
(``gen_ai.provider.name``, ``gen_ai.system``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``);
the rest are ``toollatch.*``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Union

from toollatch.core.model import CallOutcome, CallState, Reason, StreamResult

AttributeValue = Union[str, int, float, bool, Sequence[str], Sequence[int]]

#: Longest tool name or tool_call_id exported, in characters.
MAX_LABEL_CHARS = 128

#: The provider a dialect belongs to: ``gen_ai.provider.name`` (and the older ``gen_ai.system``).
PROVIDERS: dict[str, str] = {
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "bedrock-converse": "aws.bedrock",
    "bedrock-invoke": "aws.bedrock",
    "gemini": "gcp.gemini",
    "cohere": "cohere",
}

#: Span name of a stream, and event name of a call transition.
STREAM_SPAN = "toollatch.stream"
CALL_EVENT = "toollatch.call.transition"

#: Environment variables that turn telemetry on (the OpenTelemetry SDK's own).
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")

_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One span event: ``name``, wall-clock ``time_ns`` (ns since the epoch), ``attributes``."""

    name: str
    time_ns: int
    attributes: dict[str, AttributeValue]


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One stream as a span: ``name``, wall-clock ``start_ns`` / ``end_ns`` (ns since the
    epoch), ``attributes``, and one :class:`EventRecord` per call transition."""

    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, AttributeValue]
    events: list[EventRecord] = field(default_factory=list)


def endpoint(configured: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """Where telemetry goes, or None when it is off.

    ``configured``: the ``telemetry_otlp_endpoint`` setting (a base URL such as
    ``http://collector:4318``), which wins; otherwise ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
    or ``OTEL_EXPORTER_OTLP_ENDPOINT`` as the OpenTelemetry SDK reads them. Off when
    ``OTEL_SDK_DISABLED`` is ``true`` (OpenTelemetry SDK environment variable specification).
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if configured:
        return configured
    for name in ENDPOINT_VARIABLES:
        if env.get(name, "").strip():
            return env[name].strip()
    return None


_REASONS = frozenset(r.value for r in Reason)


def reason_code(reason: str | None) -> str | None:
    """The :class:`~toollatch.core.model.Reason` code a reason starts with
    (``"stream_error: <provider text>"`` → ``"stream_error"``); ``"other"`` for a reason
    that starts with no known code, None for no reason."""
    if not reason:
        return None
    code = reason.split(":", 1)[0].strip()
    return code if code in _REASONS else "other"


def _label(value: str) -> str:
    return value[:MAX_LABEL_CHARS]


def _call_attributes(call: CallOutcome, provider: str) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {"gen_ai.provider.name": provider}
    if call.name:
        attrs["gen_ai.tool.name"] = _label(call.name)
    if call.call_id:
        attrs["gen_ai.tool.call.id"] = _label(call.call_id)
    attrs |= {
        "toollatch.call.index": ".".join(str(part) for part in call.key),
        "toollatch.call.executor": call.executor,
    }
    code = reason_code(call.reason)
    if code is not None:
        attrs["toollatch.call.reason"] = code
    return attrs


def _time_to_commit(call: CallOutcome) -> float | None:
    """Seconds from the call's first transition (it opened) to its commit."""
    times = {t.state: t.t for t in call.transitions}
    if CallState.COMMITTED not in times or not call.transitions:
        return None
    return max(0.0, times[CallState.COMMITTED] - call.transitions[0].t)


def stream_span(result: StreamResult, index: int, start_ns: int, end_ns: int, *, origin: str) -> SpanRecord:
    """The span of one stream (``result``, the ``index``-th of its input), from ``start_ns``
    to ``end_ns`` (wall clock, ns since the epoch); ``origin`` says what observed it
    (``latch``, or ``serve`` for a live session of the dashboard).

    A transition's ``t`` (seconds since the stream started) places its event after
    ``start_ns``, never after ``end_ns``.
    """
    provider = PROVIDERS.get(result.dialect, result.dialect)
    states = [c.state for c in result.calls]
    quirks = sorted(name for name in result.quirks if _CODE.fullmatch(name))
    attrs: dict[str, AttributeValue] = {
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "gen_ai.operation.name": "chat",
        "toollatch.origin": origin,
        "toollatch.dialect": result.dialect,
        "toollatch.stream.index": index,
        "toollatch.stream.end": result.end or "open",
        "toollatch.calls": len(result.calls),
        "toollatch.calls.committed": states.count(CallState.COMMITTED),
        "toollatch.calls.failed": states.count(CallState.FAILED),
        "toollatch.calls.cancelled": states.count(CallState.CANCELLED),
        "toollatch.results_owed": len(result.results),
        "toollatch.quirks": quirks,
        "toollatch.quirk_counts": [result.quirks[name] for name in quirks],
    }
    events: list[EventRecord] = []
    for call in result.calls:
        base = _call_attributes(call, provider)
        to_commit = _time_to_commit(call)
        for transition in call.transitions:
            attrs_t: dict[str, AttributeValue] = {**base, "toollatch.call.state": transition.state.value, "toollatch.call.t_s": round(transition.t, 6)}
            if transition.state is CallState.COMMITTED and to_commit is not None:
                attrs_t["toollatch.call.time_to_commit_s"] = round(to_commit, 6)
            if transition.state is not CallState.OPEN:  # the counts once the arguments are in
                attrs_t["toollatch.call.bytes"] = call.bytes
                attrs_t["toollatch.call.fragments"] = call.fragments
            if not transition.state.terminal:
                attrs_t.pop("toollatch.call.reason", None)  # the reason belongs to the verdict
            when = min(end_ns, start_ns + max(0, int(transition.t * 1e9)))
            events.append(EventRecord(CALL_EVENT, when, attrs_t))
    events.sort(key=lambda e: e.time_ns)
    return SpanRecord(STREAM_SPAN, start_ns, max(start_ns, end_ns), attrs, events)


def turn_spans(results: Iterable[StreamResult], start_ns: int, end_ns: int, *, origin: str) -> list[SpanRecord]:
    """One :func:`stream_span` per stream of a turn or live session, all within
    ``start_ns`` … ``end_ns``."""
    return [stream_span(r, i, start_ns, end_ns, origin=origin) for i, r in enumerate(results)]


__all__ = ["CALL_EVENT", "STREAM_SPAN", "EventRecord", "SpanRecord", "endpoint", "reason_code", "stream_span", "turn_spans"]
