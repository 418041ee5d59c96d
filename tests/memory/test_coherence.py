"""A write through this (web) process is visible to a resonate served by a Celery worker process,
and the worker's cache catches up incrementally rather than rebuilding."""

from __future__ import annotations

import pytest

from memory.cache import get_cache

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _weave(client, text, session="s"):
    r = client.post("/api/v1/memories/weave-session", {"session_key": session, "turns": [{"text": text}]},
                    format="json")
    assert r.status_code == 201, r.content
    return r.json()["node_ids"][0]


def test_worker_process_sees_web_writes(world, client_for, celery_worker_process):
    from memory.tasks import warm_cache

    org_id = world["a"].org.id
    c = client_for(world["a"].key)
    _weave(c, "The deploy window is Tuesday 14:00 UTC.")
    first = warm_cache.apply_async((org_id,), ignore_result=False).get(timeout=60)
    assert first["nodes"] == 1
    _weave(c, "Rollback plan: keep the previous image for 48 hours.")
    second = warm_cache.apply_async((org_id,), ignore_result=False).get(timeout=60)
    assert second["nodes"] == 2
    assert second["watermark"] >= first["watermark"]


def test_this_process_sees_writes_made_elsewhere(world, client_for):
    """A write committed by another connection (as another web process would) is picked up."""
    import psycopg
    from django.db import connection

    org_id = world["a"].org.id
    c = client_for(world["a"].key)
    node_id = _weave(c, "Alpha uses Postgres for the billing service.")
    index = get_cache().get(org_id)
    assert index.local_of(node_id) is not None
    params = connection.get_connection_params()
    with psycopg.connect(**{k: v for k, v in params.items() if k in ("dbname", "user", "host", "port",
                                                                         "password")}) as other:
        other.execute("UPDATE memory_node SET text = %s WHERE id = %s", ["Alpha moved billing to MySQL.", node_id])
    index = get_cache().get(org_id)
    assert index.texts[index.local_of(node_id)] == "Alpha moved billing to MySQL."


def test_an_open_transaction_elsewhere_neither_hides_rows_nor_forces_re_reads(world, client_for):
    """The sync position is a snapshot's xmax plus its in-progress transactions: a transaction left
    open by another connection (a bulk load, an idle session) does not make every probe report a
    change (an xmin watermark would, re-reading the same rows under the write lock on every query),
    and what that transaction writes is read once it commits."""
    import psycopg
    from django.db import connection

    from memory.cache import EngineCache

    org_id = world["a"].org.id
    c = client_for(world["a"].key)
    node_id = _weave(c, "The staging cluster runs in Frankfurt.")
    cache = EngineCache()
    cache.get(org_id)
    params = connection.get_connection_params()
    conninfo = {k: v for k, v in params.items() if k in ("dbname", "user", "host", "port", "password")}
    with psycopg.connect(**conninfo) as other:  # one transaction, open until the block ends
        other.execute("UPDATE memory_node SET text = %s WHERE id = %s", ["Staging moved to Dublin.", node_id])
        second = _weave(c, "The on-call rota changes on Mondays.")  # commits while `other` is open
        index = cache.get(org_id)
        assert index.local_of(second) is not None
        assert index.texts[index.local_of(node_id)] == "The staging cluster runs in Frankfurt."
        syncs = cache.stats["syncs"]
        for _ in range(3):  # nothing new is visible: the lock-free probe answers, no catch-up runs
            assert not cache._changed(org_id, index)
            cache.get(org_id)
        assert cache.stats["syncs"] == syncs
    index = cache.get(org_id)  # `other` committed: its update is read now
    assert index.texts[index.local_of(node_id)] == "Staging moved to Dublin."
    assert not cache._changed(org_id, index)
