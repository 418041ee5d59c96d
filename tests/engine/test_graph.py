from __future__ import annotations

import numpy as np
import pytest

from memory.engine import EdgeKind, Graph


def _dense(n: int, src, dst, w, kind) -> tuple[np.ndarray, np.ndarray]:
    """Reference: symmetric dense adjacency, max weight per pair, float16 storage."""
    W = np.zeros((n, n), dtype=np.float32)
    K = np.zeros((n, n), dtype=np.int64)
    wq = np.asarray(w, dtype=np.float32).astype(np.float16).astype(np.float32)
    for s, d, ww, kk in zip(src, dst, wq, kind, strict=True):
        if s == d:
            continue
        for a, b in ((s, d), (d, s)):
            if ww > W[a, b] or (ww == W[a, b] and kk > K[a, b]):
                W[a, b], K[a, b] = ww, kk
    return W, K


def _extend(all_s, all_d, all_w, all_k, s, d, w, k) -> None:
    all_s += s.tolist()
    all_d += d.tolist()
    all_w += w.tolist()
    all_k += k.tolist()


def _check(g: Graph, W: np.ndarray, K: np.ndarray) -> None:
    n = W.shape[0]
    frontier = np.arange(n)
    src_pos, nbr, w, k = g.neighbors(frontier)
    got_w = np.zeros_like(W)
    got_k = np.zeros_like(K)
    count = np.zeros((n, n), dtype=np.int64)
    np.add.at(count, (frontier[src_pos], nbr), 1)
    assert count.max() <= 1, "duplicate stored entry"
    got_w[frontier[src_pos], nbr] = w
    got_k[frontier[src_pos], nbr] = k
    np.testing.assert_array_equal(got_w, W)
    np.testing.assert_array_equal(got_k[W > 0], K[W > 0])
    # Arbitrary sub-frontier with repeats maps back through src_pos.
    f = np.array([3, 1, 3, n - 1])
    sp, nb, ww, _ = g.neighbors(f)
    for i, u in enumerate(f):
        assert sorted(nb[sp == i].tolist()) == np.flatnonzero(W[u]).tolist()
        np.testing.assert_array_equal(np.sort(ww[sp == i]), np.sort(W[u][W[u] > 0]))


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_dense_before_and_after_compaction(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 60
    g = Graph(n, min_delta=10_000)  # everything stays in the delta at first
    all_s, all_d, all_w, all_k = [], [], [], []
    for _ in range(5):
        m = 80
        s, d = rng.integers(0, n, m), rng.integers(0, n, m)
        w = rng.random(m).astype(np.float32)
        k = rng.integers(0, len(EdgeKind), m)
        g.add_edges(s, d, w, k)
        _extend(all_s, all_d, all_w, all_k, s, d, w, k)
        _check(g, *_dense(n, all_s, all_d, all_w, all_k))
    g.compact()
    assert len(g._d_src) == 0
    W, K = _dense(n, all_s, all_d, all_w, all_k)
    _check(g, W, K)
    # More edges on top of a CSR: in-place max updates + new delta entries.
    s, d = rng.integers(0, n, 200), rng.integers(0, n, 200)
    w = rng.random(200).astype(np.float32)
    k = rng.integers(0, 9, 200)
    g.add_edges(s, d, w, k)
    _extend(all_s, all_d, all_w, all_k, s, d, w, k)
    W, K = _dense(n, all_s, all_d, all_w, all_k)
    _check(g, W, K)
    g.grow(n + 5)
    g.add_edges([n + 4], [0], [0.9], [EdgeKind.EXPLICIT])
    W2 = np.zeros((n + 5, n + 5), np.float32)
    K2 = np.zeros((n + 5, n + 5), np.int64)
    W2[:n, :n], K2[:n, :n] = W, K
    W2[n + 4, 0] = W2[0, n + 4] = np.float32(np.float16(0.9))
    K2[n + 4, 0] = K2[0, n + 4] = EdgeKind.EXPLICIT
    _check(g, W2, K2)
    g.compact()
    _check(g, W2, K2)


def test_auto_merge_and_budget_dtypes() -> None:
    rng = np.random.default_rng(5)
    n = 2000
    g = Graph(n, min_delta=100)
    s, d = rng.integers(0, n, 5000), rng.integers(0, n, 5000)
    g.add_edges(s, d, 0.5, EdgeKind.SIMILAR)  # big batch goes straight to CSR
    assert len(g._d_src) == 0
    assert g._indices.dtype == np.int32 and g._weights.dtype == np.float16
    assert g._kinds.dtype == np.uint8 and g._indptr.dtype == np.int32
    for _ in range(50):
        g.add_edges(rng.integers(0, n, 10), rng.integers(0, n, 10), 0.7, EdgeKind.ENTITY)
    assert len(g._d_src) <= g._delta_limit()
    assert g.nbytes > 0


def test_rejects_bad_input() -> None:
    g = Graph(3)
    with pytest.raises(ValueError):
        g.add_edges([0], [3])
    with pytest.raises(ValueError):
        g.add_edges([0], [1], [-1.0])
