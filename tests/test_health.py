import os

from django.conf import settings


def test_health_ok(client):
    response = client.get("/health")
    assert response.status_code == 200
    assert response.content == b"ok"


def test_channel_layer_backend_follows_redis_url():
    backend = settings.CHANNEL_LAYERS["default"]["BACKEND"]
    if os.environ.get("REDIS_URL"):
        assert backend == "channels_redis.pubsub.RedisPubSubChannelLayer"
    else:
        assert backend == "channels.layers.InMemoryChannelLayer"


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
