"""Django admin for the stored captures: read-only, and light on large columns.

Captures are made by intake, the proxy and ingest, never by hand, so the admin only looks.
No delete either: its confirmation page loads and lists every related row (a capture can
have 100k frames).  Querysets, list and change pages alike, never load what can be large:
a capture's `raw` bytes and stored request, an assembly's result document and text, a
call's arguments and timeline when only shown as a related object.  The capture's own
page (`/c/<slug>/`) shows and downloads all of it.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from inspector.captures.models import Assembly, Call, Capture, Fragment, Frame

CAPTURE_LARGE = ("raw", "request_json")
ASSEMBLY_LARGE = ("result_json", "text")
CALL_LARGE = ("arguments", "arguments_text", "timeline")


def through(relation: str, fields: tuple[str, ...]) -> tuple[str, ...]:
    """`fields` of a related model, e.g. through("capture", ("raw",)) == ("capture__raw",)."""
    return tuple(f"{relation}__{field}" for field in fields)


class ReadOnlyAdmin(admin.ModelAdmin):
    """View only (no add, change or delete).  `related` objects are joined (for their
    names in lists and on change pages) and `deferred` columns are never loaded."""

    related: tuple[str, ...] = ()
    deferred: tuple[str, ...] = ()
    list_select_related = False  # get_queryset joins `related` already
    show_full_result_count = False  # no second COUNT(*) over a large table

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        if self.related:
            queryset = queryset.select_related(*self.related)
        return queryset.defer(*self.deferred)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(Capture)
class CaptureAdmin(ReadOnlyAdmin):
    list_display = (
        "slug",
        "title",
        "source",
        "outcome",
        "refusal_code",
        "model",
        "frame_count",
        "byte_size",
        "created",
    )
    list_filter = ("outcome", "refusal_code", "source", "stream_format")
    search_fields = ("title", "slug", "model")
    date_hierarchy = "created"
    related = ("derived_from",)
    deferred = CAPTURE_LARGE + through("derived_from", CAPTURE_LARGE)
    exclude = CAPTURE_LARGE


@admin.register(Frame)
class FrameAdmin(ReadOnlyAdmin):
    list_display = ("capture", "number", "kind", "arrived_ms")
    list_filter = ("kind",)
    search_fields = ("capture__slug", "capture__title")
    related = ("capture",)
    deferred = through("capture", CAPTURE_LARGE)


@admin.register(Assembly)
class AssemblyAdmin(ReadOnlyAdmin):
    list_display = ("capture", "policy", "outcome", "refusal_code", "refusal_frame")
    list_filter = ("policy", "outcome", "refusal_code")
    search_fields = ("capture__slug", "capture__title", "capture__model")
    related = ("capture",)
    deferred = ASSEMBLY_LARGE + through("capture", CAPTURE_LARGE)
    exclude = ASSEMBLY_LARGE


@admin.register(Call)
class CallAdmin(ReadOnlyAdmin):
    list_display = ("assembly", "position", "name", "call_id", "index", "fragment_count")
    search_fields = ("name", "call_id", "assembly__capture__slug")
    related = ("assembly",)
    deferred = through("assembly", ASSEMBLY_LARGE)


@admin.register(Fragment)
class FragmentAdmin(ReadOnlyAdmin):
    list_display = ("capture", "position", "seq", "frame", "offset", "depth", "complete")
    list_filter = ("complete", "in_string")
    search_fields = ("capture__slug", "capture__title")
    related = ("capture",)
    deferred = through("capture", CAPTURE_LARGE)
