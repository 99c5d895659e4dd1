"""The core: ops → the call state machine → the strict latch → assembly events, verdicts, results."""
