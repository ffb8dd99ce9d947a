"""ASGI entry point: HTTP via Django, websockets via Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
django_asgi_app = get_asgi_application()  # before importing consumers/routing

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from inspector.access import websocket_application  # noqa: E402
from inspector.live.routing import websocket_urlpatterns  # noqa: E402
from inspector.static_files import StaticFilesApplication  # noqa: E402

application = ProtocolTypeRouter(
    {
        # /static/ from the finders even with DEBUG off (inspector/static_files.py).
        "http": StaticFilesApplication(django_asgi_app),
        # The session's user in scope["user"], then login / share / token checks.
        "websocket": websocket_application(URLRouter(websocket_urlpatterns)),
    }
)
