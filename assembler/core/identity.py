"""Where a call starts and what it is called: its position, tool_call_id and name.

:class:`~toollatch.core.assembler.Assembler` hands :class:`~toollatch.core.model.CallStart`
and :class:`~toollatch.core.model.CallIdentity` ops here, with the list the assembly events
go to. A call's key may be reused by a different call (another tool_call_id at the same
position): the two are never merged, the older call fails and the newer one gets a fresh
key. A tool_call_id already committed in the run is refused at once; a name that changes
mid-call fails the call ``name_conflict``. Ids and names that were not valid Unicode are
remembered for the latch (:mod:`toollatch.core.stream_end`), and so is how many client
calls of the stream carry each tool_call_id (``Assembler._holders``: the latch fails a
call whose id another call carries), calls a reader left out included (:func:`left_out`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toollatch.core import stream_end
from toollatch.core.calls import CallRecord
from toollatch.core.model import COMMITTED, OPEN, TERMINAL_STATES, CallIdentity, CallsLeftOut, CallStart, Reason, Transition
from toollatch.redaction.redact import AssemblyEvent

#: Builds a :class:`Transition` from a tuple of its fields without its Python-level ``__new__``.
_transition = tuple.__new__

if TYPE_CHECKING:
    from toollatch.core.assembler import Assembler


def start(asm: Assembler, op: CallStart, out: list[AssemblyEvent]) -> None:
    """A call starts at ``op.key``: a new record, OPEN. A start where a call already is
    counts a quirk and updates its identity, unless it carries a different tool_call_id:
    then the older call fails and the new one gets a fresh key (the two are never merged).
    A new call fails at once when its tool_call_id is not its own
    (:func:`~toollatch.core.stream_end.id_taken`), else past the in-flight limit or the size."""
    key = asm._alias.get(op.key, op.key)
    existing = asm._calls.get(key)
    if existing is not None:
        if not (op.call_id and existing.call_id and op.call_id != existing.call_id):
            asm._quirk("call_start_repeated", out)
            identity(asm, CallIdentity(op.key, op.call_id, op.name, op.not_unicode), out)
            return
        displaced(asm, existing, out)
        n = asm._reused.get(op.key, 1)
        while op.key + (n,) in asm._calls:  # a key the adapter gave another call: skip it
            n += 1
        asm._reused[op.key] = n + 1
        key = asm._alias[op.key] = op.key + (n,)
    call = CallRecord(key, op.call_id or None, op.name or None, op.executor, op.whole_arguments)
    if call.call_id and op.executor == "client":
        hold(asm, call.call_id)
    if op.not_unicode:
        call.not_unicode = op.not_unicode
    call.item = op.item
    if op.whole_arguments:
        call.bytes = len(op.whole_arguments.encode("utf-8", "surrogatepass"))
    in_flight = asm._in_flight
    call.order = len(asm._calls)
    asm._calls[key] = call
    asm._in_flight += 1
    if asm._awaiting is not None:
        asm._awaiting.append()
    call.last_activity = now = asm._clock() - asm._t0
    call.transitions.append(_transition(Transition, (OPEN, now)))
    if asm.emit_events:
        asm._emit(out, "call_opened", call)
    config = asm.config
    if call.call_id and call.executor == "client" and stream_end.id_taken(asm, call, out):
        return  # the id first: a call whose id an earlier stream answered owes no result of its own
    if in_flight >= config.max_tool_calls_in_flight_assemble:
        limit = config.max_tool_calls_in_flight_assemble
        asm._fail(call, Reason.TOO_MANY_TOOL_CALLS.with_detail(f"more than {limit} calls in flight"), out)
    elif call.bytes > config.max_tool_argument_bytes:
        asm._overflow(call, out)


def displaced(asm: Assembler, existing: CallRecord, out: list[AssemblyEvent]) -> None:
    """Another call starts where ``existing`` is: never merge the two. The older one can no
    longer be told apart from the newer one's fragments, so it fails."""
    asm._quirk("call_started_at_a_used_key", out)
    if existing.machine.state not in TERMINAL_STATES:
        asm._fail(existing, Reason.STREAM_ERROR.with_detail("another call started at its position"), out)


def identity(asm: Assembler, op: CallIdentity, out: list[AssemblyEvent]) -> None:
    """The call at ``op.key`` learns its tool_call_id and/or name. A repeat counts a quirk; a
    different name fails the call ``name_conflict``; a different id is kept only when
    ``op.final`` says so (quirk ``call_id_replaced``), else counted as ``id_conflict``.
    A ``final`` id replaces the first on a call that already failed too (its error result
    pairs with the id the provider finalized), never on a committed one. A new id is
    checked before the name (:func:`~toollatch.core.stream_end.id_taken`: another call of
    the stream carries it, or one committed it in an earlier stream); a call that already
    failed owes no result of its own for an id committed in an earlier stream (the
    committed call answers it)."""
    call = asm._calls.get(asm._alias.get(op.key, op.key))
    if call is None:
        start(asm, CallStart(op.key, op.call_id, op.name, not_unicode=op.not_unicode), out)
        return
    changed = False
    conflict: str | None = None  # a name other than the call's
    if op.call_id:
        if call.call_id is None:
            call.call_id, changed = op.call_id, True
            if call.executor == "client":
                hold(asm, op.call_id)
            if "call_id" in op.not_unicode:
                call.not_unicode += ("call_id",)
        elif op.call_id == call.call_id:
            asm._quirk("id_repeated", out)
        elif op.final and call.machine.state is not COMMITTED:  # a call that failed too: its result pairs with the final id
            if call.executor == "client":
                hold(asm, call.call_id, -1)
                hold(asm, op.call_id)
                if call.repaired and call.reason in stream_end.REFUSED:  # refused for its first id only
                    call.repaired = False  # the final one owes this error result (unless answered too: below)
                    call.reason = Reason.STREAM_ERROR.with_detail(stream_end.FIRST_ID_ANSWERED)
            call.call_id, changed = op.call_id, True
            call.not_unicode = tuple(f for f in call.not_unicode if f != "call_id") + (("call_id",) if "call_id" in op.not_unicode else ())
            asm._quirk("call_id_replaced", out)
        else:
            asm._quirk("id_conflict", out)
    if op.name:
        if call.name is None:
            call.name, changed = op.name, True
            if "name" in op.not_unicode:
                call.not_unicode += ("name",)
        elif op.name == call.name:
            asm._quirk("name_repeated", out)
        else:
            asm._quirk("name_conflict", out)
            conflict = op.name
    if changed:
        asm._emit(out, "identity", call)
        if call.call_id and call.executor == "client" and call.machine.state is not COMMITTED:
            if call.machine.state not in TERMINAL_STATES:
                stream_end.id_taken(asm, call, out)
            elif stream_end.answered_before(asm, call.call_id):  # an earlier stream answered it
                call.repaired = True  # (one of this stream: the stream end keeps one record per id)
    if conflict is not None and call.machine.state not in TERMINAL_STATES:
        declared = asm.registry is not None and conflict in asm.registry
        asm._fail(call, Reason.NAME_CONFLICT.with_detail(renamed(call.name, conflict, declared or asm.reveal)), out)  # type: ignore[arg-type]


def hold(asm: Assembler, call_id: str, count: int = 1) -> None:
    """Count one more (``count`` 1) or one fewer (-1) client call of the stream carrying ``call_id``."""
    holders = asm._holders
    holders[call_id] = holders.get(call_id, 0) + count


def left_out(asm: Assembler, op: CallsLeftOut, out: list[AssemblyEvent]) -> None:
    """The identity ops of calls a reader left out (:class:`~toollatch.core.model.CallsLeftOut`):
    no record, but each tool_call_id they give a client call is counted as :func:`start`
    and :func:`identity` would count it (a start with another id at a key is another call;
    an id is replaced only by a ``final`` one), so the latch judges the calls followed as
    it would with every call there; a call left out that starts where a call followed is
    (a restart: :func:`start`) fails that call. A call left out has no state here: a ``final`` id
    replaces its first one whatever the call's state, where :func:`identity` keeps the
    first on a committed call; the one dialect with final ids (Responses) gives them
    only before the item stops, so before a pipelined call can commit."""
    known = asm._left_out
    if known is None:
        known = asm._left_out = {}
    for each in op.ops:
        key, call_id = each.key, each.call_id
        seen = known.get(key)
        if seen is None and type(each) is CallStart and call_id:  # another call where a call followed is: it fails
            existing = asm._calls.get(asm._alias.get(key, key))
            if existing is not None and existing.call_id and existing.call_id != call_id:
                displaced(asm, existing, out)
        if seen is None or (type(each) is CallStart and call_id and seen[0] and call_id != seen[0]):
            client = each.executor == "client" if type(each) is CallStart else True
            known[key] = (call_id, client)
            if call_id and client:
                hold(asm, call_id)
        elif call_id and seen[1] and call_id != seen[0]:
            if seen[0] is None:
                known[key] = (call_id, True)
                hold(asm, call_id)
            elif type(each) is CallIdentity and each.final:
                hold(asm, seen[0], -1)
                known[key] = (call_id, True)
                hold(asm, call_id)


def renamed(first: str, later: str, quoted: bool = True) -> str:
    """The detail of a ``name_conflict``: both tool names, each cut to 64 characters; the
    later one only when ``quoted`` (a declared tool, or text revealed), else its length: a
    name no tool has is provider text, and could be argument text."""
    def cut(name: str) -> str:
        return repr(name if len(name) <= 64 else name[:64] + "…")
    shown = cut(later) if quoted else f"a name of {len(later)} characters that is no declared tool"
    return f"a later chunk named a different tool for this call ({cut(first)}, then {shown})"
