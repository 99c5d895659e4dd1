"""Run the conformance cases through an adapter and score it per bug class.

A case is right when all of these hold for the calls the adapter hands over:

1. the calls it hands to execute are exactly the expected COMMITTED client calls, in order,
   each with the expected name, id (where the case names one) and arguments (the argument
   text must parse as strict JSON, RFC 8259, to the expected value; empty text counts as ``{}``);
2. every client call the case expects with an id is handed over (to execute or rejected):
   each ``tool_call_id`` owes exactly one result, so none may be missing or handed twice;
3. nothing the provider runs itself (``executor: server``) is handed to execute.

Cases of a dialect the adapter cannot read are ``n/a`` and not scored.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from toollatch.wire.capture import CaptureError, ProviderEvent, read_capture
from toollatch.core.pipeline import Pipeline
from toollatch.conformance.adapters import ADAPTERS, Adapter, AdapterError, CaseInput, CommandAdapter, Handed, NotApplicable
from toollatch.conformance.cases import CLASSES, Case, CaseError, all_cases


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_loads(text: str) -> Any:
    """Parse ``text`` as RFC 8259 JSON; duplicate keys and NaN/Infinity raise ``ValueError``."""
    return json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)


def case_input(case: Case) -> CaseInput:
    """Decode the case body with toollatch's decoder and detect its dialect."""
    try:
        events: list[ProviderEvent] = read_capture(case.body, case.name)
    except CaptureError:
        events = []
    dialect = None
    probe = Pipeline(emit_events=False, name=case.name)
    try:
        for event in events:
            probe.feed(event)
            if probe.dialect:
                break
        dialect = probe.dialect
    except CaptureError:
        pass
    if case.cancel_after is not None:
        events = events[: case.cancel_after]
    return CaseInput(case.name, case.body, events, dialect, case.tools, case.cancel_after)


def _names(calls: list[Any]) -> str:
    names = [c.name for c in calls]
    return str(names) if len(names) <= 4 else f"{names[:4]} and {len(names) - 4} more"


def judge(case: Case, handed: list[Handed]) -> str | None:
    """Why ``handed`` is wrong for ``case`` (see the module docstring), or None when right."""
    executed = [h for h in handed if h.verdict == "execute"]
    want = case.committed
    if len(executed) != len(want):
        return f"executes {len(executed)} call(s) {_names(executed)}, want {len(want)} {_names(want)}"
    for i, (h, w) in enumerate(zip(executed, want)):
        if h.name != w.name:
            return f"call {i}: name {h.name!r}, want {w.name!r}"
        if w.id is not None and h.id != w.id:
            return f"call {i} ({w.name}): id {h.id!r}, want {w.id!r}"
        try:
            value = strict_loads(h.arguments) if h.arguments else {}
        except (ValueError, TypeError):
            return f"call {i} ({w.name}): executes argument text that is not strict JSON"
        if value != w.arguments:
            return f"call {i} ({w.name}): executes different arguments"
    ids = [h.id for h in handed if h.verdict != "server" and h.id]
    for w in case.calls:
        if w.executor == "client" and w.id is not None and w.id not in ids:
            return f"{w.name} {w.id}: not handed over, its result is owed"
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        return f"id {duplicated[0]} handed over {ids.count(duplicated[0])} times: one result per id"
    return None


def run_case(adapter: Adapter, case: Case) -> dict[str, Any]:
    """One case's row: ``case``, ``origin``, ``class``, ``dialect``, ``status``
    (``right`` / ``wrong`` / ``n/a``) and ``why`` (None when right)."""
    given = case_input(case)
    row: dict[str, Any] = {"case": case.name, "origin": case.origin, "class": case.klass, "dialect": given.dialect}
    if adapter.dialects is not None and given.dialect not in adapter.dialects:
        return {**row, "status": "n/a", "why": f"{adapter.name} reads {', '.join(sorted(adapter.dialects))} only"}
    try:
        why = judge(case, adapter.run(given))
    except NotApplicable as exc:
        return {**row, "status": "n/a", "why": f"unsupported: {exc}"}
    except AdapterError as exc:
        why = f"adapter failed: {exc}"
    except Exception as exc:  # the assembler under test crashed on the input: it hands nothing over
        why = judge(case, []) and f"raised {type(exc).__name__}, hands nothing over"
    return {**row, "status": "wrong" if why else "right", "why": why}


def score(adapter: Adapter, cases: list[Case]) -> dict[str, Any]:
    """``{"adapter", "score": 0..1, "classes": {class: {"right", "total"}}, "cases": [...]}``;
    ``score`` is right / scored over the cases of the dialects the adapter reads."""
    rows = [run_case(adapter, c) for c in cases]
    classes: dict[str, dict[str, int]] = {}
    order = {k: i for i, k in enumerate(CLASSES)}
    for row in sorted(rows, key=lambda r: order.get(r["class"], len(order))):
        if row["status"] == "n/a":
            continue
        tally = classes.setdefault(row["class"], {"right": 0, "total": 0})
        tally["total"] += 1
        tally["right"] += row["status"] == "right"
    right = sum(t["right"] for t in classes.values())
    total = sum(t["total"] for t in classes.values())
    return {"adapter": adapter.name, "score": round(right / total, 4) if total else 0.0, "classes": classes, "cases": rows}


def format_table(report: dict[str, Any], notes: list[str]) -> str:
    """The readable report: one row per bug class, then the wrong cases with why."""
    lines = [f"adapter: {report['adapter']}", f"{'class':<32} {'right':>5} {'total':>5}"]
    for name, tally in report["classes"].items():
        lines.append(f"{name:<32} {tally['right']:>5} {tally['total']:>5}")
    right = sum(t["right"] for t in report["classes"].values())
    total = sum(t["total"] for t in report["classes"].values())
    lines.append(f"{'score':<32} {right:>5} {total:>5}  ({report['score']:.2f})")
    skipped = sum(r["status"] == "n/a" for r in report["cases"])
    if skipped:
        lines.append(f"not scored: {skipped} case(s) of dialects this adapter does not read")
    wrong = [r for r in report["cases"] if r["status"] == "wrong"]
    if wrong:
        lines.append("")
        lines.append("wrong:")
        lines.extend(f"  {r['case']} [{r['class']}]: {r['why']}" for r in wrong)
    lines.extend(f"note: {n}" for n in notes)
    return "\n".join(lines) + "\n"


def _write(text: str) -> None:
    """UTF-8 on stdout; a lone surrogate from a provider's name becomes its ``\\udXXX`` escape."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8", "backslashreplace"))
    sys.stdout.buffer.flush()


def run_conformance(args: argparse.Namespace) -> int:
    """``toollatch conformance``: 0 when it ran (whatever the score), 2 on an unknown or
    unavailable adapter or unreadable cases, with a one-line error on stderr."""
    if args.command_line:
        adapter = CommandAdapter(args.command_line).as_adapter()
    else:
        adapter = ADAPTERS.get(args.adapter or "toollatch")  # type: ignore[assignment]
        if adapter is None:
            print(f"toollatch: error: unknown adapter {args.adapter!r} (known: {', '.join(ADAPTERS)})", file=sys.stderr)
            return 2
        missing = adapter.unavailable()
        if missing:
            if args.json:
                print(json.dumps({"adapter": adapter.name, "unavailable": missing}))
            print(f"toollatch: error: adapter {adapter.name!r} is unavailable: {missing}", file=sys.stderr)
            return 2
    try:
        cases, notes = all_cases(Path(args.shared) if args.shared else None)
    except CaseError as exc:
        print(f"toollatch: error: {exc}", file=sys.stderr)
        return 2
    report = score(adapter, cases)
    if args.json:
        _write(json.dumps({**report, "notes": notes}, indent=1) + "\n")
    else:
        _write(format_table(report, notes))
    return 0


def add_conformance(subparsers: Any) -> None:
    """Add the ``conformance`` subcommand to the ``toollatch`` parser's subparsers."""
    parser = subparsers.add_parser(
        "conformance",
        help="score an assembler on the conformance cases, per bug class",
        description="Run every conformance case (the packaged ones, and $TOOLLATCH_SHARED/cases and captures where "
        "present) through an assembler and score it per bug class (docs/conformance.md).",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--adapter", help=f"built-in adapter: {', '.join(ADAPTERS)} (default: toollatch)")
    which.add_argument("--command", dest="command_line", metavar="CMD", help="run CMD once per case: case JSON on stdin, calls JSON on stdout")
    parser.add_argument("--shared", help="shared folder with cases/ and captures/ (default: $TOOLLATCH_SHARED or ../shared)")
    parser.add_argument("--json", action="store_true", help='print {"score", "classes", "cases"} as JSON')
    parser.set_defaults(func=run_conformance)
