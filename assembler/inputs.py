"""Any supported input file → assembled streams.

Raw SSE (``curl -N``, with or without the ``curl -i`` head), JSON Lines, the AWS binary
event stream, and HAR 1.2 exports (each streaming entry is assembled on its own, with
the ``tools`` of its request as the registry unless one is given).
"""

from __future__ import annotations

from pathlib import Path

from .capture import CaptureError, iter_capture, iter_file
from .config import AssembleConfig
from .har import is_har, read_har
from .model import StreamResult
from .pipeline import Pipeline
from .registry import RegistryError, ToolRegistry

#: Bytes read to recognise a HAR document.
SNIFF = 4096


def assemble_path(
    path: Path,
    *,
    dialect: str | None = None,
    config: AssembleConfig | None = None,
    registry: ToolRegistry | None = None,
    reveal: bool = False,
) -> list[tuple[str, StreamResult]]:
    """Assemble every stream in ``path``; each result comes with the name of its source.

    Raises :class:`CaptureError` when the file cannot be read or holds no known stream.
    """
    try:
        with path.open("rb") as handle:
            head = handle.read(SNIFF)
    except OSError as exc:
        raise CaptureError(f"{path}: cannot open: {exc.strerror}") from None
    if is_har(head):
        entries = read_har(path.read_bytes(), str(path))
        if not entries:
            raise CaptureError(f"{path}: the HAR export has no streaming entry")
        out: list[tuple[str, StreamResult]] = []
        for entry in entries:
            own = registry
            if own is None and entry.tools is not None:
                try:
                    own = ToolRegistry.from_tools(entry.tools).ensure_usable()
                except RegistryError as exc:
                    raise CaptureError(f"{entry.name}: request tools: {exc}") from None
            pipeline = Pipeline(dialect, config=config, registry=own, reveal=reveal, name=entry.name, emit_events=False)
            for event in iter_capture([entry.body], entry.name):
                pipeline.feed(event)
            pipeline.close()
            out += [(f"{entry.name} {entry.method} {entry.url}", r) for r in pipeline.results()]
        return out
    pipeline = Pipeline(dialect, config=config, registry=registry, reveal=reveal, name=str(path), emit_events=False)
    for event in iter_file(path):
        pipeline.feed(event)
    pipeline.close()
    return [(str(path), r) for r in pipeline.results()]
