"""Celery app: Redis broker, tasks take ids and call services (HackSoft style)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

app = Celery("nylon")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
