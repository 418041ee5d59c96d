"""Celery app: Redis broker, tasks take ids and call services (HackSoft style)."""

from __future__ import annotations

import logging
import os

from celery import Celery, signals
from django.db import InterfaceError, OperationalError

from . import request_context
from .env import env_float

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

app = Celery("nylon")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# The worker's log lines name the API request that queued the work (``-`` for beat and housekeeping):
# Celery's own formats plus the id, which RequestIdFilter puts on every record of its handlers.
app.conf.worker_log_format = "[%(asctime)s: %(levelname)s/%(processName)s] [%(request_id)s] %(message)s"
app.conf.worker_task_log_format = ("[%(asctime)s: %(levelname)s/%(processName)s] [%(request_id)s] "
                                   "%(task_name)s[%(task_id)s]: %(message)s")

# A database or broker outage (Postgres restart, failover, Redis restart) must not lose work: tasks
# that write retry with back-off (1, 2, 4 … 30 s, jittered) instead of failing for good. Safe
# because every task is idempotent (event ids, SessionWork, batches marked done last).
TRANSIENT_RETRY = {"autoretry_for": (OperationalError, InterfaceError, ConnectionError), "retry_backoff": 1,
                   "retry_backoff_max": 30, "retry_jitter": True, "max_retries": 20}

# Post-commit follow-ups (memory.Followup rows: conflict checks a write still owes) are re-sent by
# the beat once this old. Longer than a healthy queue's delay, so the sweep re-sends only what was
# lost (broker down at commit) or keeps failing, not work about to run anyway.
FOLLOWUP_GRACE_SECS = env_float("NYLON_FOLLOWUP_GRACE_SECS", 120.0)
FOLLOWUP_SWEEP_SECS = env_float("NYLON_FOLLOWUP_SWEEP_SECS", 60.0)
# Recalls are buffered (memory.RecallMark) and added to their nodes' counts and decay clocks this
# often: what a recall changes in ranking shows up within it.
RECALL_FLUSH_SECS = env_float("NYLON_RECALL_FLUSH_SECS", 30.0)


@app.on_after_configure.connect
def _followup_beat(sender, **kwargs) -> None:
    sender.add_periodic_task(FOLLOWUP_SWEEP_SECS, sender.signature("memory.followup_sweep"), name="followup-sweep")
    sender.add_periodic_task(RECALL_FLUSH_SECS, sender.signature("memory.flush_recalls"), name="recall-flush")


@signals.beat_init.connect
def _one_beat_per_database(sender=None, **kwargs) -> None:
    # Blocks a second beat on the same database until the first one stops (nylon_project/beat_lock.py).
    from .beat_lock import hold_for_beat

    hold_for_beat()


@signals.before_task_publish.connect
def _carry_request_id(sender=None, headers=None, **kwargs) -> None:
    request_context.stamp_headers(headers)


@signals.task_prerun.connect
def _restore_request_id(sender=None, task_id=None, task=None, **kwargs) -> None:
    request_context.task_started(task_id, task)


@signals.task_postrun.connect
def _forget_request_id(sender=None, task_id=None, **kwargs) -> None:
    request_context.task_finished(task_id)


@signals.after_setup_logger.connect
def _pool_warnings_shown(**kwargs) -> None:
    # billiard reports a child replaced for passing --max-memory-per-child as a warning on the
    # "multiprocessing" logger, which Celery sets to ERROR: without this, recycling is invisible.
    logging.getLogger("multiprocessing").setLevel(logging.WARNING)


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def _request_id_on_records(logger=None, **kwargs) -> None:
    # On the handlers, not the logger: a logger's filters see only records logged on it, a
    # handler's see every record propagated to it.
    for handler in logger.handlers if logger is not None else ():
        if not any(isinstance(f, request_context.RequestIdFilter) for f in handler.filters):
            handler.addFilter(request_context.RequestIdFilter())
