"""The end of a stream and the completion latch: the verdict on each call.

:class:`~toollatch.core.assembler.Assembler` hands each stream-ending op here
(:class:`~toollatch.core.model.StreamEnd`, :class:`~toollatch.core.model.StreamTruncated`,
:class:`~toollatch.core.model.StreamError`, :class:`~toollatch.core.model.Cancel`), and
each call that reaches the latch (at a normal stream end, or at its block stop when the
configuration pipelines its tool). Every function takes the Assembler whose calls it
judges, the op or call, and the list the assembly events go to.

The latch (DESIGN.md): a call commits only when ``call_id`` and ``name`` are present and
valid Unicode, no earlier stream of the input answered its tool_call_id (a call committed
there, or an error result owed there) and no other call of the stream carries it
(whatever that call's state: so a call's verdict never depends on whether a later call
with its id committed first), the whole
argument text is strict JSON, an object and passes the tool's schema (when a registry is
given), and the run's budget of committed calls is not spent. A call that fails gets one
reason; a stream that ends any other way fails (or cancels) every call still open.
"""

from __future__ import annotations

import codecs
import re
from typing import TYPE_CHECKING

from toollatch.core.calls import CallRecord, keep_one_record_per_id
from toollatch.core.finalize import Verdict, check_arguments, check_json
from toollatch.core.model import (
    ARGS_COMPLETE,
    COMMITTED,
    OPEN,
    TERMINAL_STATES,
    Cancel,
    Reason,
    StreamEnd,
    StreamEndKind,
    StreamError,
    StreamTruncated,
    hidden,
)
from toollatch.core.openorder import AwaitingCount
from toollatch.core.schemacheck import CheckBudget
from toollatch.core.state import ARGS_DONE, CANCEL, COMMIT
from toollatch.redaction.redact import AssemblyEvent

if TYPE_CHECKING:
    from toollatch.core.assembler import Assembler


def finish_complete(asm: Assembler, op: StreamEnd, out: list[AssemblyEvent]) -> None:
    """The stream ended normally: every call not yet terminal reaches the latch, in the
    order the calls opened (so the run's budget and the schema checks' time go to the
    calls that opened first, whatever ``finalize_order`` says of the finalized message);
    calls sharing one tool_call_id fail first."""
    asm._ended_at = asm._clock()
    found = holders(asm, op.detail, op.words) if op.words else {}  # before the latch releases the buffers
    calls = list(asm._calls.values())  # opened first, first
    carried = asm._holders  # client calls carrying each tool_call_id
    # the schema checks of all the calls latched here, together (no registry: no schema check)
    budget = CheckBudget() if asm.registry is not None else None
    for call in calls:
        machine = call.machine
        if call.call_id and carried.get(call.call_id, 0) > 1 and call.executor == "client" and machine.state not in TERMINAL_STATES:
            id_taken(asm, call, out)
        if machine.state is OPEN:
            asm._move(call, ARGS_DONE, out)
        if machine.state is ARGS_COMPLETE:
            latch(asm, call, out, budget)
    detail = op.detail
    if found or op.message:  # else the detail is shown as it is
        detail = shown_detail(asm, detail, op.message, found)
    asm._set_end("complete", detail, out)


def latch(asm: Assembler, call: CallRecord, out: list[AssemblyEvent], budget: CheckBudget | None = None) -> None:
    """Judge one ARGS_COMPLETE call: commit it, or fail it with the first reason found.

    ``budget`` bounds the schema checks of all the calls latched at one stream end
    together (a fresh one per call when None)."""
    call_id = call.call_id
    if not call_id or not call.name:
        missing = " and ".join(n for n, v in (("call_id", call_id), ("name", call.name)) if not v)
        asm._fail(call, Reason.MISSING_ID_OR_NAME.with_detail(f"no {missing}"), out)
        return
    if call.not_unicode:
        # Escaped when its op was built: no longer the id or name the provider sent.
        fields = tuple(dict.fromkeys(call.not_unicode))
        detail = f"{' and '.join(fields)} {'is' if len(fields) == 1 else 'are'} not valid Unicode (a lone surrogate, shown escaped)"
        asm._fail(call, Reason.MISSING_ID_OR_NAME.with_detail(detail), out)
        return
    client = call.executor == "client"
    if client and id_taken(asm, call, out):
        return
    # the whole argument text, joined once (streamed fragments, else the text that came
    # whole with the start, else ""); the buffer is released
    text = call.buffer.decode("utf-8", "surrogatepass") if call.fragments else call.whole_arguments or ""  # type: ignore[union-attr]
    call.buffer = None
    registry = asm.registry if client else None
    config = asm.config
    if call.not_strict is not None:
        verdict = Verdict(None, Reason.INVALID_JSON.with_detail(call.not_strict))
    elif registry is None:  # no tool to look up, no schema: the text checks only
        verdict = check_json(text, config.arguments_must_be_object, config.max_tool_argument_depth)
    else:
        verdict = check_arguments(
            text,
            call.name,
            registry=registry,
            must_be_object=config.arguments_must_be_object,
            reveal=asm.reveal,
            max_depth=config.max_tool_argument_depth,
            schema_budget=budget,
        )
    if asm.metrics is not None:
        asm.metrics.call_finalized(asm.dialect, call.name, call.bytes)
    if verdict.reason is not None:
        call.diagnosis = verdict.diagnosis
        if verdict.reason.startswith(Reason.INVALID_JSON.value):
            call.diagnosis = call.invalid_json_diagnosis(text, verdict.reason)
            if asm.metrics is not None:
                asm.metrics.call_invalid_json(asm.dialect, call.name)
            call.repaired = asm.config.on_invalid_json == "drop_with_protocol_repair"
        asm._fail(call, verdict.reason, out)
        return
    if client and not asm.budget.take():
        limit = asm.budget.limit
        asm._fail(call, Reason.BUDGET_EXCEEDED.with_detail(f"more than {limit} committed calls in this run"), out)
        return
    call.arguments = verdict.arguments
    asm._move(call, COMMIT, out)
    if client:
        asm._committed_ids.add(call_id)
        asm._run_ids.add(call_id)  # the same set when the stream stands alone
    if asm.metrics is not None and asm._ended_at is not None:
        asm.metrics.call_committed(asm.dialect, call.name, asm._clock() - asm._ended_at)


def latches_now(asm: Assembler, call: CallRecord) -> bool:
    """Whether a pipelined ``call`` (its block stopped) reaches the latch now rather than
    at the stream's end: always, but under a run budget (``max_tool_calls_per_run``) whose
    room left is needed by the client calls that opened before it and have no verdict
    yet (server calls counted too: they only make it wait). Those keep their claim: such
    a call waits for the stream's end, where calls are judged in the order they opened,
    so whether a later call commits never changes this one's verdict (a later call that
    carries its tool_call_id still fails it: :func:`id_taken`). O(log n) for ``n`` calls in
    the stream (:class:`~toollatch.core.openorder.AwaitingCount`, made at the first call
    that asks: O(n) once)."""
    budget = asm.budget
    if budget.limit is None:
        return True
    room = budget.limit - budget.committed
    if room <= 0:
        return True  # no room at all: its verdict is known now
    awaiting = asm._awaiting
    if awaiting is None:
        awaiting = asm._awaiting = AwaitingCount(c.machine.state not in TERMINAL_STATES for c in asm._calls.values())
    return awaiting.before(call.order) < room  # calls opened before it, without a verdict


def id_taken(asm: Assembler, call: CallRecord, out: list[AssemblyEvent]) -> bool:
    """Fail client ``call`` when its tool_call_id is not its own to run: committed in an
    earlier stream of the run, or carried by another call of the stream (running either
    could run the tool twice), committed or not (:func:`share_id`: one reason whether the
    other committed first or not, so a reader that left the other call out gives the same
    verdict). Asked when a call starts or learns an id, and at the latch. True when it failed."""
    call_id = call.call_id
    answered = answered_before(asm, call_id)  # type: ignore[arg-type]
    if answered is not None:
        refuse_reused_id(asm, call, out, answered)
        return True
    if asm._holders.get(call_id, 0) > 1 or call_id in asm._committed_ids:  # type: ignore[arg-type]
        share_id(asm, call, out)
        return True
    return False


def settle_ids(asm: Assembler) -> None:
    """At the stream's end: one record per tool_call_id in the finalized message
    (:func:`~toollatch.core.calls.keep_one_record_per_id`), and the ids its error results
    answer noted for the input's later streams (:func:`answered_before`). O(calls)."""
    calls = asm._calls.values()
    if len(calls) > 1:
        keep_one_record_per_id(calls, by_key=asm.config.finalize_order != "arrival")
    answered = asm._answered_ids
    for call in calls:
        if call.call_id and call.executor == "client" and not call.repaired and call.machine.state is not COMMITTED:
            answered.add(call.call_id)


def share_id(asm: Assembler, call: CallRecord, out: list[AssemblyEvent]) -> None:
    """Fail ``call``: another call of the stream carries its tool_call_id. At the stream
    end the finalized message keeps one record per id (the committed one, if any:
    :func:`~toollatch.core.calls.keep_one_record_per_id`), so the id is answered once."""
    asm._fail(call, Reason.STREAM_ERROR.with_detail("call id used by more than one call"), out)


#: Why a call whose tool_call_id an earlier stream of the input answered fails.
USED_BY_A_COMMITTED_CALL = "call id already used by a committed call"
ANSWERED_BEFORE = "call id already answered with an error result in an earlier stream"
#: ... and why one refused so fails once a final id replaced the id it was refused for.
FIRST_ID_ANSWERED = "its first call id was answered in an earlier stream"
#: The reasons of a call refused for an id an earlier stream answered (each final id it is
#: given is judged again: :func:`toollatch.core.identity.identity`).
REFUSED = frozenset(Reason.STREAM_ERROR.with_detail(d) for d in (USED_BY_A_COMMITTED_CALL, ANSWERED_BEFORE, FIRST_ID_ANSWERED))


def answered_before(asm: Assembler, call_id: str) -> str | None:
    """Why ``call_id`` is not a call's own to answer: an earlier stream of the input answered
    it (a call committed there, or an error result owed there); None when none did."""
    if call_id in asm._run_ids and call_id not in asm._committed_ids:
        return USED_BY_A_COMMITTED_CALL
    if call_id in asm._answered_ids:
        return ANSWERED_BEFORE
    return None


def refuse_reused_id(asm: Assembler, call: CallRecord, out: list[AssemblyEvent], why: str = USED_BY_A_COMMITTED_CALL) -> None:
    """A call carrying a tool_call_id an earlier stream of the input answered (``why``:
    :func:`answered_before`): it never commits, owes no result of its own (the id is
    answered already: by the committed call's execution, or by its error result) and is
    dropped from the finalized message, which cannot hold one id twice."""
    call.repaired = True
    asm._fail(call, Reason.STREAM_ERROR.with_detail(why), out)


def holders(asm: Assembler, detail: str | None, words: tuple[str, ...]) -> dict[str, list[CallRecord]]:
    """For each provider word of ``words`` that ``detail`` shows (a stop reason, an error
    type or code: :mod:`toollatch.dialects.words`), the calls not yet committed whose
    buffered argument text holds it as a reader of the arguments would see it
    (:func:`_readable`: any case, escapes undone). Reads each buffer once, then searches
    it once per word: linear, and bounded (:data:`SEARCHED_BYTES`, :data:`SEARCHED_CALLS`). A word
    outside the providers' documented vocabulary maps to no call and is hidden all the
    same (:func:`guard_words`): argument text can reach the end's detail in ways no buffer
    here shows (a call that failed before the end released its text; text an adapter or
    a final text replaced; a call a reader left out; an earlier stream's), so only the
    vocabulary is shown as it is. (A normal end's detail holds no provider word.)"""
    if not detail or not words:
        return {}
    found: dict[str, list[CallRecord]] = {}
    known: list[str] = []
    for word in dict.fromkeys(words):
        if word and word in detail:
            if _known_word(word):
                known.append(word)
            else:
                found[word] = []  # hidden whoever holds it
    if known:
        calls = [call for call in asm._ordered() if (call.buffer or call.whole_arguments) and call.machine.state is not COMMITTED]
        size = sum(len(call.buffer or b"") + _bytes(call.whole_arguments) for call in calls)
        if len(calls) > SEARCHED_CALLS or size * len(known) > SEARCHED_BYTES:
            return found | {word: calls for word in known} if calls else found  # too much to search: taken as held
        texts = [(call, _readable(call)) for call in calls]
        for word in known:
            lower = word.lower()  # ASCII (_known_word)
            held = [call for call, text in texts if text is None or lower in text]
            if held:
                found[word] = held
    return found


#: Bytes of argument text times words searched at one stream's end, and calls read, above
#: which every call not committed is taken to hold every word (hidden: the safe side), so
#: that the search stays a few tens of milliseconds however many calls and words an end has
#: (about 35 ms for the slowest text to read: 512 KiB of U+03B0, whose capitals are three
#: characters, each followed by a soft hyphen, after an escape; a stream's output under a
#: ``max_tokens`` of 64k tokens is about 256 KiB).
SEARCHED_BYTES = 512 * 1024
SEARCHED_CALLS = 1024


def _bytes(text: str | None) -> int:
    """At least the UTF-8 bytes of ``text`` (without encoding it)."""
    return 0 if not text else len(text) if text.isascii() else 4 * len(text)


def _readable(call: CallRecord) -> str | None:
    """``call``'s argument text (buffered, and given whole with its start) as its reader
    sees the words in it (:func:`_unescaped`), case folded (:func:`_folded`). None: a
    malformed ``\\u`` escape (the call is taken to hold every word: hidden, the safe side)."""
    out = []
    for part in (call.buffer or b"", (call.whole_arguments or "").encode("utf-8", "surrogatepass")):
        if b"\xed" in part:  # maybe raw surrogates: the halves of a pair that fragments split
            part = _UNSEEN_RAW_PAIRS.sub(_ZERO_WIDTH_SPACE, part)
        text = _unescaped(part)
        if text is None:
            return None
        out.append(_folded(text, b"\\ud" in part or b"\\uD" in part))  # an escaped surrogate: pairs too
    return "\x00".join(out)


def _folded(text: str, pairs: bool = False) -> str:
    """``text`` as the vocabulary's words (ASCII, lowercase) are matched in it: as a reader
    sees them. Every character a reader takes for an ASCII letter in another case becomes
    that letter: ``str.upper`` gives the capitals of the long s (U+017F), the dotless i
    (U+0131), the sharp s and the ``ﬁ``-style ligatures in ASCII, and ``str.lower`` then
    folds those, and the Kelvin sign (U+212A), to lowercase ASCII (the dotted capital I,
    U+0130, to a plain ``i``: ``str.lower`` would give ``i`` and a dot above); the
    characters no reader sees go (:data:`_UNSEEN`; with ``pairs``, the text came from
    escapes of surrogates, also as the escaped pairs of :data:`_UNSEEN_PAIRS`); then a dot
    above (U+0307) on an ``i`` or a ``j``, which have one already. Folding more only hides
    more. ASCII text is only lowercased (the same result)."""
    if text.isascii():
        return text.lower()
    text = _UNSEEN.sub("", text.replace("\u0130", "I").upper().lower())
    if pairs:
        text = _UNSEEN_PAIRS.sub("", text)
    if "\u0307" in text:
        text = text.replace("i\u0307", "i").replace("j\u0307", "j")
    return text


#: What a reader does not see between two letters: Unicode's default-ignorable code points
#: (zero-width spaces and joiners, the soft hyphen, variation selectors, bidirectional
#: marks, tags...). One set of characters: the engine scans for it in C.
_UNSEEN = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
#: The astral ones of :data:`_UNSEEN` as the two surrogates an escaped pair
#: (``\\udb40\\udc20``) leaves: :func:`_unescaped` does not join pairs.
_UNSEEN_PAIRS = re.compile("\ud82f[\udca0-\udca3]|\ud834[\udd73-\udd7a]|[\udb40-\udb43][\udc00-\udfff]")
#: The same pairs as raw surrogates in a call's buffer (each half as its surrogatepass UTF-8
#: bytes): two fragments that split such a character between them leave its halves there,
#: which :func:`_unescaped` would read as two replacement characters. Each becomes
#: :data:`_ZERO_WIDTH_SPACE`, one character as it was (a backslash before it escapes no
#: backslash after it), which :data:`_UNSEEN` then removes.
_ZERO_WIDTH_SPACE = "\u200b".encode()
_UNSEEN_RAW_PAIRS = re.compile(rb"\xed\xa0\xaf\xed\xb2[\xa0-\xa3]|\xed\xa0\xb4\xed\xb5[\xb3-\xba]|\xed\xad[\x80-\x83]\xed[\xb0-\xbf][\x80-\xbf]")


#: An escape the text was cut inside of, at its very end: a backslash, or ``\\u`` and up
#: to three hex digits (read in the text's last six bytes only).
_CUT_ESCAPE = re.compile(rb"\\(?:u[0-9a-fA-F]{0,3})?\Z")


def _unescaped(text: bytes | bytearray) -> str | None:
    """``text`` (JSON text as UTF-8, maybe cut anywhere) with its escapes undone as far as
    words go, by C code only: an escaped backslash and every escape but ``\\u`` become NUL
    bytes (they yield no word character), an escape cut at the end goes, and the
    ``\\uXXXX`` escapes left are undone by the ``unicode_escape`` codec (other characters
    given to it as escapes of their own, so each is read as the character it is). None: a
    malformed ``\\u`` escape, or a raw 0x01 byte (the marker this uses; never in valid JSON)."""
    if b"\\" not in text:
        return text.decode("utf-8", "replace")
    if b"\x01" in text:
        return None
    text = text.replace(b"\\\\", b"\x00\x00")  # left to right, as JSON pairs them
    text = text.replace(b"\\u", b"\x01").replace(b"\\", b"\x00").replace(b"\x01", b"\\u")
    cut = _CUT_ESCAPE.search(text, max(0, len(text) - 6))
    if cut is not None:
        text = text[: cut.start()]
    try:
        # lone surrogates (raw) become U+FFFD, no word character either way: read in C, not
        # one error-handler call per surrogate as "surrogatepass" would
        return codecs.decode(text.decode("utf-8", "replace").encode("ascii", "backslashreplace"), "unicode_escape")
    except UnicodeDecodeError:
        return None


def _known_word(word: str) -> bool:
    """``word`` is in a provider's documented vocabulary (:func:`toollatch.dialects.words.known`)
    or an HTTP status (three digits: no text to carry)."""
    from toollatch.dialects.words import is_known  # the dialects import this package

    return is_known(word) or (len(word) == 3 and word.isascii() and word.isdigit() and word[0] in "12345")


def guard_words(detail: str | None, found: dict[str, list[CallRecord]]) -> tuple[str | None, list[str]]:
    """``detail`` with each word of ``found`` (:func:`holders`) that a call which did not
    commit holds, or outside the vocabulary (no calls), hidden by its length: such a word
    could be the arguments leaking out
    through the provider's reason field. Returns the detail and the words hidden (kept for
    *Reveal*)."""
    hide = [w for w, calls in found.items() if not calls or any(c.machine.state is not COMMITTED for c in calls)]
    for word in sorted(hide, key=len, reverse=True):
        detail = detail.replace(word, hidden(word)) if detail else detail
    return detail, hide


def shown_detail(asm: Assembler, detail: str | None, message: str | None, found: dict[str, list[CallRecord]]) -> str | None:
    """The detail of a stream's end as shown: words guarded (:func:`guard_words`); the
    provider's own text and the words hidden (untrusted: they may quote the arguments) kept
    apart for a Reveal (``provider_message``), joined to the detail only when text is revealed."""
    detail, hide = guard_words(detail, found)
    message = "; ".join([*hide, *([message] if message else [])]) or None
    if message and asm.provider_message is None:
        asm.provider_message = message
    return f"{detail}: {message}" if asm.reveal and message else detail


def finish_truncated(asm: Assembler, op: StreamTruncated, out: list[AssemblyEvent]) -> None:
    """The stream stopped before its normal end: every open call fails ``stream_truncated``."""
    detail = shown_detail(asm, op.detail, op.message, holders(asm, op.detail, op.words))
    finish_failed(asm, "truncated", Reason.STREAM_TRUNCATED, detail, out)


def finish_error(asm: Assembler, op: StreamError, out: list[AssemblyEvent]) -> None:
    """The provider ended the stream with an error: every open call fails ``stream_error``."""
    detail = shown_detail(asm, op.detail, op.message, holders(asm, op.detail, op.words))
    finish_failed(asm, "error", Reason.STREAM_ERROR, detail, out)


def finish_failed(asm: Assembler, end: StreamEndKind, reason: Reason, detail: str | None, out: list[AssemblyEvent]) -> None:
    """Fail every call not yet terminal with ``reason`` (and ``detail``), then end the stream as ``end``."""
    for call in asm._ordered():
        if call.machine.state not in TERMINAL_STATES:
            call.diagnosis = call.cut_off(end)
            asm._fail(call, reason.with_detail(detail), out)
    asm._set_end(end, detail, out)


def finish_cancelled(asm: Assembler, op: Cancel, out: list[AssemblyEvent]) -> None:
    """The consumer cancelled the stream: every call not yet terminal becomes CANCELLED."""
    detail = op.detail
    for call in asm._ordered():
        if call.machine.state not in TERMINAL_STATES:
            call.reason = Reason.CANCELLED.with_detail(detail)
            call.diagnosis = call.cut_off("cancelled")  # what the buffer held: offsets and token classes only
            call.buffer = None
            asm._move(call, CANCEL, out)
    asm._set_end("cancelled", detail, out)
