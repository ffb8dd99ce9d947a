"""WSGI entry point (management/admin use only; the app is served over ASGI by daphne)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
application = get_wsgi_application()
