from django.apps import AppConfig


class FrontendConfig(AppConfig):
    name = "frontend"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals  # noqa: F401  (connects the logout receiver)
