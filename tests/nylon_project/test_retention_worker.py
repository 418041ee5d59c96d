"""The beat's retention task, run by a real Celery worker on the test database: autodiscovered,
it prunes and logs its one line."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from assets.models import AuditEvent
from nylon_project.tasks import retention
from tests.reflection.test_worker_background import poll

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_the_worker_runs_the_retention_task(world, celery_worker_process):
    org = world["a"].org
    old = AuditEvent.objects.create(org=org, actor_kind="system", actor_label="system", action="test.old",
                                    object_type="test")
    young = AuditEvent.objects.create(org=org, actor_kind="system", actor_label="system", action="test.young",
                                      object_type="test")
    AuditEvent.objects.filter(pk=old.id).update(created_at=timezone.now() - timedelta(days=400))
    result = retention.delay()  # the beat's message: no arguments
    assert poll(lambda: not AuditEvent.objects.filter(pk=old.id).exists(), 60), "the worker never pruned"
    assert AuditEvent.objects.filter(pk=young.id).exists()
    log = Path(celery_worker_process["log"])
    assert poll(lambda: [ln for ln in log.read_text(errors="replace").splitlines()
                         if "retention: deleted" in ln and "audit=" in ln], 10)
    assert poll(lambda: [ln for ln in log.read_text(errors="replace").splitlines()
                         if f"nylon_project.retention[{result.id}] succeeded" in ln], 10)


def test_a_run_that_spends_its_budget_queues_the_next_one(world, settings, celery_worker_process):
    """The beat's run stops at its time budget with rows still due and sends itself again; the worker
    (its own settings: 5,000-row chunks) deletes the rest."""
    org = world["a"].org
    old = [AuditEvent.objects.create(org=org, actor_kind="system", actor_label="system", action="test.old",
                                     object_type="test").id for _ in range(7)]
    AuditEvent.objects.filter(pk__in=old).update(created_at=timezone.now() - timedelta(days=400))
    settings.NYLON_RETENTION_CHUNK = 2
    settings.NYLON_RETENTION_MAX_SECS = 1e-9
    outcome = retention.apply().get()  # here, in this process: one chunk, then the budget is spent
    assert outcome["more"] is True and outcome["tables"]["audit"] == {"keep": "365 days", "deleted": 2,
                                                                      "complete": False}
    assert poll(lambda: not AuditEvent.objects.filter(pk__in=old).exists(), 60), "no follow-up run deleted the rest"
    log = Path(celery_worker_process["log"])
    assert poll(lambda: [ln for ln in log.read_text(errors="replace").splitlines()
                         if "retention: deleted" in ln and "audit=5 " in ln], 10)
