"""Celery tasks. Tasks take ids and call services; they are idempotent and acks_late."""

from __future__ import annotations

import logging
import socket

from celery import shared_task
from celery.signals import worker_ready

from nylon_project.celery import TRANSIENT_RETRY

log = logging.getLogger("nylon.reflection")


# Its caller waits for the answer (the only task whose result is read: CELERY_TASK_IGNORE_RESULT).
@shared_task(acks_late=True, name="reflection.probe", ignore_result=False)
def probe(org_id: int, token: str) -> str:
    """Round-trip check used by tests and operators: proves a worker reaches the database."""
    from assets import audit
    from assets.models import AuditEvent
    from teams.models import Organization

    org = Organization.objects.get(pk=org_id)
    if not AuditEvent.objects.filter(org=org, action="worker.probe", object_id=token).exists():
        audit.record(actor=None, org=org, action="worker.probe", object_type="worker", object_id=token,
                     detail={"host": socket.gethostname()})
    return socket.gethostname()


@shared_task(acks_late=True, name="reflection.llm_probe", ignore_result=True)
def llm_probe() -> dict:
    """Probe the configured LLM (on worker start and on beat); the state lands in Redis."""
    from . import llm

    return llm.probe()


@worker_ready.connect
def _probe_on_start(sender=None, **kwargs) -> None:
    try:
        llm_probe.delay()
    except Exception as exc:  # the worker starts even when the broker hiccups
        log.warning("llm probe not enqueued: %s", exc)


@shared_task(acks_late=True, name="reflection.abstract_session", ignore_result=True, **TRANSIENT_RETRY)
def abstract_session(session_id: int) -> dict:
    """Leaves → facts for an ended session. Idempotent: keyed by the session (see services)."""
    from . import services

    return services.abstract_session(session_id=session_id)


@shared_task(acks_late=True, name="reflection.reflect_session", ignore_result=True, **TRANSIENT_RETRY)
def reflect_session(session_id: int) -> dict:
    """Facts → 1-3 commonsense bridges once the owner is idle. Idempotent per session."""
    from . import services

    return services.reflect_session(session_id=session_id)


@shared_task(acks_late=True, name="reflection.detect_conflicts", ignore_result=True, **TRANSIENT_RETRY)
def detect_conflicts(org_id: int, node_ids: list[int], followup_id: int | None = None) -> int:
    """Contradictions between new nodes and their nearest neighbours of the same owner or sharing an
    audience with them (``conflicts._candidates_of``). Idempotent: one
    conflict per unordered node pair. With a ``memory.Followup`` id (every send since the outbox),
    that row decides: gone means done, and it is deleted once the check has run."""
    from . import conflicts

    if followup_id is not None:
        return conflicts.detect_followup(followup_id=followup_id)
    return conflicts.detect(org_id=org_id, node_ids=node_ids)


@shared_task(acks_late=True, name="reflection.tick", ignore_result=True)
def tick() -> dict:
    """Beat: end idle sessions, retry failed abstractions, start idle reflection."""
    from . import services

    return services.tick()
