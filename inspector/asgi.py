"""ASGI entry point: HTTP via Django, websockets via Channels."""

import gc
import os

from django.conf import settings
from django.core.asgi import get_asgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
django_asgi_app = get_asgi_application()  # before importing consumers/routing

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from inspector.access import websocket_application  # noqa: E402
from inspector.autobahn_log_args import install_lazy_log_arguments  # noqa: E402
from inspector.daphne_requests import install_unparsed_form_bodies  # noqa: E402
from inspector.input_guard import RefuseNulBytes  # noqa: E402
from inspector.live import recording_process  # noqa: E402
from inspector.live.recovery import started_by_daphne, watch_for_left_behind  # noqa: E402
from inspector.live.routing import websocket_urlpatterns  # noqa: E402
from inspector.logs import install_daphne_access_log  # noqa: E402
from inspector.server_gc import make_full_collections_rare  # noqa: E402
from inspector.static_files import StaticFilesApplication  # noqa: E402
from inspector.websocket_masking import install_integer_xor_masking  # noqa: E402

# daphne's access log prints whole query strings: ours redacts them (inspector/logs.py).
install_daphne_access_log()
# Twisted under daphne parsed every form upload whole for nothing (inspector/daphne_requests.py).
install_unparsed_form_bodies()
# autobahn built a C masker for every websocket frame; small ones are unmasked in
# one integer XOR (inspector/websocket_masking.py).
install_integer_xor_masking()
# ...and coloured the arguments of its debug log lines, on for none, for every frame
# (inspector/autobahn_log_args.py).
install_lazy_log_arguments()
# A server closes the live captures a dead predecessor left behind (inspector/live/recovery.py).
if settings.INSPECTOR_RECOVER_LIVE and started_by_daphne():
    watch_for_left_behind()
# The proxy's and the ingest socket's recordings in a process of their own
# (inspector/live/recording_process.py).
if settings.INSPECTOR_RECORDING_PROCESS and started_by_daphne():
    recording_process.start()

# NUL in a path or query is refused before anything reads it (inspector/input_guard.py).
application = RefuseNulBytes(
    ProtocolTypeRouter(
        {
            # /static/ from the finders even with DEBUG off (inspector/static_files.py).
            "http": StaticFilesApplication(django_asgi_app),
            # The session's user in scope["user"], then login / share / token checks.
            "websocket": websocket_application(URLRouter(websocket_urlpatterns)),
        }
    )
)

# Everything loaded so far (Django, the project, their modules and caches) lives as long
# as the process; the URLconf is loaded first so that every view module is in it.  Frozen
# out of the cyclic GC, it is no longer traversed by every full collection: those paused
# the server ~80 ms at a time, the whole tail of live viewers' latency
# (bench/live_viewer.py, 1,000 frames/s, side by side: p99 33-59 ms before, 21-27 after).
get_resolver().url_patterns  # noqa: B018 - imports the views
gc.freeze()
# What a server keeps after that is still traversed by every full collection, each
# a pause of the live streams: made rare (inspector/server_gc.py).
if started_by_daphne():
    make_full_collections_rare()
