"""toollatch's assembler: streamed tool calls in, latched verdicts out.

A pure library: it imports no web framework. The agent developer's entry point is
:func:`latch` (``assembler/latch.py``, see ``docs/library.md``): the latch around an SDK
stream or raw response bytes.
"""

from .assembler import Assembler
from .capture import CaptureError, ProviderEvent, iter_capture, iter_file, read_capture
from .config import AssembleConfig, ConfigError
from .finalize import StrictJSONError, strict_loads
from .latch import Latched, Turn, latch
from .model import (
    CallOutcome,
    CallState,
    CommittedCall,
    Reason,
    StreamResult,
    ToolResult,
)
from .pipeline import Pipeline, assemble_events
from .redact import AssemblyEvent, CallView
from .registry import RegistryError, ToolRegistry
from .sse import SSEDecoder, SSEEvent
from .state import CallInput, CallStateMachine, IllegalTransition

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
