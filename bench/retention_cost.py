"""What a retention run (nylon_project/retention.py) costs on a large audit trail, in a database of
its own (created, migrated and dropped here; the dev database is not touched):

  * bytes per audit row (heap + indexes), for sizing NYLON_AUDIT_RETENTION_DAYS;
  * the chunk query's plan on the real table (an index range, not a Seq Scan);
  * the run: rows deleted per second, and the slowest chunk (how long one transaction holds its
    row locks), with an insert-only writer beside it measuring its own insert latency.

    .venv/bin/python bench/retention_cost.py [--old 1000000] [--young 200000] [--chunk 5000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection, connections  # noqa: E402
from django.utils import timezone  # noqa: E402

# A row as the API writes them: a read of a memory by an agent, with a small detail.
INSERT = """INSERT INTO assets_auditevent (org_id, actor_kind, actor_id, actor_label, action, object_type,
    object_id, outcome, reason, detail, request_id, created_at)
SELECT %(org)s, 'agent', 7, 'alpha-bot', 'memory.read', 'node', (g %% 100000)::text, 'allowed', '',
       jsonb_build_object('via', 'context', 'hits', g %% 17), md5(g::text), %(start)s + g * %(step)s
FROM generate_series(1, %(n)s) g"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", type=int, default=1_000_000)
    ap.add_argument("--young", type=int, default=200_000)
    ap.add_argument("--chunk", type=int, default=5000)
    args = ap.parse_args()

    connection.settings_dict.setdefault("TEST", {})["NAME"] = f"bench_retention_{os.getpid()}"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        run(args)
    finally:
        connections.close_all()
        connection.creation.destroy_test_db(old_name, verbosity=0)


def run(args) -> None:
    from django.contrib.auth import get_user_model

    from nylon_project import retention
    from teams import services

    owner = get_user_model().objects.create_user("bench-owner", "b@example.com", "pw-bench-123")
    org = services.organization_create(name="Bench", slug="bench", owner=owner)
    now = timezone.now()
    days = settings.NYLON_AUDIT_RETENTION_DAYS
    t = time.perf_counter()
    with connection.cursor() as cur:
        # old: spread over the 30 days before the cutoff; young: over the last 30 days
        cur.execute(INSERT, {"org": org.id, "n": args.old, "start": now - timedelta(days=days + 30),
                             "step": timedelta(days=30) / args.old})
        cur.execute(INSERT, {"org": org.id, "n": args.young, "start": now - timedelta(days=30),
                             "step": timedelta(days=29) / args.young})
        cur.execute("VACUUM ANALYZE assets_auditevent")
        cur.execute("SELECT pg_relation_size('assets_auditevent'), pg_indexes_size('assets_auditevent'), "
                    "count(*) FROM assets_auditevent")
        heap, idx, rows = cur.fetchone()
    print(f"loaded {rows:,} audit rows in {time.perf_counter() - t:.1f}s: "
          f"{heap / rows:.0f} B heap + {idx / rows:.0f} B indexes per row")

    policy = next(p for p in retention.policies() if p.table == "audit")
    sql, params = policy.rows(now).order_by(*policy.order).values("pk")[:args.chunk].query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        print("chunk query plan:\n  " + "\n  ".join(r[0] for r in cur.fetchall()))

    # Chunk times, from the statements' own durations (CaptureQueriesContext would keep every SQL).
    chunk_secs: list[float] = []
    def timer(execute, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            if sql.startswith("DELETE"):
                chunk_secs.append(time.perf_counter() - start)

    stop = threading.Event()

    def writer(writes: list[float]) -> None:
        from assets.models import AuditEvent

        while not stop.is_set():
            s = time.perf_counter()
            AuditEvent.objects.create(org_id=org.id, actor_kind="agent", actor_label="w", action="memory.read",
                                      object_type="node")
            writes.append(time.perf_counter() - s)
            time.sleep(0.01)
        connections.close_all()

    def report(label: str, writes: list[float]) -> None:
        writes.sort()
        print(f"{label}: {len(writes)} inserts, median {statistics.median(writes) * 1000:.1f} ms, "
              f"p99 {writes[int(len(writes) * 0.99)] * 1000:.1f} ms, max {writes[-1] * 1000:.1f} ms")

    # The writer alone first, for comparison: the same machine, the same table.
    baseline: list[float] = []
    th = threading.Thread(target=writer, args=(baseline,))
    th.start()
    time.sleep(5)
    stop.set()
    th.join()
    stop.clear()
    writes: list[float] = []
    th = threading.Thread(target=writer, args=(writes,))
    th.start()
    t = time.perf_counter()
    with connection.execute_wrapper(timer):
        result = retention.prune(chunk=args.chunk)
    secs = time.perf_counter() - t
    stop.set()
    th.join()
    audit = next(x for x in result.tables if x.table == "audit")
    print(f"deleted {audit.deleted:,} rows in {secs:.1f}s ({audit.deleted / secs:,.0f} rows/s), "
          f"{len(chunk_secs)} chunks: median {statistics.median(chunk_secs) * 1000:.0f} ms, "
          f"max {max(chunk_secs) * 1000:.0f} ms")
    report("inserts alone (5 s)", baseline)
    report("inserts during the run", writes)
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM assets_auditevent")
        print(f"left: {cur.fetchone()[0]:,} rows (the young ones and the writer's)")


if __name__ == "__main__":
    main()
