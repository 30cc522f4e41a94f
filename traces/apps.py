from django.apps import AppConfig


class TracesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "traces"
    verbose_name = "Production traces and trace-driven weights"
