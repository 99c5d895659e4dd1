"""Google Gemini ``streamGenerateContent`` (``alt=sse`` or JSON Lines), Gemini API and Vertex AI.

Provider documents: Gemini API reference, "GenerateContentResponse" (each chunk has
``candidates[].content.parts[]``; a ``functionCall`` part carries ``name``, ``args`` and,
on newer models, ``id``; the candidate's ``finishReason`` marks its end; an error arrives
as ``{"error": {code, message, status}}``) and Vertex AI reference, "FunctionCall" /
"PartialArg" (with ``toolConfig.functionCallingConfig.streamFunctionCallArguments``, a
call starts with ``{name, willContinue: true}``; ``partialArgs[]`` entries
``{jsonPath (RFC 9535), stringValue | numberValue | boolValue | nullValue, willContinue}``
follow; ``willContinue`` absent or false on a ``functionCall`` means "this is the last
part of the FunctionCall"; the usual last part is an empty ``functionCall: {}``).

End: Gemini has no end sentinel; its stream ends at the end of the body (``close``).
Content after a ``finishReason`` frame (some models send an empty ``STOP`` frame first) is
kept, with quirk ``content_after_finish_reason``; the end is judged by each candidate's last
``finishReason`` by the rule of :mod:`.ends`: ``STOP`` is a normal end, ``MAX_TOKENS``
truncated, ``SAFETY``, ``RECITATION``, ``MALFORMED_FUNCTION_CALL`` and the others the
provider's own stop (an error); in both of the latter nothing commits.

Keying: a call is ``(candidate index, n)`` where ``n`` counts that candidate's calls;
Gemini has no stable per-call index, and a streamed call's parts arrive in order. A part
continues the candidate's open streamed call only when it has no ``name``, no whole
``args`` and no ``id`` other than that call's; any other ``functionCall`` part is a new
call, so two calls never share one argument object. The open call it ends is cut (quirk
``function_call_before_terminator``): its last part said ``willContinue: true``, so the
object built so far may lack the rest of a value or whole members and would still parse;
it never reaches the latch but fails ``stream_truncated``
(:class:`~toollatch.core.model.CallTruncated`) and is owed an error result.

No ``id`` (Gemini 2.x, Vertex): a stable one is synthesised, ``gemini_call_<n>`` with
``n`` counting calls in the stream, and quirk ``synthesized_id`` is recorded.

Argument text: complete ``args`` are sent as one fragment, ``json.dumps`` of the object
(key order kept). For streamed ``partialArgs`` the adapter builds the object by
``jsonPath`` (``stringValue`` pieces appended, other values set) and sends it as one
compact JSON fragment when the call ends (its last part, or the candidate's
``finishReason``). So the ``bytes`` the assembler counts for a Gemini call are the bytes
of that final JSON text, not of the values as they arrived: the arguments exist as text
only once the object is complete, and counting the same text that the latch parses keeps
``max_tool_argument_bytes`` meaning the same for every dialect. The byte limit therefore
applies at the call's end, not while values stream in. A streamed call still open at
``finishReason: MAX_TOKENS`` is truncated (an object built from a cut stream parses).

Bounds: a ``jsonPath`` array index may name an existing element or the one just past the
end (arrays grow one element at a time, as the values stream in); an index further out
would make the adapter allocate in proportion to a number the provider chose, so it is a
stream error naming the entry and the path segment (never the path's member names). A
deep path is built without recursion (its size is that of the event carrying it); the
latch then fails the call ``arguments_too_deep`` past ``max_tool_argument_depth``.

Strictness: ``args`` and ``partialArgs`` values arrive parsed with their chunk, which keeps
the last of duplicate keys and accepts ``NaN``; a chunk carrying them is re-read strictly
(:func:`.base.strictness_fault`, once per chunk) and, when it is not strict JSON, each call
it carried values for fails ``invalid_json``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from toollatch.core import jsontext
from toollatch.wire.capture import ProviderEvent
from toollatch.core.model import ArgsFragment, ArgsNotStrict, BlockStop, CallKey, CallStart, CallTruncated, Op, Quirk, StreamEnd, StreamError, StreamTruncated
from toollatch.dialects.base import provider_error, strictness_fault
from toollatch.dialects.ends import end_ops, kind_of, shown_reason
from toollatch.dialects.words import is_word

_VALUE_FIELDS = ("numberValue", "boolValue", "nullValue")
_SEGMENT = re.compile(r"""\.([^\W\d][\w-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\["((?:[^"\\]|\\.)*)"\]""")
_MISSING = object()
#: Digits an array index in a ``jsonPath`` may have; longer is past any array's end.
_MAX_INDEX_DIGITS = 18


class _Text:
    """A string value still receiving ``stringValue`` pieces (list + join, O(n))."""

    __slots__ = ("pieces",)

    def __init__(self, first: str) -> None:
        self.pieces = [first]


class PartialArgsError(ValueError):
    """A ``partialArgs`` entry cannot be applied (bad path, or it contradicts earlier ones)."""


@dataclass
class _Streamed:
    key: CallKey
    provider_id: str | None  # the id the provider gave (None when synthesised)
    args: dict[str, Any] = field(default_factory=dict)


class GeminiAdapter:
    """Translates Gemini / Vertex ``GenerateContentResponse`` chunks into ops."""

    __slots__ = ("_calls", "_ended", "_finished", "_open", "_per_candidate")

    name = "gemini"

    def __init__(self) -> None:
        self._ended = False
        self._calls = 0  # calls in the stream, for synthesised ids
        self._per_candidate: dict[int, int] = {}
        self._open: dict[int, _Streamed] = {}  # candidate -> streamed call awaiting its last part
        self._finished: dict[int, str] = {}  # candidate -> finishReason

    def feed(self, event: ProviderEvent) -> list[Op]:
        data = event.data
        if not isinstance(data, dict):
            return [Quirk("non_object_chunk")]
        if self._ended:
            return [Quirk("chunk_after_stream_end")] if data.get("candidates") else []
        if data.get("error") is not None:
            self._ended = True
            return [provider_error(data["error"], ("code", "status"))]
        candidates = data.get("candidates")
        if not isinstance(candidates, list):
            block = (data.get("promptFeedback") or {}).get("blockReason")
            if block:
                self._ended = True
                block = str(block)
                return [StreamError(f"prompt blocked: {shown_reason(block)}", None if is_word(block) else f"blockReason: {block}", (block,))]
            return []  # usage-only or metadata chunk
        ops: list[Op] = []
        after_finish = False
        strict = _Strictness(event)
        for position, candidate in enumerate(candidates):
            if not isinstance(candidate, dict):
                continue
            ci = candidate.get("index", position)
            ci = ci if isinstance(ci, int) and not isinstance(ci, bool) else position
            content = candidate.get("content") if isinstance(candidate.get("content"), dict) else {}
            parts = content.get("parts") if isinstance(content.get("parts"), list) else []
            if ci in self._finished and any(isinstance(p, dict) and any(v not in ("", None, {}) for v in p.values()) for p in parts):
                after_finish = True  # kept: the stream ends at the end of the body
            try:
                for part in parts:
                    if isinstance(part, dict) and isinstance(part.get("functionCall"), dict):
                        self._function_call(ci, part["functionCall"], ops, strict)
            except PartialArgsError as exc:
                self._ended = True
                ops.append(StreamError(f"candidate {ci}: {exc}"))
                return ops
            reason = candidate.get("finishReason")
            if isinstance(reason, str) and reason:
                self._finished[ci] = reason
                if ci in self._open and kind_of(reason) == "complete":
                    ops.append(Quirk("missing_function_call_terminator"))
                    self._close(ci, ops)
                # any other reason leaves the call open: the end (truncated or error) fails it
        if after_finish:
            ops.append(Quirk("content_after_finish_reason"))
        return ops

    def close(self) -> list[Op]:
        """End of the body: the stream's end, judged by each candidate's last ``finishReason``
        (:mod:`.ends`); truncated when a candidate that began has none."""
        if self._ended:
            return []
        self._ended = True
        unfinished = sorted(c for c in set(self._per_candidate) | set(self._open) if c not in self._finished)
        if not self._finished or unfinished:
            which = f" of candidate {unfinished[0]}" if self._finished else ""
            return [StreamTruncated(f"input ended before finishReason{which}")]
        reasons = [self._finished[c] for c in sorted(self._finished)]
        ops = end_ops("finishReason", reasons, "finishReason " + ",".join(sorted({shown_reason(r) for r in reasons})))
        if isinstance(ops[-1], StreamEnd):
            for streamed in self._open.values():  # began after its candidate's finishReason
                ops.insert(0, CallTruncated(streamed.key, "the body ended before this call's last part"))
            self._open.clear()
        return ops

    # ------------------------------------------------------------------ calls

    def _function_call(self, ci: int, fc: dict[str, Any], ops: list[Op], strict: _Strictness) -> None:
        name = fc.get("name") if isinstance(fc.get("name"), str) and fc.get("name") else None
        fc_id = fc.get("id") if isinstance(fc.get("id"), str) and fc.get("id") else None
        streamed = self._open.get(ci)
        if streamed is not None and name is None and fc.get("args") in (None, {}) and (
            fc_id is None or streamed.provider_id in (None, fc_id)
        ):  # a continuation: no name, no whole args, no other call's id
            self._apply_all(streamed.args, fc.get("partialArgs"))
            if fc.get("partialArgs"):
                strict.check(streamed.key, ops)
            if fc.get("willContinue") is not True:
                if fc.get("partialArgs"):
                    ops.append(Quirk("last_partial_args_without_terminator"))
                self._close(ci, ops)
            return
        if streamed is not None:  # its last part said willContinue: true, and no more will come
            ops.append(Quirk("function_call_before_terminator"))
            del self._open[ci]
            ops.append(CallTruncated(streamed.key, "another functionCall began before this call's last part"))
        if name is None:
            if not any(fc.get(k) for k in ("args", "partialArgs", "id")):  # {} or a bare willContinue
                ops.append(Quirk("function_call_part_without_call"))
                return
            ops.append(Quirk("function_call_without_name"))  # kept: the latch fails it, a result is owed
        n = self._per_candidate.get(ci, 0)
        self._per_candidate[ci] = n + 1
        self._calls += 1
        key: CallKey = (ci, n)
        call_id = fc_id
        if call_id is None:
            call_id = f"gemini_call_{self._calls - 1}"
            ops.append(Quirk("synthesized_id"))
        ops.append(CallStart(key, call_id, name))
        args = fc.get("args")
        carried = args is not None and args != {}  # argument text made from a value of the chunk
        if args is not None and not isinstance(args, dict):
            ops.append(Quirk("args_not_object"))
            ops.append(ArgsFragment(key, jsontext.dumps(args)))  # the latch judges it as that JSON text
            args = {}
        self._open[ci] = _Streamed(key, fc_id, jsontext.rebuild(args) if args else {})  # never mutate the event
        self._apply_all(self._open[ci].args, fc.get("partialArgs"))
        if carried or fc.get("partialArgs"):
            strict.check(key, ops)
        if fc.get("willContinue") is not True:
            self._close(ci, ops)

    def _close(self, ci: int, ops: list[Op]) -> None:
        streamed = self._open.pop(ci)
        if streamed.args:
            text = jsontext.dumps(jsontext.rebuild(streamed.args, _joined), separators=(",", ":"))
            ops.append(ArgsFragment(streamed.key, text))
        ops.append(BlockStop(streamed.key))

    def _apply_all(self, args: dict[str, Any], entries: Any) -> None:
        if entries is None:
            return
        if not isinstance(entries, list):
            raise PartialArgsError("partialArgs is not a list")
        for n, entry in enumerate(entries):
            try:
                if not isinstance(entry, dict):
                    raise PartialArgsError(f"entry is a JSON {_json_type(entry)}, not an object")
                apply_partial_arg(args, entry)
            except PartialArgsError as exc:
                raise PartialArgsError(f"partialArgs[{n}]: {exc}") from None


class _Strictness:
    """The strict re-check of one chunk (see :func:`.base.strictness_fault`), made at most
    once however many calls the chunk carries values for."""

    __slots__ = ("_event", "_fault", "_done")

    def __init__(self, event: ProviderEvent) -> None:
        self._event, self._fault, self._done = event, None, False

    def check(self, key: CallKey, ops: list[Op]) -> None:
        """Append :class:`~toollatch.core.model.ArgsNotStrict` for ``key`` if the chunk is not strict."""
        if not self._done:
            # stringValue parts are pieces of one string: a surrogate pair may be split
            # across two chunks, and only the joined text (at the latch) can be judged
            self._fault, self._done = strictness_fault(self._event, string_pieces=True), True
        if self._fault is not None:
            ops.append(ArgsNotStrict(key, self._fault))


def apply_partial_arg(args: dict[str, Any], entry: dict[str, Any]) -> None:
    """Apply one ``partialArgs`` entry to ``args`` in place (values only, never argument text).

    Raises :class:`PartialArgsError` when the entry cannot be applied (among others: an
    array index past the element just after the array's end, which is refused before
    anything is allocated); its text names positions (jsonPath segment numbers,
    characters) and JSON type names, never a member name or a value: the path's names
    are argument keys.
    """
    path = parse_json_path(entry.get("jsonPath"))
    if "stringValue" in entry:
        value: Any = entry["stringValue"]
        if not isinstance(value, str):
            raise PartialArgsError(f"stringValue is a JSON {_json_type(value)}, not a string")
    else:
        present = [f for f in _VALUE_FIELDS if f in entry]
        if not present:
            return  # a bare {jsonPath, willContinue} marker
        value = None if present[0] == "nullValue" else entry[present[0]]
    container: Any = args
    for depth, (segment, following) in enumerate(zip(path, path[1:]), 1):
        child = _get(container, segment, depth)
        if child is _MISSING:
            child = [] if isinstance(following, int) else {}
            _set(container, segment, child, depth)
        container = child
    leaf = path[-1]
    existing = _get(container, leaf, len(path))  # also checks the container's type
    if "stringValue" in entry:
        if isinstance(existing, _Text):
            existing.pieces.append(value)
            return
        if existing is not _MISSING:
            raise PartialArgsError(f"stringValue continues a JSON {_json_type(existing)}, not a string")
        value = _Text(value)
    _set(container, leaf, value, len(path))


def parse_json_path(path: Any) -> list[str | int]:
    """``$.a.b[0]['c d']`` → ``["a", "b", 0, "c d"]`` (the RFC 9535 singular-query subset)."""
    if not isinstance(path, str) or not path.startswith("$"):
        raise PartialArgsError("no jsonPath starting with $")
    segments: list[str | int] = []
    pos = 1
    while pos < len(path):
        m = _SEGMENT.match(path, pos)
        if m is None:
            raise PartialArgsError(f"unsupported jsonPath at character {pos}")
        name, index, single, double = m.groups()
        if index is not None:  # an index too long for int() is past any array's end anyway
            segments.append(int(index) if len(index) <= _MAX_INDEX_DIGITS else 10**_MAX_INDEX_DIGITS)
        elif name is not None:
            segments.append(name)
        else:
            segments.append(re.sub(r"\\(.)", r"\1", single if single is not None else double))
        pos = m.end()
    if not segments:
        raise PartialArgsError("jsonPath $ names the whole arguments object")
    return segments


def _get(container: Any, segment: str | int, depth: int) -> Any:
    """``container[segment]`` or ``_MISSING``; ``depth`` numbers the segment for errors."""
    if isinstance(segment, int):
        if not isinstance(container, list):
            raise PartialArgsError(f"jsonPath segment {depth} indexes a JSON {_json_type(container)}, not an array")
        return container[segment] if segment < len(container) else _MISSING
    if not isinstance(container, dict):
        raise PartialArgsError(f"jsonPath segment {depth} names a member of a JSON {_json_type(container)}, not an object")
    return container.get(segment, _MISSING)


def _json_type(value: Any) -> str:
    """The JSON type name of a value being built (a :class:`_Text` is a string)."""
    if isinstance(value, (str, _Text)):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {dict: "object", list: "array"}.get(type(value), "null" if value is None else "value")


def _set(container: Any, segment: str | int, value: Any, depth: int) -> None:
    """``container[segment] = value``; an array grows by one element at most."""
    if isinstance(segment, str):
        container[segment] = value
        return
    if segment > len(container):
        raise PartialArgsError(f"jsonPath segment {depth} indexes past the end of its array (an array grows one element at a time)")
    if segment == len(container):
        container.append(value)
    else:
        container[segment] = value


def _joined(value: Any) -> Any:
    """A :class:`_Text` as its string (one join per string); anything else as it is."""
    return "".join(value.pieces) if isinstance(value, _Text) else value
