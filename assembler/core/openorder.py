"""How many calls that opened before a given one still await their verdict, in O(log n).

A pipelined call waits for the stream end while the calls opened before it that have no
verdict yet may need the run budget's room (:func:`toollatch.core.stream_end.latches_now`).
Counting them by walking the calls costs one step per call: quadratic over a stream of
many pipelined calls. :class:`AwaitingCount` is a Fenwick (binary indexed) tree over the
calls in the order they opened, one slot per call (1 while it awaits a verdict, 0 once
terminal), that grows by one slot per call opened.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["AwaitingCount"]


class AwaitingCount:
    """Calls in opening order (slot ``i``: the ``i``-th call opened, from 0), each counted
    1 while awaiting its verdict. :meth:`append`, :meth:`settle` and :meth:`before` cost
    O(log n) for ``n`` calls; memory is one int per call."""

    __slots__ = ("_tree",)

    def __init__(self, awaiting: Iterable[bool] = ()) -> None:
        self._tree: list[int] = [0]  # 1-based: _tree[i] sums slots (i - lowbit(i), i]
        for flag in awaiting:
            self.append(flag)

    def __len__(self) -> int:
        return len(self._tree) - 1

    def append(self, awaiting: bool = True) -> None:
        """One more call opened (slot ``len(self)``), counted 1 when ``awaiting``."""
        i = len(self._tree)
        # the new node sums its own slot and the slots (i - lowbit(i), i - 1], all known
        self._tree.append(int(awaiting) + self._prefix(i - 1) - self._prefix(i - (i & -i)))

    def settle(self, slot: int) -> None:
        """The call in ``slot`` reached a terminal state: no longer counted. Call once per slot."""
        tree, i = self._tree, slot + 1
        while i < len(tree):
            tree[i] -= 1
            i += i & -i

    def before(self, slot: int) -> int:
        """Calls in slots ``0 .. slot - 1`` (opened before the call in ``slot``) still awaiting."""
        return self._prefix(slot)

    def _prefix(self, i: int) -> int:
        tree, total = self._tree, 0
        while i > 0:
            total += tree[i]
            i -= i & -i
        return total
