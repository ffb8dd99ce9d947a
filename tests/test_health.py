import ast
import os
import subprocess
import sys

from django.conf import settings


def test_health_ok(client):
    response = client.get("/health")
    assert response.status_code == 200
    assert response.content == b"ok"


def test_channel_layer_backend_follows_redis_url():
    backend = settings.CHANNEL_LAYERS["default"]["BACKEND"]
    if os.environ.get("REDIS_URL"):
        assert backend == "inspector.live.layer.PromptPubSubChannelLayer"
    else:
        assert backend == "channels.layers.InMemoryChannelLayer"


def test_redis_is_the_pub_sub_layer_whatever_the_leg():
    """Read in a process of its own with REDIS_URL set: every send is to a group, which
    the list-based layer dropped once a viewer's channel held 100 messages (the pub/sub
    layer with its receiver woken on a first subscription: `inspector/live/layer.py`)."""
    code = "from inspector import settings; print(settings.CHANNEL_LAYERS['default'])"
    env = {**os.environ, "REDIS_URL": "redis://127.0.0.1:6379/9"}
    env.pop("DATABASE_URL", None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    layer = ast.literal_eval(out)
    assert layer["BACKEND"] == "inspector.live.layer.PromptPubSubChannelLayer"
    (host,) = layer["CONFIG"]["hosts"]
    assert host == {"address": "redis://127.0.0.1:6379/9", "socket_timeout": 30}


def test_database_engine_follows_database_url():
    engine = settings.DATABASES["default"]["ENGINE"]
    if os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        assert engine == "django.db.backends.postgresql"
    elif not os.environ.get("DATABASE_URL"):
        assert engine == "django.db.backends.sqlite3"
        assert str(settings.DATABASES["default"]["TEST"]["NAME"]).endswith("test_db.sqlite3")


def test_upload_limits_consistent():
    assert settings.INSPECTOR_MAX_UPLOAD_BYTES > 0
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE >= settings.INSPECTOR_MAX_UPLOAD_BYTES
