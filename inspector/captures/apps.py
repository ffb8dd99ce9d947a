from django.apps import AppConfig


class CapturesConfig(AppConfig):
    name = "inspector.captures"
    label = "captures"
    verbose_name = "Captures"
    default_auto_field = "django.db.models.BigAutoField"
