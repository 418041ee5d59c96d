"""Recalls are buffered as marks and folded into the nodes by the beat: a read no longer rewrites
the node rows it returns (each rewrite was a non-HOT update adding entries to every index, the
HNSW graph included, and a catch-up for every process's cache), and counts are not lost or doubled."""

from __future__ import annotations

import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from memory import tasks
from memory.cache import get_cache
from memory.models import Node, RecallMark
from memory.services import flush_recalls, record_recall
from nylon_project import health

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = [
    {"speaker": "Ben", "text": "My cat is called Miso.", "occurred_at": "2024-01-05T10:00:00Z"},
    {"speaker": "Ana", "text": "We moved the billing service to Postgres 16.", "occurred_at": "2024-01-05T10:01:00Z"},
    {"speaker": "Ben", "text": "Lunch is at noon on Fridays.", "occurred_at": "2024-01-05T10:02:00Z"},
]


def _weave(client) -> list[int]:
    r = client.post("/api/v1/memories/weave-session", {"session_key": "s-recall", "turns": TURNS, "visibility": "org"},
                    format="json")
    assert r.status_code == 201, r.content
    return r.json()["node_ids"]


def _row(node_id: int) -> tuple:
    with connection.cursor() as cur:
        cur.execute("SELECT txid::text, mentions, last_recalled_at, tension_updated_at FROM memory_node WHERE id = %s",
                    [node_id])
        return cur.fetchone()


def test_a_recall_does_not_rewrite_the_node_rows_it_returns(world, client_for):
    c = client_for(world["a"].key)
    ids = _weave(c)
    before = {i: _row(i) for i in ids}
    for _ in range(3):
        r = c.post("/api/v1/memories/resonate", {"query": "What is Ben's cat called?", "k": 3}, format="json")
        assert r.status_code == 200 and r.json()["hits"], r.content
    recalled = {h["node_id"] for h in r.json()["hits"]}
    assert ids[0] in recalled
    # Same row version (txid is stamped by the update trigger): no index entries, no cache catch-up.
    assert {i: _row(i) for i in ids} == before
    assert RecallMark.objects.filter(node_id=ids[0]).count() == 3


def test_the_flush_adds_every_recall_once_and_moves_the_clocks(world, client_for):
    ids = _weave(client_for(world["a"].key))
    cat, pg, lunch = ids
    record_recall(node_ids=[cat, pg])
    record_recall(node_ids=[cat, cat])  # named twice in one call: one recall
    record_recall(node_ids=[cat])
    txid_before = _row(cat)[0]
    out = flush_recalls()
    assert (out.marks, out.nodes, out.skipped) == (4, 2, False)
    n_cat, n_pg, n_lunch = (Node.objects.get(id=i) for i in ids)
    assert (n_cat.mentions, n_pg.mentions, n_lunch.mentions) == (3, 1, 0)
    assert not RecallMark.objects.exists()
    assert n_cat.last_recalled_at is not None and n_lunch.last_recalled_at is None
    assert n_cat.tension_updated_at >= n_cat.last_recalled_at
    assert _row(cat)[0] != txid_before  # one new row version for three recalls
    assert flush_recalls().marks == 0  # nothing counted twice
    assert Node.objects.get(id=cat).mentions == 3


def test_the_clocks_go_to_the_latest_recall_and_never_back(world, client_for):
    cat = _weave(client_for(world["a"].key))[0]
    now = timezone.now()
    RecallMark.objects.bulk_create([RecallMark(node_id=cat, at=now - timedelta(hours=2)),
                                    RecallMark(node_id=cat, at=now - timedelta(hours=1))])
    flush_recalls()
    n = Node.objects.get(id=cat)
    assert n.last_recalled_at == now - timedelta(hours=1) and n.mentions == 2
    # A late mark older than what the node already holds leaves its clocks where they are.
    tension_at = n.tension_updated_at
    RecallMark.objects.create(node_id=cat, at=now - timedelta(days=3))
    flush_recalls()
    n = Node.objects.get(id=cat)
    assert n.mentions == 3 and n.last_recalled_at == now - timedelta(hours=1)
    assert n.tension_updated_at == tension_at


def test_a_backlog_is_flushed_in_chunks_and_marks_of_gone_nodes_are_dropped(world, client_for):
    ids = _weave(client_for(world["a"].key))
    for _ in range(3):
        record_recall(node_ids=ids)
    RecallMark.objects.create(node_id=10**12, at=timezone.now())  # a node deleted since its recall
    out = flush_recalls(chunk=4)
    assert (out.marks, out.nodes) == (10, 3 + 3 + 1)  # chunks of 4, 4, 2 marks; a node per chunk it appears in
    assert not RecallMark.objects.exists()
    assert sorted(Node.objects.filter(id__in=ids).values_list("mentions", flat=True)) == [3, 3, 3]


def test_one_flush_at_a_time(world, client_for):
    cat = _weave(client_for(world["a"].key))[0]
    record_recall(node_ids=[cat])
    from memory.services import RECALL_FLUSH_LOCK

    dsn = connection.get_connection_params()
    with psycopg.connect(**{k: v for k, v in dsn.items() if k != "cursor_factory"}, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [RECALL_FLUSH_LOCK])
        out = flush_recalls()
        assert out.skipped and out.marks == 0
        assert RecallMark.objects.count() == 1
        # released here: a closed connection's locks go only when its backend has exited, which
        # on a loaded machine can be after the next line's try
        other.execute("SELECT pg_advisory_unlock(%s)", [RECALL_FLUSH_LOCK])
    assert flush_recalls().marks == 1 and Node.objects.get(id=cat).mentions == 1


def test_the_cache_ranks_with_the_flushed_counts(world, client_for):
    org = world["a"].org
    cat = _weave(client_for(world["a"].key))[0]
    cache = get_cache()
    cache.drop(org.id)
    index = cache.get(org.id)
    assert index.col("mentions")[index.local_of(cat)] == 0
    record_recall(node_ids=[cat])
    record_recall(node_ids=[cat])
    assert cache.get(org.id).col("mentions")[index.local_of(cat)] == 0  # not yet flushed
    flush_recalls()
    caught_up = cache.get(org.id)
    assert caught_up is index  # caught up on the one updated row, not rebuilt
    assert caught_up.col("mentions")[caught_up.local_of(cat)] == 2


def test_healthz_degrades_while_recalls_wait_unflushed(world, client_for, settings):
    cat = _weave(client_for(world["a"].key))[0]
    ok = health._timed(health._recalls)
    assert ok["status"] == "ok" and ok["pending"] == 0
    record_recall(node_ids=[cat])
    fresh = health._timed(health._recalls)
    assert fresh["status"] == "ok" and fresh["pending"] == 1
    RecallMark.objects.create(node_id=cat, at=timezone.now() - timedelta(hours=1))  # the beat is not running
    late = health._timed(health._recalls)
    assert late["status"] == "degraded" and late["pending"] == 2 and late["oldest_secs"] >= 3600
    assert "NYLON_RECALL_FLUSH_SECS" in late["detail"]
    flush_recalls()
    assert health._timed(health._recalls)["status"] == "ok"


def test_healthz_reads_a_large_backlog_in_bounded_steps(world, client_for):
    # /healthz is public, and marks pile up exactly when the beat is down: the check counts up to a
    # cap and finds the oldest among the first marks by id, never reading the whole backlog.
    from memory.services import RECALL_BACKLOG_COUNT_CAP

    cat = _weave(client_for(world["a"].key))[0]
    with connection.cursor() as cur:
        cur.execute("INSERT INTO memory_recallmark (node_id, at) SELECT %s, now() - interval '2 hours' "
                    "+ g * interval '1 millisecond' FROM generate_series(1, %s) g", [cat, RECALL_BACKLOG_COUNT_CAP + 500])
    late = health._timed(health._recalls)
    assert late["pending"] == RECALL_BACKLOG_COUNT_CAP and late["pending_capped"] is True
    assert late["status"] == "degraded" and f"{RECALL_BACKLOG_COUNT_CAP}+ recalls waiting" in late["detail"]
    assert 7190 <= late["oldest_secs"] <= 7300
    flush_recalls()
    done = health._timed(health._recalls)
    assert done["status"] == "ok" and (done["pending"], done["pending_capped"]) == (0, False)


def test_the_beat_schedules_the_flush():
    from nylon_project.celery import RECALL_FLUSH_SECS, app

    app.loader.import_default_modules()
    entry = app.conf.beat_schedule["recall-flush"]
    assert entry["task"] == "memory.flush_recalls" and entry["schedule"] == RECALL_FLUSH_SECS


@pytest.mark.worker
def test_the_worker_runs_the_flush(world, client_for, celery_worker_process):
    ids = _weave(client_for(world["a"].key))
    record_recall(node_ids=ids[:2])
    tasks.flush_recalls.delay()
    deadline = time.monotonic() + 60
    while RecallMark.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not RecallMark.objects.exists()
    assert sorted(Node.objects.filter(id__in=ids).values_list("mentions", flat=True)) == [0, 1, 1]
