"""Pages: the capture list, upload form, capture page and frame permalinks;
the lens matrix, the minimizer, the export as a regression test, and the
comparison of two captures."""

from django.urls import path

from . import sharing
from .pages import capture, capture_list, compare, downloads, export, find, lenses, minimize, upload

urlpatterns = [
    path("", capture_list.capture_list, name="capture-list"),
    path("upload/", upload.upload, name="upload"),
    path("compare/", compare.compare_page, name="compare"),
    path("c/<str:slug>/", capture.capture_page, name="capture"),
    path("c/<str:slug>/frames/<int:n>/", capture.frame_page, name="frame"),
    path("c/<str:slug>/find/", find.find_in_arguments, name="capture-find"),
    path("c/<str:slug>/raw", downloads.download_raw, name="capture-raw"),
    path("c/<str:slug>/result.json", downloads.download_result, name="capture-result"),
    path("c/<str:slug>/lenses/", lenses.lens_page, name="capture-lenses"),
    path("c/<str:slug>/minimize", minimize.minimize_view, name="capture-minimize"),
    path(
        "c/<str:slug>/minimize/<str:job>",
        minimize.minimize_status,
        name="capture-minimize-status",
    ),
    path("c/<str:slug>/rotate/", sharing.rotate_view, name="capture-rotate"),
    path("c/<str:slug>/regression.<str:kind>", export.export_view, name="capture-export"),
]
