"""What one latched response came to: :class:`Turn`, made from the ended pipeline by :func:`turn_of`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from toollatch.core.history import Message, build_history
from toollatch.core.model import CallState, CommittedCall, StreamEndKind, StreamResult, ToolResult
from toollatch.core.pipeline import Pipeline


@dataclass(frozen=True, slots=True)
class Turn:
    """What one latched response came to.

    ``committed``: the client calls that passed the latch, in finalize order (each a
    :class:`~toollatch.core.model.CommittedCall`: ``call_id``, ``name``, ``arguments`` parsed).
    ``results``: one error :class:`~toollatch.core.model.ToolResult` per client call that did
    not commit (``is_error`` true, paired with its ``tool_call_id``). ``end``: how the last
    stream ended (``complete``, ``truncated``, ``error``, ``cancelled``; None when no provider
    stream was recognised, then ``error`` says why). ``streams``: every stream's full record
    (``toollatch assemble --json``'s document, as :class:`~toollatch.core.model.StreamResult`).
    """

    dialect: str | None
    end: StreamEndKind | None
    streams: tuple[StreamResult, ...]
    committed: tuple[CommittedCall, ...]
    results: tuple[ToolResult, ...]
    error: str | None = None

    def history(self, executed: Mapping[str, ToolResult | str] | None = None) -> list[Message]:
        """The finalized turn for the next request, in the dialect's own message shape
        (:func:`toollatch.core.history.build_history`): one assistant message with every
        finalized client call, then exactly one result per call.

        ``executed`` maps a committed call's ``tool_call_id`` to what running it gave (a
        :class:`~toollatch.core.model.ToolResult`, or its text as a successful result); a
        committed call without an entry is listed without a result (still to run).
        """
        done = {cid: r if isinstance(r, ToolResult) else ToolResult(cid, False, str(r)) for cid, r in (executed or {}).items()}
        out: list[Message] = []
        for stream in self.streams:
            out += build_history(stream, done)
        return out


def turn_of(pipeline: Pipeline, error: str | None = None) -> Turn:
    """The :class:`Turn` of a ``pipeline`` that has ended (closed or cancelled); ``error``:
    why its input could not be read, if so. Committed client calls in finalize order,
    the error results owed for the rest, stream by stream."""
    streams = tuple(pipeline.results())
    committed: list[CommittedCall] = []
    results: list[ToolResult] = []
    for index, stream in enumerate(streams):
        for call in stream.calls:
            if call.executor == "client" and call.state is CallState.COMMITTED:
                done = pipeline.committed(index, call.key)
                if done is not None:
                    committed.append(done)
        results += stream.results
    end = streams[-1].end if streams else None
    return Turn(pipeline.dialect, end, streams, tuple(committed), tuple(results), error)


__all__ = ["Turn", "turn_of"]
