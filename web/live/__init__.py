"""Live streams: the recording proxy, the mock and direct connect, assembled as their bytes arrive."""
