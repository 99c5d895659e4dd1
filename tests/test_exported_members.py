"""The public API of ``toollatch`` is curated: ``__all__`` is pinned and every name resolves."""

from __future__ import annotations

import toollatch

EXPECTED = [
    "AssembleConfig",
    "Assembler",
    "AssemblyEvent",
    "CallInput",
    "CallOutcome",
    "CallState",
    "CallStateMachine",
    "CallView",
    "CaptureError",
    "CommittedCall",
    "ConfigError",
    "IllegalTransition",
    "Latched",
    "Pipeline",
    "ProviderEvent",
    "Reason",
    "RegistryError",
    "SSEDecoder",
    "SSEEvent",
    "StreamResult",
    "StrictJSONError",
    "ToolRegistry",
    "ToolResult",
    "Turn",
    "assemble_events",
    "iter_capture",
    "iter_file",
    "latch",
    "read_capture",
    "strict_loads",
]


def test_all_is_pinned() -> None:
    assert EXPECTED == sorted(EXPECTED)
    assert toollatch.__all__ == EXPECTED


def test_every_exported_name_resolves_to_a_public_object() -> None:
    for name in toollatch.__all__:
        member = getattr(toollatch, name)
        module = getattr(member, "__module__", "")
        assert module.startswith("toollatch."), (name, module)
        assert getattr(member, "__name__", name) == name


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from toollatch import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == EXPECTED
