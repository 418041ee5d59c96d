from django.apps import AppConfig


class AssetsConfig(AppConfig):
    name = "assets"
    default_auto_field = "django.db.models.BigAutoField"
