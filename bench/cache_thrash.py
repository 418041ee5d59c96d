"""The engine cache under memory pressure: N orgs, a cap that holds about half of them, the same
request sequence served with plain LRU (``NYLON_CACHE_ADMISSION=lru``) and with frequency admission
(the default), side by side in one run.

Data: N synthetic orgs of the same shape (``bench/resonate_scale.py``'s generator and binary COPY:
generated text, clustered random unit vectors, temporal/derived/bridge/similar/entity edges), each
its own org ``thrash-<i>``. The cap is the sum of the built sizes of the N/2 smallest, plus a tenth
of one (so no further org fits beside them); the stem memo is not counted here (``count_stem_cache``
off, for both policies alike), so the cap is the indexes' alone.

Requests: ``memory.selectors.resonate_for`` (the served read path: the cache's ``get_or_none``,
else the Postgres fallback), each with a stored query of its org and a precomputed query vector
(no embedding cost), in two mixes drawn once per seed and replayed for both policies: Zipf (org
rank r asked with weight 1/r^s, s = --zipf) and uniform. Each policy starts with an empty cache;
every org is queried once from Postgres first, so both find Postgres' buffers warm.

Prints per mix and policy: latency p50/p95/p99 and mean over all requests (build time included in
the request that paid it), the share served by the engine, builds, rebuilds, evictions and
admission refusals.

    .venv/bin/python bench/cache_thrash.py                     # 8 orgs x 2000 nodes, 400 requests per mix
    .venv/bin/python bench/cache_thrash.py --orgs 12 --nodes 3000 --requests 600
    .venv/bin/python bench/cache_thrash.py --reuse             # the orgs already loaded
    .venv/bin/python bench/cache_thrash.py --drop              # delete the orgs' rows
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the generator and loader

import numpy as np  # noqa: E402
import resonate_scale as rs  # noqa: E402  (sets Django up)

import memory.cache as cache_mod  # noqa: E402
from memory.cache import EngineCache  # noqa: E402
from memory.selectors import resonate_for  # noqa: E402
from teams.auth import actor_for_agent  # noqa: E402
from teams.models import Organization, Scope  # noqa: E402

SLUG = "thrash-{}"
POLICIES = ("lru", "frequency")


def load_orgs(args) -> list[tuple]:
    """(org, actor, queries) for each of the N orgs, loaded unless --reuse."""
    conn = rs.raw_connection()
    out = []
    for i in range(args.orgs):
        org, users, agents, teams = rs.ensure_org(SLUG.format(i))
        data = rs.generate(args.nodes, args.edges, args.seed + i)
        n, _ = rs.org_counts(conn, org.id)
        if not args.reuse or not n:
            if n:
                rs.drop_rows(conn, org)
            rs.load(conn, org, users, agents, teams, data)
        actor = actor_for_agent(agents[0], scopes=frozenset({Scope.READ}))
        out.append((org, actor, data["queries"][:200]))
    conn.close()
    return out


def drop_orgs(args) -> None:
    conn = rs.raw_connection()
    for org in Organization.objects.filter(slug__startswith="thrash-"):
        rs.drop_rows(conn, org)
    conn.close()


def mixes(n_orgs: int, requests: int, s: float, seed: int) -> dict[str, list[int]]:
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, n_orgs + 1) ** s
    order = rng.permutation(n_orgs)  # which org is hottest is not its load order
    zipf = order[rng.choice(n_orgs, size=requests, p=w / w.sum())]
    return {f"zipf s={s:g}": zipf.tolist(), "uniform": rng.integers(0, n_orgs, requests).tolist()}


def serve(cache: EngineCache, orgs: list[tuple], seq: list[int], seed: int) -> dict:
    rng = np.random.default_rng(seed)
    old, cache_mod._cache = cache_mod._cache, cache
    lat, engine = [], 0
    try:
        for i in seq:
            _, actor, queries = orgs[i]
            q, qv = queries[int(rng.integers(0, len(queries)))]
            t = time.perf_counter()
            out = resonate_for(actor=actor, query=q, query_vec=qv, k=10)
            lat.append((time.perf_counter() - t) * 1000)
            engine += out.served_by == "engine"
    finally:
        cache_mod._cache = old
    a = np.asarray(lat)
    return {"p50": np.percentile(a, 50), "p95": np.percentile(a, 95), "p99": np.percentile(a, 99),
            "mean": a.mean(), "total_s": a.sum() / 1000, "engine": engine / len(seq), **cache.stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--orgs", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--edges", type=int, default=12000)
    ap.add_argument("--requests", type=int, default=400, help="requests per mix (and per policy)")
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--reuse", action="store_true", help="use the orgs already loaded")
    ap.add_argument("--drop", action="store_true", help="delete the orgs' nodes and edges, then exit")
    args = ap.parse_args()
    logging.getLogger("nylon.cache").setLevel(logging.WARNING)  # a line per rebuild and refusal otherwise
    if args.drop:
        drop_orgs(args)
        return
    orgs = load_orgs(args)
    probe = EngineCache(max_bytes=1 << 40, count_stem_cache=False)
    sizes, build_ms = [], []
    for org, _, _ in orgs:
        t = time.perf_counter()
        sizes.append(probe.get(org.id).nbytes())
        build_ms.append((time.perf_counter() - t) * 1000)
    probe.drop()
    del probe
    half = sorted(sizes)[: args.orgs // 2]
    cap = sum(half) + min(sizes) // 10
    print(f"{args.orgs} orgs x {args.nodes} nodes (~{args.edges} edges): index {min(sizes) / 2**20:.1f}-"
          f"{max(sizes) / 2**20:.1f} MiB, build {statistics.median(build_ms):.0f} ms (median); cap "
          f"{cap / 2**20:.1f} MiB (the {len(half)} smallest); {args.requests} requests per mix")
    for _, actor, queries in orgs:  # Postgres' buffers warm for both policies alike
        q, qv = queries[0]
        resonate_for(actor=actor, query=q, query_vec=qv, k=10, force_sql=True)
    header = (f"{'mix':<12} {'policy':<10} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'total s':>8} "
              f"{'engine':>7} {'builds':>7} {'rebuilds':>8} {'evicted':>7} {'refused':>7}")
    print(header)
    for name, seq in mixes(args.orgs, args.requests, args.zipf, args.seed).items():
        for policy in POLICIES:
            r = serve(EngineCache(max_bytes=cap, admission=policy, count_stem_cache=False), orgs, seq, args.seed)
            print(f"{name:<12} {policy:<10} {r['p50']:8.1f} {r['p95']:8.1f} {r['p99']:8.1f} {r['mean']:8.1f} "
                  f"{r['total_s']:8.1f} {r['engine']:7.0%} {r['builds']:7d} {r['rebuilds']:8d} {r['evictions']:7d} "
                  f"{r['admission_refused']:7d}", flush=True)


if __name__ == "__main__":
    main()
