"""Websocket URL routes, mounted by inspector.asgi."""

from django.urls import path

from .consumers import CaptureConsumer, CaptureListConsumer, IngestConsumer

websocket_urlpatterns = [
    path("ws/captures/", CaptureListConsumer.as_asgi()),
    path("ws/captures/<str:slug>/", CaptureConsumer.as_asgi()),
    path("ws/ingest/", IngestConsumer.as_asgi()),
]
