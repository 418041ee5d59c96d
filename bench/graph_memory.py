"""Memory of the engine graph at 1M nodes + 10M random undirected edges.

Compares against a scipy.sparse float64 CSR holding the same edges in both
directions (the obvious off-the-shelf baseline), built in the same run.

    .venv/bin/python bench/graph_memory.py [n_nodes] [n_edges]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory.engine import EdgeKind, Graph  # noqa: E402


def main() -> None:
    n_nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    n_edges = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
    rng = np.random.default_rng(42)
    src = rng.integers(0, n_nodes, n_edges, dtype=np.int64)
    dst = rng.integers(0, n_nodes, n_edges, dtype=np.int64)
    w = rng.random(n_edges, dtype=np.float32)
    kind = rng.integers(0, len(EdgeKind), n_edges).astype(np.uint8)

    t = time.perf_counter()
    g = Graph(n_nodes)
    g.add_edges(src, dst, w, kind)
    g.compact()
    build_s = time.perf_counter() - t
    mb = g.nbytes / 1e6

    t = time.perf_counter()
    loops = src == dst
    s2, d2, w2 = src[~loops], dst[~loops], w[~loops].astype(np.float64)
    base = sp.coo_matrix(
        (np.concatenate((w2, w2)), (np.concatenate((s2, d2)), np.concatenate((d2, s2)))),
        shape=(n_nodes, n_nodes),
    ).tocsr()
    base_s = time.perf_counter() - t
    base_bytes = base.data.nbytes + base.indices.nbytes + base.indptr.nbytes

    frontier = rng.integers(0, n_nodes, 64)
    t = time.perf_counter()
    for _ in range(100):
        g.neighbors(frontier)
    nb_us = (time.perf_counter() - t) / 100 * 1e6

    print(f"nodes={n_nodes:,} edges={n_edges:,} stored_entries={g.n_entries:,}")
    print(
        f"engine Graph : {mb:8.1f} MB  {g.nbytes / max(g.n_edges, 1):5.2f} B/edge  "
        f"{g.nbytes / n_nodes:6.2f} B/node  (indptr {g._indptr.dtype}, indices "
        f"{g._indices.dtype}, weights {g._weights.dtype}, kinds {g._kinds.dtype})  build {build_s:.1f}s"
    )
    per_entry = g._indices.itemsize + g._weights.itemsize + g._kinds.itemsize
    print(
        f"  split: {g._indptr.nbytes / n_nodes:.0f} B per node (indptr) + {per_entry} B per stored entry "
        f"= {2 * per_entry} B per undirected edge (stored both ways)"
    )
    print(
        f"scipy CSR f64: {base_bytes / 1e6:8.1f} MB  {base_bytes / max(base.nnz // 2, 1):5.2f} B/edge  "
        f"{base_bytes / n_nodes:6.2f} B/node  (no edge kinds)  build {base_s:.1f}s"
    )
    print(
        f"ratio engine/scipy: {g.nbytes / base_bytes:.2f}; budget 150 MB -> {'OK' if mb <= 150 else 'OVER'}"
    )
    print(f"neighbors(64-node frontier): {nb_us:.0f} us")


if __name__ == "__main__":
    main()
