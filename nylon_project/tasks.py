"""Project-wide housekeeping tasks: they take no ids and call services."""

from __future__ import annotations

import logging
import math

from celery import shared_task

from .celery import TRANSIENT_RETRY

log = logging.getLogger("nylon.retention")


@shared_task(acks_late=True, name="nylon_project.retention", ignore_result=True, **TRANSIENT_RETRY)
def retention() -> dict:
    """Beat (daily): delete rows past their retention age (``nylon_project.retention``). A run that
    spends its time budget sends itself again, so a backlog drains in runs each shorter than the
    broker's visibility timeout. A table that failed fails the task (a transient database error
    retries with back-off) after the other tables ran."""
    from django.conf import settings

    from .retention import prune

    # Never past half the visibility timeout, whatever the setting: a task still running then is
    # handed to a second worker as well.
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    run = prune(budget_secs=min(settings.NYLON_RETENTION_MAX_SECS or math.inf, visibility / 2))
    if run.more and not run.failed:
        try:
            retention.apply_async()
        except Exception as exc:  # broker down: the next scheduled run goes on where this one stopped
            log.warning("retention: backlog left for the next scheduled run (could not queue a follow-up run: %s)",
                        exc)
    run.raise_for_errors()
    return run.as_dict()
