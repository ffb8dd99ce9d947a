"""Websocket URL routes, mounted by inspector.asgi."""

from channels.security.websocket import WebsocketDenier
from django.urls import path, re_path

from .consumers import CaptureConsumer, CaptureListConsumer, IngestConsumer

websocket_urlpatterns = [
    path("ws/captures/", CaptureListConsumer.as_asgi()),
    path("ws/captures/<str:slug>/", CaptureConsumer.as_asgi()),
    path("ws/ingest/", IngestConsumer.as_asgi()),
    re_path(r"", WebsocketDenier.as_asgi()),  # any other path: refused, not a router error
]
