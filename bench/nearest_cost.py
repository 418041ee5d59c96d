"""What the owner-filtered nearest-node query (memory/nearest.py) costs a write, beside the plain
HNSW query it replaced, for owners of growing size, in one run.

An owner of the dev database gets N nodes (clustered random unit vectors; other tenants'
rows in the table stay), then each probe vector runs:
  * plain: ``... WHERE org AND owner ORDER BY embedding <=> q LIMIT 3`` (what similar-edge
    linking ran before; with iterative scans on, as every connection now has them);
  * nearest: ``nearest_sql`` (exact over the owner's RECENT_WINDOW most recent rows + that scan);
  * exact: ``SET enable_indexscan = off``, the true answer, for recall.
Single probes (one weave's turn) and a LATERAL batch of 64 (a bulk batch). Medians of interleaved
repetitions; recall@3 of both against exact.

    .venv/bin/python bench/nearest_cost.py [--sizes 1000,10000,40000] [--probes 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

import _devdb  # noqa: E402  (bench/: Django set up, the dev database migrated)

_devdb.setup()

import numpy as np  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from memory.models import Node  # noqa: E402
from memory.nearest import RECENT_WINDOW, nearest_sql, vector_literal  # noqa: E402
from teams import services as team_services  # noqa: E402
from teams.models import Agent, Organization  # noqa: E402

DIM = 384
ORG = "bench-nearest"
WHERE = "m.org_id = %(org)s AND m.owner_agent_id = %(owner)s AND m.deleted_at IS NULL AND m.embedding IS NOT NULL"
PLAIN = f"""SELECT m.id, 1 - (m.embedding <=> %(q)s::vector) FROM memory_node m WHERE {WHERE}
            ORDER BY m.embedding <=> %(q)s::vector LIMIT 3"""
NEAREST = nearest_sql(where=WHERE, query="%(q)s::vector", limit="3")


def clustered(rng: np.random.Generator, n: int, centres: np.ndarray) -> np.ndarray:
    x = centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.06, size=(n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def load(org: Organization, agent: Agent, vectors: np.ndarray) -> None:
    now = timezone.now()
    Node.objects.bulk_create((Node(org=org, owner_agent=agent, text=f"n{i}", occurred_at=now, tension_updated_at=now,
                                   embedding=v, embedded=True) for i, v in enumerate(vectors)), batch_size=2000)


def timed(sql: str, params: dict) -> tuple[float, list[int]]:
    with connection.cursor() as cur:
        t = time.perf_counter()
        cur.execute(sql, params)
        rows = cur.fetchall()
        return (time.perf_counter() - t) * 1000, [r[0] for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,40000")
    ap.add_argument("--probes", type=int, default=50)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(200, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM memory_node")
        others = cur.fetchone()[0]
    print(f"memory_node holds {others:,} rows before the run; RECENT_WINDOW {RECENT_WINDOW:,}")
    print(f"{'owner nodes':>11} | {'single probe p50 ms: plain / nearest / exact':>44} | "
          f"{'batch of 64 ms: plain / nearest':>32} | recall@3 plain / nearest")
    for size in (int(s) for s in args.sizes.split(",")):
        slug = f"{ORG}-{uuid.uuid4().hex[:6]}"
        owner = get_user_model().objects.create_user(f"{slug}-o", f"{slug}@example.com", None)
        org = team_services.organization_create(name=slug, slug=slug, owner=owner)
        agent = Agent.objects.create(org=org, name=f"{slug}-bot")
        try:
            load(org, agent, clustered(rng, size, centres))
            with connection.cursor() as cur:
                cur.execute("ANALYZE memory_node")
            probes = clustered(rng, args.probes, centres)
            t_plain, t_near, t_exact, r_plain, r_near = [], [], [], [], []
            for q in probes:
                p = {"org": org.id, "owner": agent.id, "q": vector_literal(q)}
                a, plain = timed(PLAIN, p)
                b, near = timed(NEAREST, p)
                with connection.cursor() as cur:
                    cur.execute("SET enable_indexscan = off")
                c, exact = timed(PLAIN, p)
                with connection.cursor() as cur:
                    cur.execute("RESET enable_indexscan")
                t_plain.append(a), t_near.append(b), t_exact.append(c)
                r_plain.append(len(set(plain) & set(exact)) / max(1, len(exact)))
                r_near.append(len(set(near) & set(exact)) / max(1, len(exact)))
            with connection.cursor() as cur:
                cur.execute("SELECT id FROM memory_node WHERE org_id = %s ORDER BY id DESC LIMIT 64", [org.id])
                batch = [r[0] for r in cur.fetchall()]
            lateral = ("SELECT n.id, c.id FROM memory_node n, LATERAL ({inner}) c WHERE n.id = ANY(%(ids)s)")
            plain_b = lateral.format(inner=PLAIN.replace("%(q)s::vector", "n.embedding"))
            near_b = lateral.format(inner=nearest_sql(where=WHERE + " AND m.id <> n.id", query="n.embedding",
                                                      limit="3"))
            bp, bn = [], []
            for _ in range(3):
                p = {"org": org.id, "owner": agent.id, "ids": batch}
                bp.append(timed(plain_b, p)[0])
                bn.append(timed(near_b, p)[0])
            print(f"{size:>11,} | {statistics.median(t_plain):>14.2f} / {statistics.median(t_near):>7.2f} / "
                  f"{statistics.median(t_exact):>7.2f}           | {statistics.median(bp):>14.1f} / "
                  f"{statistics.median(bn):>8.1f}       | {np.mean(r_plain):.3f} / {np.mean(r_near):.3f}")
        finally:
            with connection.cursor() as cur:
                cur.execute("DELETE FROM memory_node WHERE org_id = %s", [org.id])
            org.delete()
            owner.delete()


if __name__ == "__main__":
    main()
