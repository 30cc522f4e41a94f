"""The Celery application. Configuration comes from Django settings (``CELERY_*``)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "atrex_site.settings.local")

app = Celery("atrex_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
