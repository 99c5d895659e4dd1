"""The conformance kit: score any streaming tool-call assembler on the case corpus.

``toollatch conformance --adapter NAME`` (or ``--command CMD``); see ``docs/conformance.md``.
"""

from toollatch.conformance.run import add_conformance, score

__all__ = ["add_conformance", "score"]
