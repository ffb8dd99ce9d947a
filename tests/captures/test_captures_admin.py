"""The Django admin over captures, frames, assemblies, calls and fragments
(inspector/captures/admin.py): read-only pages that never load large columns."""

from __future__ import annotations

import re

import pytest
from capture_streams import DONE, chunk, sse, tool
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from inspector.captures import models
from inspector.captures.store import store_stream

pytestmark = pytest.mark.django_db

MODELS = [models.Capture, models.Frame, models.Assembly, models.Call, models.Fragment]
# Columns no admin query may read: they can be megabytes.
LARGE_COLUMNS = [
    '"captures_capture"."raw"',
    '"captures_capture"."request_json"',
    '"captures_assembly"."result_json"',
]
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>\s*[^<\s]", re.IGNORECASE)


def refused_capture(**meta) -> models.Capture:
    data = sse(
        chunk(tool(0, id="call_1", name="get_weather", args="")),
        chunk(tool(0, args='{"city": tru')),
        chunk(finish="tool_calls"),
        DONE,
    )
    return store_stream(data, stream_format="sse", **meta)


def url(model, view: str, *args) -> str:
    return reverse(f"admin:captures_{model._meta.model_name}_{view}", args=args)


def get_without_large_columns(client, path: str):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    for query in queries.captured_queries:
        for column in LARGE_COLUMNS:
            assert column not in query["sql"], (path, query["sql"])
    return response


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_changelist_and_change_page_answer_without_loading_large_columns(admin_client, model):
    source = refused_capture(title="admin weather", derived_from=refused_capture())
    obj = model.objects.filter(pk__in=_rows_of(model, source)).first()
    listing = get_without_large_columns(admin_client, url(model, "changelist"))
    assert listing.status_code == 200
    change = get_without_large_columns(admin_client, url(model, "change", obj.pk))
    assert change.status_code == 200
    for response in (listing, change):
        assert "Content-Security-Policy" in response
        assert not INLINE_SCRIPT.search(response.content.decode()), "inline script vs the CSP"


def _rows_of(model, capture: models.Capture):
    """Primary keys of `model`'s rows that belong to `capture`."""
    lookup = {
        models.Capture: "id",
        models.Frame: "capture",
        models.Assembly: "capture",
        models.Call: "assembly__capture",
        models.Fragment: "capture",
    }[model]
    return model.objects.filter(**{lookup: capture.pk}).values("pk")


def test_capture_list_filters_and_searches(admin_client):
    refused_capture(title="needle in the list", source="proxy")
    store_stream(sse(chunk(content="hello"), chunk(finish="stop"), DONE), stream_format="sse")
    changelist = url(models.Capture, "changelist")
    found = admin_client.get(changelist, {"q": "needle"})
    assert found.status_code == 200 and found.context["cl"].result_count == 1
    refused = admin_client.get(changelist, {"outcome__exact": "refused", "source__exact": "proxy"})
    assert [c.title for c in refused.context["cl"].result_list] == ["needle in the list"]
    code = refused.context["cl"].result_list[0].refusal_code
    assert admin_client.get(changelist, {"refusal_code__exact": code}).status_code == 200


def test_admin_is_read_only(admin_client):
    capture = refused_capture()
    assert admin_client.get(url(models.Capture, "add")).status_code == 403
    assert admin_client.get(url(models.Capture, "delete", capture.pk)).status_code == 403
    page = admin_client.get(url(models.Capture, "change", capture.pk)).content.decode()
    assert 'name="_save"' not in page


@pytest.mark.parametrize("login", [False, True], ids=["open-mode", "login-mode"])
def test_admin_needs_a_staff_login_even_in_open_mode(client, settings, login):
    settings.INSPECTOR_REQUIRE_LOGIN = login
    changelist = url(models.Capture, "changelist")
    response = client.get(changelist)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))
    assert client.get(reverse("admin:login")).status_code == 200
