"""Websocket URL routes, mounted by inspector.asgi."""

websocket_urlpatterns: list = []
