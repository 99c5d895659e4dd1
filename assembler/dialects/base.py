"""What every dialect adapter is: provider events in, provider-independent ops out.

An adapter is a thin translation. It knows the provider's wire format and nothing of
states, latches or limits; it never parses argument text.
"""

from __future__ import annotations

from typing import Protocol

from ..capture import ProviderEvent
from ..model import Op


class DialectAdapter(Protocol):
    """``feed`` one provider event, get the ops it means; ``close`` at end of input."""

    name: str

    def feed(self, event: ProviderEvent) -> list[Op]: ...

    def close(self) -> list[Op]: ...
