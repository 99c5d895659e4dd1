"""Observability routes: Prometheus metrics and the effective configuration.

``GET /metrics`` serves the five assembly metrics (DESIGN.md, "Observability") in the
Prometheus text format; ``GET /settings`` shows them with the effective
``agent_stream_assemble`` configuration, and ``GET /api/settings`` is its JSON twin.
Metric labels are dialects (and tool names, only when configured): never argument text.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from toollatch.observe.metrics import Metrics

from toollatch.web.pages.render import Renderer
from toollatch.web.settings import Settings

#: The metrics shown in the panel, with what each one means.
PANEL = (
    ("tool_assemble_args_bytes", "argument bytes per finalized call (histogram)"),
    ("tool_assemble_invalid_json_total", "calls whose text was not strict JSON"),
    ("tool_assemble_overflow_total", "calls over max_tool_argument_bytes"),
    ("tool_assemble_to_commit_seconds", "stream end → commit (histogram)"),
    ("tool_execute_rejected_not_committed_total", "non-committed calls refused by an executor"),
)


def summary(metrics: Metrics) -> list[dict[str, Any]]:
    """One row per metric: total count (counters) or count and sum (histograms)."""
    totals: dict[str, float] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name.endswith(("_total", "_count", "_sum")):
                totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    rows = []
    for name, meaning in PANEL:
        if name.endswith("_total"):
            rows.append({"metric": name, "meaning": meaning, "count": totals.get(name, 0.0), "sum": None})
        else:
            rows.append({"metric": name, "meaning": meaning, "count": totals.get(f"{name}_count", 0.0), "sum": totals.get(f"{name}_sum", 0.0)})
    return rows


def build_router(settings: Settings, metrics: Metrics, renderer: Renderer) -> APIRouter:
    router = APIRouter()

    @router.get("/metrics")
    def prometheus() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @router.get("/api/settings")
    def settings_json() -> JSONResponse:
        return JSONResponse({"agent_stream_assemble": settings.config.to_json(), "metrics": summary(metrics)})

    @router.get("/settings", response_class=HTMLResponse)
    def settings_page() -> HTMLResponse:
        html = renderer.page("settings.html", config=settings.config.to_json(), metrics=summary(metrics))
        return HTMLResponse(html)

    return router
