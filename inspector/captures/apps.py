from django.apps import AppConfig
from django.db.backends.signals import connection_created


class CapturesConfig(AppConfig):
    name = "inspector.captures"
    label = "captures"
    verbose_name = "Captures"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .writes import start_checkpoints

        connection_created.connect(start_checkpoints, dispatch_uid="wal-checkpoints")
