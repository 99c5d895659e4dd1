"""Shareable reports of an assembled capture: a JSON document and a Markdown summary.

Neither carries argument text: calls are described by name, id, verdict, byte and
fragment counts, diagnosis and quirks, so either can be pasted into a public issue.
"""

from __future__ import annotations

from typing import Any

from .model import StreamResult


def json_report(results: list[StreamResult], source: str) -> dict[str, Any]:
    """Like ``assemble --json`` but with ``arguments`` left out of every call."""
    streams = []
    for result in results:
        doc = result.to_json()
        for call in doc["calls"]:
            call.pop("arguments", None)
        streams.append(doc)
    return {"source": source, "streams": streams}


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ") if value not in (None, "") else "—"


def _diagnosis(diag: dict[str, Any] | None) -> str:
    if not diag:
        return ""
    kind = diag.get("kind")
    if kind == "invalid":
        return f"broke in fragment {diag['fragment_index']} at byte {diag['byte_offset']}, expected {diag['expected']}"
    if kind == "incomplete":
        return f"valid prefix cut off at depth {diag['depth']}, expected {diag['expected']}"
    if kind == "cut_off":
        inner = diag.get("text") or {}
        state = {"incomplete": f"an incomplete prefix at depth {inner.get('depth')}", "complete": "a complete value"}.get(
            str(inner.get("kind")), "invalid JSON" if inner else "no text"
        )
        return f"stream {diag['stream_end']} after {diag['bytes']} bytes in {diag['fragments']} fragments: {state}"
    if kind == "schema":
        return "schema errors at " + ", ".join(f"{e['pointer']} ({e['keyword']})" for e in diag["errors"])
    return str(diag.get("problem") or kind)


def markdown_summary(results: list[StreamResult], source: str) -> str:
    """A Markdown summary ready to paste into an issue."""
    lines = [f"### toollatch: `{source}`", ""]
    for i, result in enumerate(results):
        lines.append(f"**Stream {i}** — dialect `{result.dialect}`, end `{result.end}`" + (f" ({result.end_detail})" if result.end_detail else ""))
        lines.append("")
        lines.append("| # | tool | call id | verdict | reason | bytes | fragments | executor | where it broke |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for n, call in enumerate(result.calls):
            reason = (call.reason or "").split(":", 1)[0]
            lines.append(
                f"| {n} | {_cell(call.name)} | {_cell(call.call_id)} | {call.state.value.upper()} | {_cell(reason)} "
                f"| {call.bytes} | {call.fragments} | {call.executor} | {_cell(_diagnosis(call.diagnosis))} |"
            )
        if not result.calls:
            lines.append("| — | no tool calls | | | | | | | |")
        if result.quirks:
            lines.append("")
            lines.append("Quirks: " + ", ".join(f"`{k}` ×{v}" for k, v in result.quirks.items()))
        lines.append("")
    lines.append("_Argument text omitted; byte and fragment counts are exact._")
    return "\n".join(lines) + "\n"
