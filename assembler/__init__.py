"""toollatch: streamed tool calls in, latched verdicts out.

A pure library: it imports no web framework. The agent developer's entry point is
:func:`latch` (``assembler/client/latch.py``, see ``docs/library.md``): the latch around an SDK
stream or raw response bytes.
"""

from toollatch.core.assembler import Assembler
from toollatch.wire.capture import CaptureError, ProviderEvent, iter_capture, iter_file, read_capture
from toollatch.core.config import AssembleConfig, ConfigError
from toollatch.core.finalize import StrictJSONError, strict_loads
from toollatch.client.latch import Latched, Turn, latch
from toollatch.core.model import (
    CallOutcome,
    CallState,
    CommittedCall,
    Reason,
    StreamResult,
    ToolResult,
)
from toollatch.core.pipeline import Pipeline, assemble_events
from toollatch.redaction.redact import AssemblyEvent, CallView
from toollatch.core.registry import RegistryError, ToolRegistry
from toollatch.wire.sse import SSEDecoder, SSEEvent
from toollatch.core.state import CallInput, CallStateMachine, IllegalTransition

__all__ = [
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
