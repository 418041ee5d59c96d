"""/healthz's HTTP code says whether this node can serve requests, against real uvicorn processes:
with Redis (and so every worker) unreachable the API keeps answering, so /healthz answers 200
"degraded" naming them, and a load balancer keeps the node; with the database unreachable nothing
can be served and it answers 503 "down"."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import httpx
import pytest

from nylon_project.live import free_port, start_live_server

pytestmark = pytest.mark.django_db(transaction=True)


def test_redis_and_workers_down_is_200_degraded_while_the_api_serves(world):
    # Nothing listens on that port: Redis and, through it, the worker ping both fail for real.
    server = start_live_server(log_name="review7-noredis", REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    try:
        auth = {"Authorization": f"Bearer {world['a'].key}"}
        r = httpx.post(f"{server.url}/api/v1/memories/resonate", json={"query": "who reviews?", "reinforce": False},
                       headers=auth, timeout=60)
        assert r.status_code == 200, r.text  # the node serves: a balancer must keep it
        r = httpx.get(f"{server.url}/healthz", timeout=30)
        body = r.json()
        assert r.status_code == 200, body
        assert body["status"] == "degraded"
        assert {"redis", "worker"} <= set(body["degraded"]) and "database" not in body["degraded"]
        checks = body["checks"]
        assert checks["redis"]["status"] == "down" and checks["worker"]["status"] == "down"
        assert checks["database"]["status"] == "ok" and checks["redis"]["detail"]  # loopback: details kept
    finally:
        server.stop()


def test_no_worker_is_200_degraded(db):
    # Celery broadcasts its ping per Redis database: on one no worker consumes, none answers.
    url = urlsplit(os.environ["REDIS_URL"])._replace(path="/15").geturl()
    server = start_live_server(log_name="review7-noworker", REDIS_URL=url)
    try:
        r = httpx.get(f"{server.url}/healthz", timeout=30)
        body = r.json()
        assert r.status_code == 200, body
        assert body["status"] == "degraded" and "worker" in body["degraded"], body
        assert body["checks"]["redis"]["status"] == "ok" and body["checks"]["worker"]["status"] == "down"
    finally:
        server.stop()


def test_database_down_is_503_down(db):
    # No pool: the request fails at connect instead of waiting out the pool's timeout.
    server = start_live_server(log_name="review7-nodb", NYLON_DB_POOL="0",
                               DATABASE_URL=f"postgres://nylon@127.0.0.1:{free_port()}/nylon")
    try:
        r = httpx.get(f"{server.url}/healthz", timeout=30)
        body = r.json()
        assert r.status_code == 503, body
        assert body["status"] == "down" and "database" in body["degraded"]
        assert body["checks"]["database"]["status"] == "down"
    finally:
        server.stop()
