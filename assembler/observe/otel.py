"""OpenTelemetry wiring: :class:`~toollatch.observe.telemetry.SpanRecord` values and the assembly
metrics out over OTLP/HTTP (protobuf), through the OpenTelemetry SDK.

Needs the ``[otel]`` extra (``opentelemetry-sdk``, ``opentelemetry-exporter-otlp-proto-http``);
imported only when telemetry is on (:func:`toollatch.observe.telemetry.endpoint`). Without the
extra, :func:`for_config` logs one warning and returns None: the stream goes on as before.

A collector that is down, refuses or never answers costs the stream nothing: spans are
handed to a ``BatchSpanProcessor`` (its own thread; a bounded queue of
:data:`MAX_QUEUE` spans, beyond which spans are dropped), and each export gives up after
:data:`EXPORT_TIMEOUT_S` seconds (``OTEL_EXPORTER_OTLP_TIMEOUT`` / ``..._TRACES_TIMEOUT``
override it, as the SDK reads them). Metrics go through a ``PeriodicExportingMetricReader``
(``OTEL_METRIC_EXPORT_INTERVAL``, default 60 s) with the same timeout, to the same
collector; none with ``OTEL_METRICS_EXPORTER=none`` or when only
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set.

Every other ``OTEL_*`` variable the SDK reads applies (``OTEL_EXPORTER_OTLP_HEADERS`` for a
collector's credentials, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``). The providers
are private to toollatch: the application's global tracer and meter providers are left alone.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Any

from toollatch.observe.metrics import Metrics
from toollatch.observe.telemetry import SpanRecord, endpoint

log = logging.getLogger("toollatch.telemetry")

#: Seconds one export request may take before it is given up (retries included).
EXPORT_TIMEOUT_S = 2.0
#: Spans waiting for export at most; more are dropped.
MAX_QUEUE = 2048
#: Span events (call transitions) kept per stream span at most.
MAX_EVENTS = 1024

_lock = threading.Lock()
_instances: dict[tuple[str | None, str], "Telemetry"] = {}
_warned = False
_at_exit = False


class Telemetry:
    """The tracer and meter of one OTLP destination.

    ``base``: a base URL (``http://collector:4318``; ``/v1/traces`` and ``/v1/metrics`` are
    appended), or None to take the endpoint from the ``OTEL_EXPORTER_OTLP_*`` variables.
    Raises ImportError without the ``[otel]`` extra.
    """

    def __init__(self, base: str | None) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanLimits, TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        timeout = None if _env_timeout() else EXPORT_TIMEOUT_S
        root = base.rstrip("/") if base else None
        resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "toollatch"})
        span_exporter = OTLPSpanExporter(endpoint=f"{root}/v1/traces" if root else None, timeout=timeout)
        self.tracer_provider = TracerProvider(resource=resource, span_limits=SpanLimits(max_events=MAX_EVENTS), shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(
            BatchSpanProcessor(span_exporter, max_queue_size=MAX_QUEUE, export_timeout_millis=int(EXPORT_TIMEOUT_S * 1000))
        )
        readers = []
        if _metrics_wanted(root):
            metric_exporter = OTLPMetricExporter(endpoint=f"{root}/v1/metrics" if root else None, timeout=timeout)
            readers.append(PeriodicExportingMetricReader(metric_exporter, export_timeout_millis=EXPORT_TIMEOUT_S * 1000))
        self.meter_provider = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
        self.tracer = self.tracer_provider.get_tracer("toollatch")
        meter = self.meter_provider.get_meter("toollatch")
        self._args_bytes = meter.create_histogram("tool_assemble_args_bytes", unit="By", description="UTF-8 bytes of argument text assembled per tool call.")
        self._invalid_json = meter.create_counter("tool_assemble_invalid_json", description="Calls whose joined arguments were not strict JSON.")
        self._overflow = meter.create_counter("tool_assemble_overflow", description="Calls over max_tool_argument_bytes.")
        self._to_commit = meter.create_histogram("tool_assemble_to_commit_seconds", unit="s", description="Seconds from the stream's normal end to the call's commit.")

    # ------------------------------------------------------------------ spans

    def export(self, spans: list[SpanRecord]) -> None:
        """Hand ``spans`` to the batch processor (returns at once; never raises)."""
        try:
            for record in spans:
                span = self.tracer.start_span(record.name, start_time=record.start_ns, attributes=record.attributes)
                for event in record.events:
                    span.add_event(event.name, event.attributes, timestamp=event.time_ns)
                span.end(end_time=record.end_ns)
        except Exception as exc:  # telemetry must never break a stream
            log.warning("telemetry: spans not exported (%s)", type(exc).__name__)

    # ------------------------------------------------------------------ metrics

    def metrics(self, also: Metrics | None = None, *, tool_name_label: bool = False) -> "OtelMetrics":
        """The assembly metrics recorded on this meter (and on ``also``, the Prometheus
        metrics served at ``/metrics``, when given)."""
        return OtelMetrics(self, also, tool_name_label=also.tool_name_label if also is not None else tool_name_label)

    def flush(self, timeout_s: float = EXPORT_TIMEOUT_S) -> bool:
        """Export what is queued now; False when it could not be done in ``timeout_s``."""
        millis = int(timeout_s * 1000)
        spans = self.tracer_provider.force_flush(millis)
        return bool(self.meter_provider.force_flush(millis)) and spans


    def shutdown(self) -> None:
        """Export what is queued (each export bounded by the timeout), then stop."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


class OtelMetrics:
    """The four assembly observations of :class:`~toollatch.observe.metrics.Metrics`, recorded on
    OpenTelemetry instruments of the same names and labels (``provider``, ``tool_name``
    when ``metrics_tool_name_label``), and passed on to ``also`` when given. Any other
    attribute (``registry``, ``exposition``) is ``also``'s."""

    def __init__(self, telemetry: Telemetry, also: Metrics | None, *, tool_name_label: bool) -> None:
        self._t = telemetry
        self._also = also
        self.tool_name_label = tool_name_label

    def __getattr__(self, name: str) -> Any:
        also = self.__dict__.get("_also")
        if also is None:
            raise AttributeError(name)
        return getattr(also, name)

    def _labels(self, provider: str, tool_name: str | None) -> dict[str, str]:
        if self.tool_name_label:
            return {"provider": provider, "tool_name": (tool_name or "")[:128]}
        return {"provider": provider}

    def call_finalized(self, provider: str, tool_name: str | None, nbytes: int) -> None:
        self._t._args_bytes.record(nbytes, self._labels(provider, tool_name))
        if self._also is not None:
            self._also.call_finalized(provider, tool_name, nbytes)

    def call_invalid_json(self, provider: str, tool_name: str | None) -> None:
        self._t._invalid_json.add(1, self._labels(provider, tool_name))
        if self._also is not None:
            self._also.call_invalid_json(provider, tool_name)

    def call_overflow(self, provider: str, tool_name: str | None) -> None:
        self._t._overflow.add(1, self._labels(provider, tool_name))
        if self._also is not None:
            self._also.call_overflow(provider, tool_name)

    def call_committed(self, provider: str, tool_name: str | None, seconds: float) -> None:
        self._t._to_commit.record(max(seconds, 0.0), self._labels(provider, tool_name))
        if self._also is not None:
            self._also.call_committed(provider, tool_name, seconds)


def _metrics_wanted(root: str | None) -> bool:
    """Metrics go where traces go, unless only a traces endpoint is given
    (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` alone) or ``OTEL_METRICS_EXPORTER=none``."""
    if os.environ.get("OTEL_METRICS_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(root or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))


def _env_timeout() -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT"))


def for_config(configured: str | None) -> Telemetry | None:
    """The process's :class:`Telemetry` for ``configured`` (the ``telemetry_otlp_endpoint``
    setting) or the ``OTEL_EXPORTER_OTLP_*`` variables; None when telemetry is off, or on
    without the ``[otel]`` extra installed (then one warning is logged). One per destination:
    every latched stream of the process shares it."""
    global _warned, _at_exit
    where = endpoint(configured)
    if where is None:
        return None
    key = (configured or None, where)
    with _lock:
        if key in _instances:
            return _instances[key]
        try:
            made = Telemetry(configured or None)
        except ImportError:
            if not _warned:
                log.warning("telemetry: an OTLP endpoint is set, but the OpenTelemetry SDK is not installed (pip install 'toollatch[otel]')")
                _warned = True
            return None
        if not _at_exit:
            atexit.register(shutdown_all)  # the last spans get their export at exit
            _at_exit = True
        _instances[key] = made
        return made


def shutdown_all() -> None:
    """Shut down every :class:`Telemetry` of the process (the next stream makes a new one)."""
    with _lock:
        made = list(_instances.values())
        _instances.clear()
    for telemetry in made:
        telemetry.shutdown()


__all__ = ["EXPORT_TIMEOUT_S", "MAX_QUEUE", "OtelMetrics", "Telemetry", "for_config", "shutdown_all"]
