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

# Post-commit follow-ups (memory.Followup rows: conflict checks a write still owes) are re-sent by
# the beat once this old. Longer than a healthy queue's delay, so the sweep re-sends only what was
# lost (broker down at commit) or keeps failing, not work about to run anyway.
FOLLOWUP_GRACE_SECS = float(os.environ.get("NYLON_FOLLOWUP_GRACE_SECS", 120))
FOLLOWUP_SWEEP_SECS = float(os.environ.get("NYLON_FOLLOWUP_SWEEP_SECS", 60))


@app.on_after_configure.connect
def _followup_beat(sender, **kwargs) -> None:
    sender.add_periodic_task(FOLLOWUP_SWEEP_SECS, sender.signature("memory.followup_sweep"), name="followup-sweep")
