from django.apps import AppConfig


class InspectorConfig(AppConfig):
    name = "inspector"
    verbose_name = "Stream Inspector"
    default_auto_field = "django.db.models.BigAutoField"
