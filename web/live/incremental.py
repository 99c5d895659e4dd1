"""Push-style capture decoding for live streams: :class:`IncrementalCapture` is
:class:`toollatch.wire.intake.PushDecoder` (the one decoder files, uploads, the CLI and
``latch()`` read through: SSE, JSON Lines, the AWS event stream, an HTTP head in front,
gzip) with every credential the request forwarded scrubbed from each event's text before
it is parsed."""

from __future__ import annotations

from functools import partial

from toollatch.wire.capture import ProviderEvent
from toollatch.wire.intake import PushDecoder

from toollatch.web.live.credentials import scrub_text


class IncrementalCapture:
    """``decode(chunk)`` returns the events the chunk completes, ``close()`` those left at
    end of input; any split of the input gives the same events as reading it whole."""

    def __init__(self, name: str, secrets: tuple[str, ...] = (), defer_over: int | None = None) -> None:
        self.name = name
        self.secrets = list(secrets)  # scrubbed from each event's text before it is parsed
        scrub = partial(scrub_text, secrets=self.secrets) if self.secrets else None
        #: ``defer_over``: payloads longer than this (characters) are left unparsed
        #: (:data:`~toollatch.wire.capture.UNPARSED`), for the session's backlog to read off the loop.
        self._decoder = PushDecoder(name, scrub, defer_over)

    def decode(self, chunk: bytes) -> list[ProviderEvent]:
        return self._decoder.feed(chunk)

    def close(self) -> list[ProviderEvent]:
        return self._decoder.close()
