"""toollatch dashboard: FastAPI app, replay sessions and WebSocket live updates."""
