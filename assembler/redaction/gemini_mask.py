"""Masking Gemini events for the redacted reproducer (see :mod:`.masker`).

Gemini carries a call's arguments as ``functionCall.args`` (a whole JSON value) or as
``partialArgs`` pieces (``jsonPath`` and a ``stringValue``/``numberValue``/... each): every
string value is masked; of a call that did not commit (or when which call a piece belongs
to cannot be told and some call failed) the member names in ``jsonPath`` (:class:`~.scalarmask.KeyNames`:
the same name, the same placeholder) and the numbers too. A ``stringValue`` piece of a
string a committed call's tool publishes is kept (:class:`~.published.StringPieces`).
A candidate's ``finishMessage`` (it can quote a malformed call) and every other text
field become placeholders; a ``finishReason`` that is no word stays no word.
"""

from __future__ import annotations

from typing import Any

from toollatch.dialects.gemini import PartialArgsError, parse_json_path
from toollatch.redaction.places import PlaceMasker, is_empty as _empty, mask_reason, mask_text as _text
from toollatch.redaction.published import StringPieces
from toollatch.redaction.redactor import escaped_placeholder, mask_arguments
from toollatch.redaction.scalarmask import KeyNames, MaskPlan, mask_scalars_value


class GeminiMasker(PlaceMasker):
    """The Gemini method of :class:`~.masker.DialectMasker` (:meth:`gemini`) and its state."""

    def __init__(self, plan: MaskPlan | None = None, *, record: bool = False, values: bool = True) -> None:
        super().__init__(plan, record=record, values=values)
        self._path_keys = KeyNames()  # Gemini partialArgs member names of calls that did not commit
        self.pieces = StringPieces(record=record)  # Gemini stringValue pieces, by the string they make up

    def gemini(self, data: dict[str, Any]) -> None:
        feedback = data.get("promptFeedback")
        if isinstance(feedback, dict):  # a blocked prompt: its reason a word or a stand-in, the rest masked
            for field in list(feedback):
                feedback[field] = mask_reason(feedback[field]) if field == "blockReason" else _text(feedback[field])
        elif feedback is not None:
            data["promptFeedback"] = _text(feedback)
        for position, candidate in enumerate(self.objects(data, "candidates")):
            index = candidate.get("index", position)
            index = index if isinstance(index, int) and not isinstance(index, bool) else position
            for field in list(candidate):
                if field == "finishReason":
                    candidate[field] = mask_reason(candidate[field])
                elif field not in ("content", "index", "safetyRatings", "tokenCount", "avgLogprobs"):
                    candidate[field] = _text(candidate[field])  # finishMessage, grounding, citations
            content = candidate.get("content")
            if not isinstance(content, dict):
                if content is not None:
                    candidate["content"] = self.unread(content, "content")
                continue
            for part in self.objects(content, "parts"):
                for field in list(part):
                    if field == "functionCall" and isinstance(part[field], dict):
                        self._function_call(index, part[field])
                    elif field == "functionCall":
                        part[field] = self.unread(part[field], "functionCall")
                    elif field != "thought":
                        part[field] = _text(part[field])

    def _function_call(self, candidate: int, call: dict[str, Any]) -> None:
        if self.ledger.ended_before_event and any(not _empty(call.get(k)) for k in ("args", "partialArgs")):
            self.ledger.ignored(f"{self._where} (functionCall)", "argument text after the stream's end")
        every = self.plan is None or self.plan.any_failed  # which call's text it is is not told here
        self.pieces.call(candidate, call.get("name"))
        for field in list(call):
            value = call[field]
            if field == "args":
                keep = self.plan.published_for(call.get("name")) if self.plan is not None else frozenset()
                call[field] = mask_scalars_value(value) if every else mask_arguments(value, keep=keep)
            elif field == "partialArgs" and isinstance(value, list):
                for i, entry in enumerate(value):
                    if not isinstance(entry, dict):
                        value[i] = mask_arguments(entry)
                        continue
                    path = entry.get("jsonPath")  # as written (it may be masked below)
                    for name in entry:
                        if name == "jsonPath" and every:
                            entry[name] = self._masked_path(entry[name])
                        elif name == "numberValue" and every and isinstance(entry[name], (int, float)) and not isinstance(entry[name], bool):
                            entry[name] = mask_scalars_value(entry[name])
                        elif name == "stringValue" and isinstance(entry[name], str) and self._kept_piece(candidate, path, entry[name], every):
                            pass  # a piece of a string the call's tool publishes
                        elif name not in ("jsonPath", "numberValue", "boolValue", "nullValue", "willContinue"):
                            entry[name] = escaped_placeholder(entry[name]) if isinstance(entry[name], str) else mask_arguments(entry[name])
            elif field not in ("name", "id", "willContinue"):
                call[field] = mask_arguments(value)

    def _kept_piece(self, candidate: int, path: Any, text: str, every: bool) -> bool:
        """Whether ``text``, a ``stringValue`` at ``path``, is a piece of a string its committed
        call's tool publishes (every piece is followed, so strings number alike on each reading)."""
        try:
            segments = parse_json_path(path)
        except PartialArgsError:
            return False
        number = self.pieces.piece(candidate, segments, text)
        return not every and self.plan is not None and number in self.plan.kept_pieces

    def _masked_path(self, path: Any) -> Any:
        """A ``partialArgs`` jsonPath with every member name (an argument key) masked: the
        same name, the same placeholder of its length; indexes kept. A path the adapter
        cannot read is masked whole (it fails the same way: no ``$`` start)."""
        try:
            segments = parse_json_path(path)
        except PartialArgsError:
            return _text(path)
        out = ["$"]
        for segment in segments:
            if isinstance(segment, int):
                out.append(f"[{segment}]")
            else:
                size = len(segment.encode("utf-8", "surrogatepass"))
                out.append("." + self._path_keys.name(segment, size) if size else "['']")
        return "".join(out)


__all__ = ["GeminiMasker"]
