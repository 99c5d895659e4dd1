"""The naive-client lane: what common unlatched strategies would have done on a stream.

For demos and triage, next to the latched verdict. Each strategy replays the same
provider events and reports each execution it would have made ("would have executed
``name`` at fragment k") or each call it would have merged or renamed. Arguments are
shown only where they equal what the latch committed (already public after commit);
anywhere else only byte counts, so the lane never leaks what the latch held back.

Strategies:

* ``execute_when_parses`` - run a call as soon as its buffer parses as JSON;
* ``count_brackets`` - run when ``{``/``[`` and ``}``/``]`` balance, ignoring strings;
* ``execute_at_block_end`` - run at the block's end without waiting for the message end;
* ``merge_by_position`` - OpenAI Chat: key fragments by their position in the
  ``tool_calls`` array, not by ``index`` / ``id``;
* ``concatenate_names`` - OpenAI Chat: append ``function.name`` like arguments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from toollatch.wire.capture import DONE, ProviderEvent
from toollatch.dialects import make_adapter
from toollatch.core.jsonprefix import JSONPrefixScanner
from toollatch.core.model import ArgsFragment, BlockStop, CallIdentity, CallKey, CallStart, StreamResult, escape_surrogates


@dataclass(frozen=True, slots=True)
class NaiveAction:
    """One thing a naive strategy would have done.

    ``kind`` is ``executed``, ``merged`` or ``renamed``; ``fragment`` the 0-based index of
    the call's fragment at which it happened; ``bytes`` the argument bytes it acted on;
    ``arguments`` only when they equal the committed arguments of that call.
    """

    strategy: str
    kind: str
    name: str | None
    call_id: str | None
    fragment: int
    bytes: int
    arguments: Any = None
    differs: bool = True  # differs from the latched outcome of that call

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "kind": self.kind,
            "name": self.name,
            "call_id": self.call_id,
            "fragment": self.fragment,
            "bytes": self.bytes,
            "arguments": self.arguments,
            "differs_from_latch": self.differs,
        }


@dataclass
class _Buf:
    call_id: str | None = None
    name: str | None = None
    parts: list[str] = field(default_factory=list)  # the text so far, joined only when acted on
    size: int = 0  # UTF-8 bytes of the text so far
    fragments: int = 0
    done: bool = False
    scanner: JSONPrefixScanner | None = None
    depth: int = 0
    opened: bool = False

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text.encode("utf-8", "surrogatepass"))
        self.fragments += 1

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def set_text(self, text: str) -> None:
        self.parts = [text]
        self.size = len(text.encode("utf-8", "surrogatepass"))


_BRACKET = re.compile(r"[{}\[\]]")


def _text(value: Any) -> Any:
    """A provider string with lone surrogates escaped (:func:`~toollatch.core.model.escape_surrogates`); others as they are."""
    return escape_surrogates(value) if isinstance(value, str) else value


def _safe_parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def naive_lane(events: Iterable[ProviderEvent], dialect: str, latched: list[StreamResult]) -> list[NaiveAction]:
    """Run every strategy over ``events``; ``latched`` are the streams' real results.

    ``events`` is read more than once: a :class:`~collections.abc.Collection` that
    re-reads its input on each iteration (bounded memory) is used as is; any other
    iterable is first copied into a list.
    """
    if not isinstance(events, Collection):
        events = list(events)
    committed = {
        c.call_id: c.arguments for r in latched for c in r.calls if c.state.value == "committed" and c.call_id
    }
    latched_names = [c.name for r in latched for c in r.calls]
    actions = _op_strategies(events, dialect, committed)
    if dialect == "openai-chat":
        actions += _openai_strategies(events, committed, latched_names)
    return actions


def _action(strategy: str, kind: str, buf: _Buf, committed: dict[str, Any], value: Any = None) -> NaiveAction:
    same = buf.call_id in committed and value is not None and committed[buf.call_id] == value and kind == "executed"
    return NaiveAction(
        strategy, kind, buf.name, buf.call_id, max(buf.fragments - 1, 0), buf.size,
        value if same else None, not same,
    )


def _op_strategies(events: Iterable[ProviderEvent], dialect: str, committed: dict[str, Any]) -> list[NaiveAction]:
    adapter = make_adapter(dialect)
    parses: dict[CallKey, _Buf] = {}
    brackets: dict[CallKey, _Buf] = {}
    blocks: dict[CallKey, _Buf] = {}
    out: list[NaiveAction] = []
    for event in events:
        if event.error is not None:
            break
        for op in adapter.feed(event):
            if isinstance(op, (CallStart, CallIdentity)):
                for table in (parses, brackets, blocks):
                    buf = table.setdefault(op.key, _Buf())
                    buf.call_id = buf.call_id or op.call_id
                    buf.name = buf.name or op.name
                    if isinstance(op, CallStart) and op.whole_arguments and not buf.parts:
                        buf.set_text(op.whole_arguments)
            elif isinstance(op, ArgsFragment):
                for table in (parses, brackets, blocks):
                    buf = table.setdefault(op.key, _Buf())
                    if buf.fragments == 0 and buf.parts:
                        buf.parts.clear()  # streamed text replaces arguments that came whole with the start
                        buf.size = 0
                    buf.add(op.text)
                _when_parses(parses[op.key], op.text, committed, out)
                _when_balanced(brackets[op.key], op.text, committed, out)
            elif isinstance(op, BlockStop) and op.key in blocks and not blocks[op.key].done:
                buf = blocks[op.key]
                buf.done = True
                value = _safe_parse(buf.text or "{}")
                if value is not None:
                    out.append(_action("execute_at_block_end", "executed", buf, committed, value))
    return out


def _when_parses(buf: _Buf, fragment: str, committed: dict[str, Any], out: list[NaiveAction]) -> None:
    if buf.done:
        return
    if buf.scanner is None:
        buf.scanner = JSONPrefixScanner()
    buf.scanner.feed(fragment)
    if buf.scanner.complete:  # the buffer parses right now (checked in linear time)
        buf.done = True
        out.append(_action("execute_when_parses", "executed", buf, committed, _safe_parse(buf.text)))


def _when_balanced(buf: _Buf, fragment: str, committed: dict[str, Any], out: list[NaiveAction]) -> None:
    if buf.done:
        return
    for match in _BRACKET.finditer(fragment):  # the brackets only: text between them is skipped in C
        ch = match.group()
        if ch in "{[":
            buf.depth += 1
            buf.opened = True
        elif ch in "}]":
            buf.depth -= 1
            if buf.opened and buf.depth <= 0:
                buf.done = True
                out.append(_action("count_brackets", "executed", buf, committed, _safe_parse(buf.text)))
                return


def _openai_strategies(events: Iterable[ProviderEvent], committed: dict[str, Any], latched_names: list[str | None]) -> list[NaiveAction]:
    by_position: dict[tuple[int, int], _Buf] = {}
    names: dict[tuple[int, Any], _Buf] = {}
    others: set[tuple[int, Any]] = set()  # calls named, on a later chunk, a tool other than their first
    out: list[NaiveAction] = []
    for event in events:
        data = event.data
        if data == DONE or not isinstance(data, dict):
            continue
        for choice in data.get("choices") or ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            entries = delta.get("tool_calls") if isinstance(delta, dict) else None
            for position, entry in enumerate(entries or ()):
                if not isinstance(entry, dict):
                    continue
                fn = entry.get("function") if isinstance(entry.get("function"), dict) else {}
                buf = by_position.setdefault((choice.get("index", 0), position), _Buf())
                # read from the raw deltas, not from ops: escaped here as the ops escape them
                buf.call_id = buf.call_id or _text(entry.get("id")) or None
                buf.name = buf.name or _text(fn.get("name")) or None
                if isinstance(fn.get("arguments"), str) and fn["arguments"]:
                    buf.add(fn["arguments"])
                index = entry.get("index", position)
                named = names.setdefault((choice.get("index", 0), index if isinstance(index, int) else position), _Buf())
                if isinstance(fn.get("name"), str):
                    piece = escape_surrogates(fn["name"])
                    key = (choice.get("index", 0), index if isinstance(index, int) else position)
                    if named.name and piece and not named.name.startswith(piece):
                        others.add(key)
                    named.name = (named.name or "") + piece
                named.call_id = named.call_id or _text(entry.get("id")) or None
    naive_calls = list(by_position.values())
    if len(naive_calls) != len([n for n in latched_names if n is not None]):
        for buf in naive_calls:
            out.append(_action("merge_by_position", "merged", buf, committed, _safe_parse(buf.text)))
    for key, buf in names.items():
        if buf.name and buf.name not in latched_names:
            if key in others:  # a later name is provider text no call took: named by its length only
                buf.name = f"(a name of {len(buf.name)} characters)"
            out.append(_action("concatenate_names", "renamed", buf, committed))
    return out
