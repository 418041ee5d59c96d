"""Latency of resonate() on a synthetic tenant (default 100k nodes / 1M edges).

Query embedding is excluded (vectors are given). Prints build times, memory
and p50/p95 per depth.

    .venv/bin/python bench/resonate_bench.py [n_nodes] [n_edges] [dim]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.engine import (  # noqa: E402
    EdgeKind,
    NodeRecord,
    ResonateParams,
    Scope,
    TenantIndex,
    resonate,
)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    m = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    dim = int(sys.argv[3]) if len(sys.argv) > 3 else 384
    rng = np.random.default_rng(0)
    vocab = np.array([f"w{i}x" for i in range(30_000)])
    p = 1.0 / np.arange(1, vocab.size + 1) ** 1.1
    p /= p.sum()
    words = rng.choice(vocab.size, size=(n, 24), p=p)
    lengths = rng.integers(6, 24, n)
    cent = rng.normal(size=(500, dim)).astype(np.float32)
    vecs = cent[rng.integers(0, 500, n)] + rng.normal(size=(n, dim)).astype(np.float32)

    t = time.perf_counter()
    idx = TenantIndex(dim)
    recs = [
        NodeRecord(
            node_id=10_000 + i,
            text=" ".join(vocab[words[i, : lengths[i]]]),
            kind=int(rng.choice([0, 0, 0, 1, 2, 3, 4])),
            owner_key=int(rng.integers(1, 50)),
            team_id=int(rng.integers(0, 10)),
            scope=int(rng.choice([Scope.PRIVATE, Scope.TEAM, Scope.ORG, Scope.ORG])),
            lam=float(rng.uniform(0, 0.05)),
            last_updated=float(rng.uniform(0, 365)),
            mentions=int(rng.integers(0, 5)),
            vector=vecs[i],
        )
        for i in range(n)
    ]
    for i in range(0, n, 5000):
        idx.upsert_nodes(recs[i : i + 5000])
    t_nodes = time.perf_counter() - t
    t = time.perf_counter()
    idx.add_edges_local(
        rng.integers(0, n, m),
        rng.integers(0, n, m),
        rng.uniform(0.1, 1.0, m),
        rng.integers(0, len(EdgeKind), m),
    )
    t_edges = time.perf_counter() - t
    allowed = idx.visibility_mask(owner_keys=[1], team_ids=[3])
    t = time.perf_counter()
    idx.vectors.search(vecs[0], 10, allowed)  # builds the HNSW lazily
    t_hnsw = time.perf_counter() - t
    print(f"n={n:,} edges={m:,} dim={dim} visible={int(allowed.sum()):,}")
    print(
        f"build: nodes {t_nodes:.1f}s  edges {t_edges:.1f}s  hnsw {t_hnsw:.1f}s  "
        f"memory {idx.nbytes() / 1e6:.0f} MB (graph {idx.graph.nbytes / 1e6:.1f} MB)"
    )

    t = time.perf_counter()
    for _ in range(50):
        idx.visibility_mask(owner_keys=[1], team_ids=[3])
    print(f"visibility_mask: {(time.perf_counter() - t) / 50 * 1e3:.2f} ms")

    queries = []
    for _ in range(200):
        qi = int(rng.integers(0, n))
        q_words = rng.choice(words[qi, : lengths[qi]], size=min(6, int(lengths[qi])), replace=False)
        queries.append((" ".join(vocab[q_words]), vecs[qi] + 0.3 * rng.normal(size=dim)))
    for depth in range(5):
        params = ResonateParams(depth=depth)
        times = []
        for text, qv in queries:
            t = time.perf_counter()
            r = resonate(idx, query_text=text, query_vec=qv, allowed=allowed, params=params, now_days=400.0)
            times.append(time.perf_counter() - t)
        times.sort()
        print(
            f"depth {depth}: p50 {times[len(times) // 2] * 1e3:.2f} ms  "
            f"p95 {times[int(len(times) * 0.95)] * 1e3:.2f} ms  activated~{r.activated_count}"
        )


if __name__ == "__main__":
    main()
