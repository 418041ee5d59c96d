"""Celery tasks. Tasks take ids and call services; they are idempotent and acks_late."""

from __future__ import annotations

import socket

from celery import shared_task


@shared_task(acks_late=True, name="reflection.probe")
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
