"""Celery app: Redis broker, tasks take ids and call services (HackSoft style)."""

from __future__ import annotations

import os

from celery import Celery
from django.db import InterfaceError, OperationalError

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

app = Celery("nylon")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# A database or broker outage (Postgres restart, failover, Redis restart) must not lose work: tasks
# that write retry with back-off (1, 2, 4 … 30 s, jittered) instead of failing for good. Safe
# because every task is idempotent (event ids, SessionWork, batches marked done last).
TRANSIENT_RETRY = {"autoretry_for": (OperationalError, InterfaceError, ConnectionError), "retry_backoff": 1,
                   "retry_backoff_max": 30, "retry_jitter": True, "max_retries": 20}
