"""What a recall writes: the buffered recall marks (memory.RecallMark, folded in by the beat) beside
the node-row UPDATE every recall used to make, on the same org in the same run.

    .venv/bin/python bench/recall_write.py                 # 20k nodes with vectors, 3 rounds x 200 recalls of 10
    .venv/bin/python bench/recall_write.py --nodes 100000 --rounds 5

Per recall of k=10 nodes: wall time (median, p95) and WAL bytes written, then the flush that
folds all of the round's marks in, amortised per recall. The org is made for the run (random
vectors, so the HNSW index is real) and deleted after it unless --keep."""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

import _devdb  # noqa: E402  (bench/: Django set up, the dev database migrated)

_devdb.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402

from memory.services import flush_recalls, record_recall  # noqa: E402
from teams.models import Organization  # noqa: E402

SLUG = "recall-bench"

OLD_UPDATE = """UPDATE memory_node SET mentions = mentions + 1, last_recalled_at = now(), tension_updated_at = now()
                WHERE id = ANY(%s)"""


def _make_org(n: int) -> tuple[Organization, list[int]]:
    Organization.objects.filter(slug=SLUG).delete()
    org = Organization.objects.create(name="Recall bench", slug=SLUG)
    user, _ = get_user_model().objects.get_or_create(username="recall-bench")
    t = time.perf_counter()
    with connection.cursor() as cur:
        for start in range(0, n, 5_000):
            cur.execute(
                """INSERT INTO memory_node (org_id, owner_user_id, visibility, kind, text, speaker, fact, entities,
                       tags, occurred_at, session_key, seq, time_refs, valence, intensity, mentions, source_kind,
                       event_id, source_node_ids, metadata, confidence, t0, lam, tension_updated_at, embedding,
                       embedded, created_at, updated_at)
                   SELECT %s, %s, 'org', 'leaf', 'Bench note ' || g || ' about the billing service and Postgres',
                          'ana', '', '{}', '{}', now(), 's' || (g / 20), g %% 20, '[]', 0, 0, 0, 'import', '', '{}',
                          '{}', 1, 1, 0.01, now(),
                          (SELECT array_agg(random() - 0.5)::vector FROM generate_series(1, 384) WHERE g > 0),
                          true, now(), now()
                   FROM generate_series(%s, %s) AS g""",
                [org.id, user.id, start + 1, min(n, start + 5_000)],
            )
        cur.execute("ANALYZE memory_node")
        cur.execute("SELECT id FROM memory_node WHERE org_id = %s", [org.id])
        ids = [r[0] for r in cur.fetchall()]
    print(f"org {SLUG}: {len(ids):,} nodes with vectors written in {time.perf_counter() - t:.1f} s")
    return org, ids


def _lsn() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint")
        return cur.fetchone()[0]


def _hot() -> tuple[int, int]:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_force_next_flush()")
        cur.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'memory_node'")
        return cur.fetchone()


def _one(fn, ids: list[int]) -> tuple[float, int]:
    w = _lsn()
    t = time.perf_counter()
    fn(ids)  # autocommit: each call is its own transaction, as in a request
    ms = (time.perf_counter() - t) * 1000
    return ms, _lsn() - w


def _old(ids: list[int]) -> None:
    with connection.cursor() as cur:
        cur.execute(OLD_UPDATE, [ids])


def _new(ids: list[int]) -> None:
    record_recall(node_ids=ids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--hot-set", type=int, default=500,
                    help="recalls draw from this many nodes (what a team keeps asking about)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    org, ids = _make_org(a.nodes)
    rng = random.Random(7)
    hot = rng.sample(ids, min(a.hot_set, len(ids)))
    flush_recalls()
    rows = []
    try:
        for r in range(a.rounds):
            picks = [rng.sample(hot, a.k) for _ in range(a.calls)]
            upd0, hot0 = _hot()
            old = [_one(_old, p) for p in picks]
            upd1, hot1 = _hot()
            new = [_one(_new, p) for p in picks]
            w = _lsn()
            t = time.perf_counter()
            out = flush_recalls()
            flush_ms, flush_wal = (time.perf_counter() - t) * 1000, _lsn() - w
            upd2, hot2 = _hot()
            rows.append({
                "old_ms": [m for m, _ in old], "old_wal": [b for _, b in old],
                "new_ms": [m for m, _ in new], "new_wal": [b for _, b in new],
                "flush_ms": flush_ms, "flush_wal": flush_wal, "flush_nodes": out.nodes, "marks": out.marks,
                "old_nonhot": (upd1 - upd0) - (hot1 - hot0), "old_upd": upd1 - upd0,
                "flush_nonhot": (upd2 - upd1) - (hot2 - hot1), "flush_upd": upd2 - upd1,
            })
            print(f"round {r + 1}: done")
    finally:
        if not a.keep:
            Organization.objects.filter(slug=SLUG).delete()

    def q(xs: list[float], p: float) -> float:
        return statistics.quantiles(xs, n=100)[int(p) - 1] if len(xs) > 1 else xs[0]

    print(f"\nper recall of {a.k} nodes ({a.calls} recalls per round, drawn from {len(hot)} nodes of {len(ids):,})")
    print(f"{'round':>5} | {'UPDATE p50/p95 ms':>18} | {'marks p50/p95 ms':>17} | {'UPDATE WAL B':>12} | "
          f"{'marks WAL B':>11} | {'flush ms (per recall)':>22} | {'flush WAL B per recall':>22} | "
          f"{'non-HOT row updates: UPDATE path / flush':>40}")
    for i, r in enumerate(rows, 1):
        print(f"{i:>5} | {statistics.median(r['old_ms']):8.2f} / {q(r['old_ms'], 95):6.2f} | "
              f"{statistics.median(r['new_ms']):7.2f} / {q(r['new_ms'], 95):6.2f} | "
              f"{statistics.median(r['old_wal']):12,.0f} | {statistics.median(r['new_wal']):11,.0f} | "
              f"{r['flush_ms']:9.1f} ({r['flush_ms'] / a.calls:6.3f}) | "
              f"{r['flush_wal'] / a.calls:22,.0f} | "
              f"{r['old_nonhot']:>6} of {r['old_upd']:<6} / {r['flush_nonhot']:>5} of {r['flush_upd']:<5} "
              f"({r['flush_nodes']} nodes, {r['marks']} marks)")
    med = statistics.median
    old_ms = med([med(r["old_ms"]) for r in rows])
    new_ms = med([med(r["new_ms"]) + r["flush_ms"] / a.calls for r in rows])
    old_wal = med([med(r["old_wal"]) for r in rows])
    new_wal = med([med(r["new_wal"]) + r["flush_wal"] / a.calls for r in rows])
    print(f"\nmedian over rounds, marks + flush amortised vs UPDATE: time {new_ms:.3f} / {old_ms:.3f} ms "
          f"= {new_ms / old_ms:.2f}x; WAL {new_wal:,.0f} / {old_wal:,.0f} B = {new_wal / old_wal:.2f}x")


if __name__ == "__main__":
    main()
