from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import path

from inspector.health import health

urlpatterns = [
    path("admin/", admin.site.urls),
    path("health", health, name="health"),
]

# daphne doesn't serve static files itself; with DEBUG on (local `make run`) Django does.
urlpatterns += staticfiles_urlpatterns()
