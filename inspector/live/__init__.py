"""Live capture: websocket consumers and routing."""
