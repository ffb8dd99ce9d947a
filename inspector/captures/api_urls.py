"""The JSON API under /api/."""

from django.urls import path, re_path

from . import api, lens_api

urlpatterns = [
    re_path(r"^captures/?$", api.captures_async, name="api-captures"),
    path("captures/<str:slug>", api.capture_detail, name="api-capture"),
    path(
        "captures/<str:slug>/lenient",
        api.capture_detail,
        {"policy": "lenient"},
        name="api-capture-lenient",
    ),
    path("captures/<str:slug>/lenses", lens_api.capture_lenses_view, name="api-capture-lenses"),
]
