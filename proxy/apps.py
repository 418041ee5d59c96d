from django.apps import AppConfig


class ProxyConfig(AppConfig):
    name = "proxy"
    verbose_name = "Memory proxy"
    default_auto_field = "django.db.models.BigAutoField"
