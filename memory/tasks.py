"""Memory background tasks: they take ids and call services."""

from __future__ import annotations

from celery import shared_task

from nylon_project.celery import TRANSIENT_RETRY


# Results are kept only when the sender asks (``apply_async(..., ignore_result=False)``): the beat sends
# reembed_missing, and a kept result made each send subscribe to it first (CELERY_TASK_IGNORE_RESULT).
@shared_task(acks_late=True, name="memory.warm_cache")
def warm_cache(org_id: int) -> dict:
    """Build (or catch up) the engine cache of the worker process that runs it; returns its stats.

    It warms that process only: web processes build their own index on first use (or in the
    background while Postgres answers), and a worker child is replaced after its task once over
    NYLON_WORKER_MAX_MEMORY_KB, index included. Tests use it to prove that a worker process sees
    writes committed through the web process."""
    from .cache import get_cache

    index = get_cache().get(org_id)
    return {**index.stats(), "watermark": int(index.watermark)}


@shared_task(acks_late=True, name="memory.reembed_missing", **TRANSIENT_RETRY)
def reembed_missing(org_id: int | None = None, batch: int = 256) -> int:
    """Embed nodes written while the embedder was down. Idempotent: only rows still missing."""
    from .services import reembed_missing as run

    return run(org_id=org_id, batch=batch)


@shared_task(acks_late=True, name="memory.enrich_batch", ignore_result=True, **TRANSIENT_RETRY)
def enrich_batch(batch_id: int) -> dict:
    """The work a bulk ingest deferred (vectors, entity/similarity edges, conflict checks).
    Idempotent: missing vectors only, unique edges, the batch marked done last."""
    from .services import enrich_batch as run

    return run(batch_id=batch_id)


@shared_task(acks_late=True, name="memory.ingest_sweep", ignore_result=True)
def ingest_sweep() -> int:
    """Beat: re-enqueue bulk batches whose deferred work is not done."""
    from django.conf import settings

    from .services import enqueue_pending_batches

    return enqueue_pending_batches(retry_after_secs=settings.NYLON_INGEST_RETRY_SECS)


@shared_task(acks_late=True, name="memory.followup_sweep", ignore_result=True)
def followup_sweep() -> int:
    """Beat: re-send post-commit follow-ups (conflict checks) still pending after the grace period."""
    from nylon_project.celery import FOLLOWUP_GRACE_SECS

    from .services import enqueue_pending_followups

    return enqueue_pending_followups(grace_secs=FOLLOWUP_GRACE_SECS)


@shared_task(acks_late=True, name="memory.flush_recalls", ignore_result=True, **TRANSIENT_RETRY)
def flush_recalls() -> dict:
    """Beat: add buffered recalls to their nodes' frequency silk (``RecallMark``)."""
    from dataclasses import asdict

    from .services import flush_recalls as run

    return asdict(run())
