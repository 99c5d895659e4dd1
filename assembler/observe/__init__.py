"""Observability: metrics of assembly, OpenTelemetry spans, the timing lens of a stream."""
