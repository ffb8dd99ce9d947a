from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path

from inspector.health import health
from inspector.live import ingest
from inspector.login_throttle import ThrottledLoginView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("health", health, name="health"),
    # Login for INSPECTOR_REQUIRE_LOGIN (inspector/access.py); logout is a POST (Django 5).
    # Failed logins are throttled per user name and address (inspector/login_throttle.py).
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/ingest", ingest.open_ingest, name="ingest-open"),
    path("api/ingest/<str:slug>/append", ingest.append_ingest, name="ingest-append"),
    path("api/ingest/<str:slug>/close", ingest.close_ingest, name="ingest-close"),
    path("api/", include("inspector.captures.api_urls")),
    path("", include("inspector.live.urls")),
    path("", include("inspector.captures.urls")),
]

# Under ASGI, inspector.asgi serves static files whatever DEBUG says; this pattern is for
# the test client and WSGI with DEBUG on.
urlpatterns += staticfiles_urlpatterns()
