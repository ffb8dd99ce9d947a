"""Django settings for Stream Inspector.

Defaults give a zero-config local setup (SQLite + in-memory channel layer). Set DATABASE_URL
(e.g. postgres://postgres@127.0.0.1:5432/postgres) and REDIS_URL (e.g. redis://127.0.0.1:6379/0)
to run on PostgreSQL + Redis.
"""

import os
from pathlib import Path

import dj_database_url

from inspector import deploy

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    return deploy.env_bool(os.environ, name, default)


SECRET_KEY = os.environ.get("INSPECTOR_SECRET_KEY", deploy.DEV_SECRET_KEY)
DEBUG = _env_bool("INSPECTOR_DEBUG", True)

ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"] + deploy.env_list(
    os.environ, "INSPECTOR_ALLOWED_HOSTS"
)

# Behind an HTTPS load balancer (README "PostgreSQL, Redis, and more than one process"):
# the page origins browsers post forms from, and trust in X-Forwarded-Proto (inspector/deploy.py).
CSRF_TRUSTED_ORIGINS = deploy.csrf_trusted_origins(os.environ)
_https_proxy = deploy.https_proxy(os.environ)
SECURE_PROXY_SSL_HEADER = _https_proxy.ssl_header
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = _https_proxy.secure_cookies

INSTALLED_APPS = [
    "daphne",  # must be first: its runserver replaces Django's with an ASGI one
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # The search's trigram indexes (migration 0013, PostgreSQL only); harmless on SQLite.
    "django.contrib.postgres",
    "channels",
    "inspector",
    "inspector.captures",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy on HTML responses: no inline script or style (inspector/access.py).
    "inspector.access.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Login, share links and API tokens (inspector/access.py); needs request.user.
    "inspector.access.LoginRequiredUnlessShared",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "inspector.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "inspector.access.context",
            ],
        },
    },
]

WSGI_APPLICATION = "inspector.wsgi.application"
ASGI_APPLICATION = "inspector.asgi.application"

# Database: DATABASE_URL if set, else a local SQLite file.
DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("INSPECTOR_CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file test DB (not :memory:) so a live server process (ChannelsLiveServerTestCase,
    # daphne subprocess) can see rows written by tests; ChannelsLiveServerTestCase refuses
    # an in-memory database outright.
    DATABASES["default"].setdefault("TEST", {})["NAME"] = BASE_DIR / "test_db.sqlite3"
    # SQLite has one writer at a time.  A transaction that reads before it writes (closing a
    # live capture) got "database is locked" at once, without waiting, while an upload was
    # committing (SQLite's deadlock rule for deferred transactions), and the capture stayed
    # live.  BEGIN IMMEDIATE takes the write lock first, so every writer waits its turn, up
    # to `timeout` seconds.
    # WAL: readers never wait for the writer nor it for them, and a commit appends to the
    # log instead of rewriting pages, so live frames are committed (and survive a kill -9)
    # while an upload writes; synchronous=NORMAL is still durable across a process crash
    # (only an OS crash or power cut can lose the last commits).  Writers in one process
    # take turns in captures/writes.py.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            # No connection checkpoints the log: a thread does (captures/writes.py), when
            # the log is long; a log checkpointed whole is cut short as it starts again.
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                "PRAGMA wal_autocheckpoint=0; PRAGMA journal_size_limit=0;"
            ),
        }
    )

# Channel layer: Redis for cross-process pushes (commands, workers), else in-process memory.
# Redis pub/sub: the project only sends to groups (`live/broadcast.py`), each a PUBLISH that
# one subscription per process fans out to its viewers.  The list-based layer
# (`channels_redis.core`) ran about five commands and two Lua scripts a message (group
# lookup, a push per member, a blocking pop and its backup clean-up per receive): 161-173 us
# of server CPU a frame at 5,000 frames/s against 127-152, p99 23-58 ms against 15-26
# (bench/README.md).  Pub/sub keeps nothing for a process that is not subscribed, which
# is all a group send ever reached anyway (a viewer joins, then reads its snapshot).
# `live/layer.py` makes a process's first subscription heard at once (the stock layer's
# receiver slept 0.1 s through it).
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "inspector.live.layer.PromptPubSubChannelLayer",
            # Above redis-py 8's default socket timeout (5 s), which once dropped every
            # consumer idle for 5 s with close code 1011 (the list layer's 5 s pops).
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Largest stream capture accepted by upload (bytes). Default 20 MB.
INSPECTOR_MAX_UPLOAD_BYTES = int(os.environ.get("INSPECTOR_MAX_UPLOAD_BYTES", 20 * 1024 * 1024))
# Keep Django's request-body limit in line with it (small headroom for multipart/form fields).
DATA_UPLOAD_MAX_MEMORY_SIZE = INSPECTOR_MAX_UPLOAD_BYTES + 1024 * 1024
# A request body (the API's raw upload) or an uploaded file larger than this is spooled to
# a temporary file, not held in memory beside the bytes read from it (Django's default,
# 2.5 MB; it was the whole upload limit: two copies of every upload while it was stored).
FILE_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("INSPECTOR_UPLOAD_SPOOL_BYTES", 2_621_440))
# Bounded work per upload (inspector/captures/uploads.py): entries a HAR may hold (all
# entries, event streams or not) and captures one upload may make; over either -> 413.
INSPECTOR_MAX_HAR_ENTRIES = int(os.environ.get("INSPECTOR_MAX_HAR_ENTRIES", 20_000))
INSPECTOR_MAX_CAPTURES_PER_UPLOAD = int(os.environ.get("INSPECTOR_MAX_CAPTURES_PER_UPLOAD", 500))
# Frames written per write transaction when an upload is stored: no upload holds the
# database's write lock (SQLite has one) for longer than one such batch.
INSPECTOR_UPLOAD_BATCH_FRAMES = int(os.environ.get("INSPECTOR_UPLOAD_BATCH_FRAMES", 500))
# On SQLite, an upload of at least this many bytes has its steps written by a child process
# while this one reads the next (inspector/captures/step_writers.py); negative: never.  A
# child starts and stops in about 50 ms, what it saves on an upload of 3-4 MB.
INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES = int(
    os.environ.get("INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES", 8 * 1024 * 1024)
)
# An upload of at least this many frames has PostgreSQL refresh the frames table's
# statistics when it is stored (inspector/captures/planner_stats.py).
INSPECTOR_ANALYZE_AFTER_FRAMES = int(os.environ.get("INSPECTOR_ANALYZE_AFTER_FRAMES", 10_000))
# Uploads of at least INSPECTOR_LARGE_UPLOAD_BYTES are stored at most
# INSPECTOR_MAX_LARGE_UPLOADS at a time per process (memory); one more is answered 503.
INSPECTOR_LARGE_UPLOAD_BYTES = int(os.environ.get("INSPECTOR_LARGE_UPLOAD_BYTES", 2 * 1024 * 1024))
INSPECTOR_MAX_LARGE_UPLOADS = int(os.environ.get("INSPECTOR_MAX_LARGE_UPLOADS", 2))
# Frames per message of a live view's snapshot (`/ws/captures/<slug>/`): a late joiner of a
# big capture gets its frames in pages, each a bounded query, and the paging stops when the
# socket closes.
INSPECTOR_SNAPSHOT_FRAMES = int(os.environ.get("INSPECTOR_SNAPSHOT_FRAMES", 1000))
# A live capture's viewer that heard nothing for this long asks the database whether frames
# were stored or the capture closed meanwhile: its messages may have been lost (a Redis
# connection re-made, processes on channel layers that don't hear each other).
INSPECTOR_VIEWER_CHECK_SECONDS = float(os.environ.get("INSPECTOR_VIEWER_CHECK_SECONDS", 5))

# --- Live capture: the recording proxy, guard mode, retry chains -----------------------------
# Named upstreams the proxy forwards to: "name=base_url,name=base_url" (base URLs end in /v1).
# `POST /proxy/<name>/v1/chat/completions` goes to `<base_url>/chat/completions`.
INSPECTOR_UPSTREAMS = os.environ.get("INSPECTOR_UPSTREAMS", "local=http://127.0.0.1:9100/v1")
# Seconds to wait for an upstream: to connect, and between two reads of a response.
INSPECTOR_UPSTREAM_CONNECT_TIMEOUT = float(os.environ.get("INSPECTOR_UPSTREAM_CONNECT_TIMEOUT", 10))
INSPECTOR_UPSTREAM_READ_TIMEOUT = float(os.environ.get("INSPECTOR_UPSTREAM_READ_TIMEOUT", 300))
# Extra request headers whose values are never stored (names or patterns, comma-separated,
# e.g. "x-*-key,x-tenant-secret"); they are still forwarded upstream.
INSPECTOR_REDACT_HEADERS = deploy.env_list(os.environ, "INSPECTOR_REDACT_HEADERS")
# Extra request-body field names to strip before a request is stored (comma-separated).
INSPECTOR_REDACT_FIELDS = deploy.env_list(os.environ, "INSPECTOR_REDACT_FIELDS")
# Personal data, forwarded but never stored: top-level request-body fields and query
# parameters by name (comma-separated; set it empty to store them all).  The capture
# page lists the names it dropped.
INSPECTOR_DROP_FIELDS = (
    deploy.env_list(os.environ, "INSPECTOR_DROP_FIELDS")
    if "INSPECTOR_DROP_FIELDS" in os.environ
    else ["user", "safety_identifier", "prompt_cache_key", "metadata", "code", "state"]
)
# Identical requests (model, messages, tools) within this many seconds of the chain's last
# attempt are attempts of one logical request.
INSPECTOR_ATTEMPT_WINDOW_SECONDS = int(os.environ.get("INSPECTOR_ATTEMPT_WINDOW_SECONDS", 600))
# Guard mode: retries of a retryable refusal, and the first backoff (doubling each retry).
INSPECTOR_GUARD_RETRIES = int(os.environ.get("INSPECTOR_GUARD_RETRIES", 2))
INSPECTOR_GUARD_BACKOFF_SECONDS = float(os.environ.get("INSPECTOR_GUARD_BACKOFF_SECONDS", 0.5))

# A live capture with nothing stored for this many seconds was left by a dead process
# (`manage.py recover_live` closes it; inspector/live/recovery.py).
INSPECTOR_LIVE_STALE_SECONDS = float(os.environ.get("INSPECTOR_LIVE_STALE_SECONDS", 120))
# Every daphne process closes live captures idle that long (a dead process's), at start and
# every half stale time (inspector/live/recovery.py); 0 leaves it to `manage.py recover_live`.
INSPECTOR_RECOVER_LIVE = _env_bool("INSPECTOR_RECOVER_LIVE", True)
# The proxy's and the ingest websocket's recordings in a process of their own beside each
# daphne process, so that a fast stream's relay and its recording don't queue for one
# interpreter (inspector/live/recording_process.py, docs/deployment.md).  Its viewers'
# messages go through Redis: daphne refuses to start with it and no REDIS_URL.
INSPECTOR_RECORDING_PROCESS = _env_bool("INSPECTOR_RECORDING_PROCESS", False)
# Threads a process's websocket recordings write their batches in, and as many for their
# side lanes (fragments, cards): shared by its recordings (inspector/live/recording_threads.py).
INSPECTOR_RECORDING_THREADS = int(os.environ.get("INSPECTOR_RECORDING_THREADS", 2))

# --- Minimizer ---------------------------------------------------------------------------------
# Time budget (seconds) of one minimization (`manage.py minimize`, the capture page's button).
INSPECTOR_MINIMIZE_SECONDS = float(os.environ.get("INSPECTOR_MINIMIZE_SECONDS", 30))

# --- Lens results (inspector/captures/lens_cache.py; README "Settings") -----------------------
# A capture with more frames than this gets a "too large for this lens" cell, never a run.
INSPECTOR_LENS_MAX_FRAMES = int(os.environ.get("INSPECTOR_LENS_MAX_FRAMES", 20000))
# Each lens run: a forked process killed after this many seconds, with this much address space.
INSPECTOR_LENS_SECONDS = float(os.environ.get("INSPECTOR_LENS_SECONDS", 60))
INSPECTOR_LENS_MEMORY_MB = int(os.environ.get("INSPECTOR_LENS_MEMORY_MB", 1024))
# Lens runs at once per server process (a thread pool; 0 runs them in the request).
INSPECTOR_LENS_WORKERS = int(os.environ.get("INSPECTOR_LENS_WORKERS", 2))
# How long a page or API request waits for runs it started before answering "computing".
INSPECTOR_LENS_WAIT_SECONDS = float(os.environ.get("INSPECTOR_LENS_WAIT_SECONDS", 0.8))
# A run nobody asked for in this long is stopped (its process killed) and started again at
# the next request; the pages ask every 1-3 s while it runs.  0: every run goes to its limits.
INSPECTOR_LENS_ABANDON_SECONDS = float(os.environ.get("INSPECTOR_LENS_ABANDON_SECONDS", 10))

# --- Access and sharing (inspector/access.py; README "Access and sharing") -------------------
# Django auth guards every page, the upload, the API, ingest and the proxy.
INSPECTOR_REQUIRE_LOGIN = _env_bool("INSPECTOR_REQUIRE_LOGIN", False)
# With login required, a capture's share link (its slug URL) still opens it read-only.
INSPECTOR_SHARING = _env_bool("INSPECTOR_SHARING", True)
# Tokens for scripts (Authorization: Bearer <token> or X-Inspector-Token: <token>),
# comma-separated; when any are set, the API, ingest and proxy need one (or a session).
INSPECTOR_API_TOKENS = deploy.env_list(os.environ, "INSPECTOR_API_TOKENS")
# Failed logins: this many per user name or address within the window, then 429.
INSPECTOR_LOGIN_FAILURES = int(os.environ.get("INSPECTOR_LOGIN_FAILURES", 5))
INSPECTOR_LOGIN_WINDOW_SECONDS = int(os.environ.get("INSPECTOR_LOGIN_WINDOW_SECONDS", 900))
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "capture-list"
LOGOUT_REDIRECT_URL = "login"
# Set by SecurityMiddleware on every response (these are Django's defaults, stated here).
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# Login on, but DEBUG on or the public dev key: refuse to start (inspector/deploy.py).
deploy.refuse_unsafe_startup(
    os.environ, require_login=INSPECTOR_REQUIRE_LOGIN, debug=DEBUG, secret_key=SECRET_KEY
)

# --- Logging ----------------------------------------------------------------------------------
# httpx logs every upstream request's full URL at INFO, query string included, and a
# client may put its API key there (`?api-key=`, `?key=`): the proxy's calls stay out of
# the log.  Warnings and errors still show.  Every record the console prints has its
# secret and personal query values replaced (inspector/logs.py); daphne's own access log,
# which is not a logger, gets the same treatment from inspector/asgi.py.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact_queries": {"()": "inspector.logs.RedactQueryValues"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["redact_queries"],
            "formatter": "plain",
        }
    },
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # The root's level stays as the server set it (daphne's -v); only its handler changes.
    "root": {"handlers": ["console"]},
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}
