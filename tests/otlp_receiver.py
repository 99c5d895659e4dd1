"""A real OTLP/HTTP receiver on loopback for the telemetry tests: it decodes every
``POST /v1/traces`` (``ExportTraceServiceRequest``) and ``/v1/metrics``
(``ExportMetricsServiceRequest``) with the ``opentelemetry-proto`` package and keeps the
raw bytes too, so a test can search everything that crossed. Also a port that accepts
connections and never answers, and one that refuses them."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest, ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class Received:
    raw: list[bytes] = field(default_factory=list)
    traces: list[ExportTraceServiceRequest] = field(default_factory=list)
    metrics: list[ExportMetricsServiceRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def spans(self) -> list[Any]:
        with self.lock:
            return [s for req in self.traces for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]

    def metric_names(self) -> set[str]:
        with self.lock:
            return {m.name for req in self.metrics for rm in req.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}

    def all_bytes(self) -> bytes:
        with self.lock:
            return b"".join(self.raw)


def value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def attrs(item: Any) -> dict[str, Any]:
    """A decoded span's or event's attributes as a dict."""
    return {kv.key: value(kv.value) for kv in item.attributes}


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, Received]]:
    """A receiver on a free loopback port: ``(base_url, received)``."""
    got = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with got.lock:
                got.raw.append(body)
                if self.path == "/v1/traces":
                    got.traces.append(ExportTraceServiceRequest.FromString(body))
                    answer = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    got.metrics.append(ExportMetricsServiceRequest.FromString(body))
                    answer = ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_error(404)
                    return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_port() -> Iterator[tuple[str, socket.socket]]:
    """A port that accepts connections (the kernel's backlog) and never answers: its URL
    and its listening socket."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", sock
    finally:
        sock.close()


def refused_port() -> str:
    """A loopback port nothing listens on (connections are refused)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"
