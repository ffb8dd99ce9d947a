from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path

from inspector.health import health

urlpatterns = [
    path("admin/", admin.site.urls),
    path("health", health, name="health"),
    path("api/", include("inspector.captures.api_urls")),
    path("", include("inspector.live.urls")),
    path("", include("inspector.captures.urls")),
]

# daphne doesn't serve static files itself; with DEBUG on (local `make run`) Django does.
urlpatterns += staticfiles_urlpatterns()
