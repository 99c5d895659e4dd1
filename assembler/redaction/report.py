"""Shareable reports of an assembled capture: a JSON document and a Markdown summary.

Neither carries argument text: calls are described by name, id, verdict, byte and
fragment counts, diagnosis and quirks, so either can be pasted into a public issue. Every
string a provider, a gateway or a file name controls is a code span in the Markdown
(:func:`code_span`), so a tool name such as ``x](https://evil.example/t.png)`` stays text.
"""

from __future__ import annotations

import re
from typing import Any

from toollatch.core.model import StreamResult


def json_report(results: list[StreamResult], source: str) -> dict[str, Any]:
    """Like ``assemble --json`` but with ``arguments`` left out of every call."""
    streams = []
    for result in results:
        doc = result.to_json()
        for call in doc["calls"]:
            call.pop("arguments", None)
        streams.append(doc)
    return {"source": source, "streams": streams}


_BACKTICKS = re.compile("`+")


def code_span(value: Any, *, in_table: bool = False) -> str:
    """``value`` as one Markdown code span, ``—`` when empty: whatever it holds is shown as
    text, never as a link, image, HTML or emphasis (CommonMark 0.31, "Code spans").

    The fence is one backtick longer than the longest run of backticks in the value, and
    a value that starts or ends with a backtick or a space is padded with one space, which
    the renderer removes again. Line breaks become spaces (a code span cannot hold one and
    a table row must not). ``in_table``: ``|`` is escaped as ``\\|``, which GitHub's tables
    read as a pipe inside a cell, code spans included (GFM 0.29, "Tables").
    """
    if value is None or value == "":
        return "—"
    text = " ".join(str(value).splitlines()) if _BREAKS.search(str(value)) else str(value)
    if in_table:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


#: What ``str.splitlines`` splits at.
_BREAKS = re.compile("[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


def _cell(value: Any) -> str:
    return code_span(value, in_table=True)


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
    lines = [f"### toollatch: {code_span(source)}", ""]
    for i, result in enumerate(results):
        detail = f" ({code_span(result.end_detail)})" if result.end_detail else ""
        lines.append(f"**Stream {i}** — dialect {code_span(result.dialect)}, end {code_span(result.end)}" + detail)
        lines.append("")
        lines.append("| # | tool | call id | verdict | reason | bytes | fragments | executor | where it broke |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for n, call in enumerate(result.calls):
            reason = (call.reason or "").split(":", 1)[0]
            lines.append(
                f"| {n} | {_cell(call.name)} | {_cell(call.call_id)} | {call.state.value.upper()} | {_cell(reason)} "
                f"| {call.bytes} | {call.fragments} | {_cell(call.executor)} | {_cell(_diagnosis(call.diagnosis))} |"
            )
        if not result.calls:
            lines.append("| — | no tool calls | | | | | | | |")
        if result.quirks:
            lines.append("")
            lines.append("Quirks: " + ", ".join(f"{code_span(k)} ×{v}" for k, v in result.quirks.items()))
        lines.append("")
    lines.append("_Argument text omitted; byte and fragment counts are exact._")
    return "\n".join(lines) + "\n"
