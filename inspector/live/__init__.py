"""Live capture, above the stored captures: the recording proxy and guard
mode, ingest over HTTP and websocket, the one recorder they all store
through, the messages viewers get and the websocket consumers."""
