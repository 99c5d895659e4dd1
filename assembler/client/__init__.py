"""In the agent's own process: ``latch()`` around a stream, and its mirror into a dashboard."""
