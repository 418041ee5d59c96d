from __future__ import annotations

import uuid

import pytest

from assets.models import AuditEvent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_real_worker_process_writes_to_the_test_database(world, celery_worker_process):
    from reflection.tasks import probe

    token = uuid.uuid4().hex
    host = probe.delay(world["a"].org.id, token).get(timeout=30)
    assert host
    assert AuditEvent.objects.filter(org=world["a"].org, action="worker.probe", object_id=token).count() == 1
    # redelivery of the same work does nothing twice
    probe.delay(world["a"].org.id, token).get(timeout=30)
    assert AuditEvent.objects.filter(action="worker.probe", object_id=token).count() == 1
