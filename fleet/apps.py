from django.apps import AppConfig


class FleetConfig(AppConfig):
    name = "fleet"
    verbose_name = "Worker fleet"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Celery's worker signals: registration, heartbeats and shutdown of this process
        # when it is a worker. Connecting costs nothing in the web processes, where the
        # signals are never sent.
        from . import worker

        worker.connect_signals()
