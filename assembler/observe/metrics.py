"""Prometheus metrics of assembly (DESIGN.md, "Observability").

Labels stay low-cardinality: ``provider`` (the dialect) always, ``tool_name`` only when
``metrics_tool_name_label`` is on. Label values are tool names and dialects, never
argument text. Each :class:`Metrics` has its own ``CollectorRegistry`` so several can
coexist (tests, several apps in one process).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

#: Buckets in bytes for ``tool_assemble_args_bytes``: 16 B … 1 MiB.
BYTE_BUCKETS = (16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)
#: Buckets in seconds for ``tool_assemble_to_commit_seconds``.
SECOND_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)


class Metrics:
    """The five assembly metrics, registered on a private registry."""

    def __init__(self, *, tool_name_label: bool = False) -> None:
        self.registry = CollectorRegistry()
        self.tool_name_label = tool_name_label
        labels = ["provider", "tool_name"] if tool_name_label else ["provider"]
        self.args_bytes = Histogram(
            "tool_assemble_args_bytes",
            "UTF-8 bytes of argument text assembled per tool call.",
            labels,
            buckets=BYTE_BUCKETS,
            registry=self.registry,
        )
        self.invalid_json = Counter(
            "tool_assemble_invalid_json", "Calls whose joined arguments were not strict JSON.", labels, registry=self.registry
        )
        self.overflow = Counter(
            "tool_assemble_overflow", "Calls over max_tool_argument_bytes.", labels, registry=self.registry
        )
        self.to_commit_seconds = Histogram(
            "tool_assemble_to_commit_seconds",
            "Seconds from the stream's normal end to the call's commit.",
            labels,
            buckets=SECOND_BUCKETS,
            registry=self.registry,
        )
        self.rejected_not_committed = Counter(
            "tool_execute_rejected_not_committed",
            "Times an executor was handed something that is not a committed call.",
            registry=self.registry,
        )

    def _labels(self, provider: str, tool_name: str | None) -> dict[str, str]:
        if self.tool_name_label:
            return {"provider": provider, "tool_name": tool_name or ""}
        return {"provider": provider}

    def call_finalized(self, provider: str, tool_name: str | None, nbytes: int) -> None:
        self.args_bytes.labels(**self._labels(provider, tool_name)).observe(nbytes)

    def call_invalid_json(self, provider: str, tool_name: str | None) -> None:
        self.invalid_json.labels(**self._labels(provider, tool_name)).inc()

    def call_overflow(self, provider: str, tool_name: str | None) -> None:
        self.overflow.labels(**self._labels(provider, tool_name)).inc()

    def call_committed(self, provider: str, tool_name: str | None, seconds: float) -> None:
        self.to_commit_seconds.labels(**self._labels(provider, tool_name)).observe(max(seconds, 0.0))

    def exposition(self) -> bytes:
        """The Prometheus text exposition format (``text/plain; version=0.0.4``)."""
        return generate_latest(self.registry)
