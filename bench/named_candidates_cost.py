"""What the named conflict candidates (``reflection.conflicts._named_terms``: beside each budget's
4 nearest, up to ``NAMED_CANDIDATES`` rows of the same window naming the new node's entities) add
to a conflict check, against the check without them, in one run.

An org of the dev database gets a writer with N team nodes and then a teammate with N/4, other
values of the writer's newest datasets (clustered random unit vectors; texts "The retention period for dataset D<i> of Redis is <d> days.", entities
``["D<i>", "Redis"]``, so every row of a window matches "Redis": the named part's worst case, a
ts_rank and sort of the whole window). Then, interleaved per repetition, for the writer's newest
nodes, with the named terms switched off ("before": what the check ran until now) and on
("after"), for one node (a weave's turn) and a batch of 25 (one statement): ``_candidates_of``
alone ("candidates") and the whole ``detect`` ("check": the rules of the extra pairs too, and the
conflicts it stores, rolled back each time).
Also "rare": the checked nodes name only their own dataset, as in the audit's case. Per checked
node: medians of the two, the median of the paired differences (each "after" run right after its
"before", so a load that drifts cancels out) and the fastest runs; and the shared buffers the
batch's statement touches (EXPLAIN ANALYZE), which the machine's load does not change.

    .venv/bin/python bench/named_candidates_cost.py [--sizes 1000,10000,40000] [--reps 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

import _devdb  # noqa: E402  (bench/: Django set up, the dev database migrated)

_devdb.setup()

import numpy as np  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from memory.models import Node, Visibility  # noqa: E402
from memory.nearest import RECENT_WINDOW  # noqa: E402
from reflection import conflicts  # noqa: E402
from teams import services as team_services  # noqa: E402
from teams.models import Agent, Organization, Team  # noqa: E402

DIM = 384
ORG = "bench-named"


def clustered(rng: np.random.Generator, n: int, centres: np.ndarray) -> np.ndarray:
    x = centres[rng.integers(0, len(centres), n)] + rng.normal(scale=0.06, size=(n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def load(org: Organization, team: Team, agent: Agent, vectors: np.ndarray, days: int, first: int = 0) -> None:
    now = timezone.now()
    Node.objects.bulk_create((
        Node(org=org, owner_agent=agent, team=team, visibility=Visibility.TEAM, speaker=agent.name,
             text=f"The retention period for dataset D{i} of Redis is {days} days.", entities=[f"D{i}", "Redis"],
             occurred_at=now, tension_updated_at=now, embedding=v, embedded=True)
        for i, v in enumerate(vectors, start=first)), batch_size=2000)


@contextmanager
def named_terms(on: bool):
    """The check as it is (on) or as it was before the named candidates (off: no node names any)."""
    original = conflicts._named_terms
    if not on:
        conflicts._named_terms = lambda node: None
    try:
        yield
    finally:
        conflicts._named_terms = original


def timed(nodes: list[Node], on: bool, check: bool) -> tuple[float, int]:
    """ms per node of the candidates alone, or of the whole check (``detect``: candidates, rules,
    conflicts stored), rolled back so that every repetition finds the same; and conflicts found."""
    with named_terms(on), transaction.atomic():
        t = time.perf_counter()
        found = (conflicts.detect(org_id=nodes[0].org_id, node_ids=[n.id for n in nodes]) if check
                 else conflicts._candidates_of(nodes) and 0)
        ms = (time.perf_counter() - t) * 1000 / len(nodes)
        transaction.set_rollback(True)
    return ms, found


def buffers(nodes: list[Node], on: bool, floor: int) -> float:
    """Shared buffers the batch's one statement touches, per node (EXPLAIN ANALYZE, BUFFERS): the
    work done, whatever the machine's load."""
    with named_terms(on), transaction.atomic(), connection.cursor() as cur, conflicts._index_scans_only(cur):
        selects, params = [], {"org": nodes[0].org_id, "floor": floor, "limit": 2 * conflicts.CANDIDATES,
                               "named": 2 * conflicts.NAMED_CANDIDATES}
        for i, node in enumerate(nodes):
            sql, p = conflicts._probes(node, i)
            selects += sql
            params.update(p)
        cur.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + "\nUNION ALL\n".join(f"({q})" for q in selects), params)
        plan = cur.fetchone()[0][0]["Plan"]
        return (plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]) / len(nodes)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,40000")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(200, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM memory_node")
        others = cur.fetchone()[0]
    print(f"memory_node holds {others:,} rows before the run; RECENT_WINDOW {RECENT_WINDOW:,}, "
          f"shared window {conflicts.SHARED_WINDOW_ROWS:,}; ms per checked node over {args.reps} interleaved "
          "repetitions: p50 before / after, p50 of the paired differences, min before / after")
    print(f"{'writer nodes':>12} | {'case':>6} | {'':>10} | {'one node':>38} | {'batch of 25':>38} | "
          "buffers per node | candidates per node")
    for size in (int(s) for s in args.sizes.split(",")):
        slug = f"{ORG}-{uuid.uuid4().hex[:6]}"
        owner = get_user_model().objects.create_user(f"{slug}-o", f"{slug}@example.com", None)
        org = team_services.organization_create(name=slug, slug=slug, owner=owner)
        team = Team.objects.create(org=org, name=f"{slug} core", slug="core")
        writer = Agent.objects.create(org=org, name=f"{slug}-writer", team=team)
        mate = Agent.objects.create(org=org, name=f"{slug}-mate", team=team)
        try:
            # the teammate's values of the writer's newest datasets, one named match each (written
            # last: the org's newest rows, within the shared window, SHARED_WINDOW_ROWS)
            load(org, team, writer, clustered(rng, size, centres), 90)
            load(org, team, mate, clustered(rng, size // 4, centres), 30, first=size - size // 4)
            with connection.cursor() as cur:
                cur.execute("ANALYZE memory_node")
                floor = conflicts._recent_floor(cur, org.id)
            newest = list(Node.objects.filter(org=org, owner_agent=writer).order_by("-id")[:26])
            for case in ("common", "rare"):
                if case == "rare":  # the first name only, every row's: its own dataset's
                    with connection.cursor() as cur:
                        cur.execute("UPDATE memory_node SET entities = entities[1:1] WHERE org_id = %s", [org.id])
                        cur.execute("ANALYZE memory_node")
                    for n in newest:
                        n.entities = n.entities[:1]
                one, batch = newest[:1], newest[1:26]
                timed(batch, True, True), timed(batch, False, True)  # warm: plans, buffers
                cols, found = [], []
                for check in (False, True):
                    for nodes in (one, batch):
                        before, after = [], []
                        for _ in range(args.reps):
                            before.append(timed(nodes, False, check))
                            after.append(timed(nodes, True, check))
                        b, a = [ms for ms, _ in before], [ms for ms, _ in after]
                        diff = statistics.median(y - x for x, y in zip(b, a, strict=True))
                        cols.append(f"{statistics.median(b):6.2f} / {statistics.median(a):6.2f}, {diff:+6.2f}, "
                                    f"{min(b):5.2f} / {min(a):5.2f}")
                        if check and nodes is batch:
                            found = [before[0][1], after[0][1]]
                counts = []
                for on in (False, True):
                    with named_terms(on):
                        counts.append(statistics.mean(len(v) for v in conflicts._candidates_of(batch).values()))
                bufs = [buffers(batch, on, floor) for on in (False, True)]
                print(f"{size:>12,} | {case:>6} | candidates | {cols[0]:>38} | {cols[1]:>38} | "
                      f"{bufs[0]:6.0f} / {bufs[1]:6.0f} | {counts[0]:4.1f} / {counts[1]:4.1f}", flush=True)
                print(f"{'':>12} | {'':>6} | check      | {cols[2]:>38} | {cols[3]:>38} | "
                      f"conflicts found in the batch: {found[0]} / {found[1]}", flush=True)
        finally:
            with connection.cursor() as cur:
                cur.execute("DELETE FROM memory_node WHERE org_id = %s", [org.id])
            org.delete()
            owner.delete()


if __name__ == "__main__":
    main()
