from __future__ import annotations

import numpy as np

from memory.engine import VectorIndex


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _brute(mat: np.ndarray, ok: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    sims = _unit(mat) @ _unit(q)
    ids = np.flatnonzero(ok)
    return ids[np.lexsort((ids, -sims[ids]))][:k]


def test_exact_path_equals_brute_force() -> None:
    rng = np.random.default_rng(0)
    mat = rng.normal(size=(500, 32)).astype(np.float32)
    vi = VectorIndex(32)
    vi.add(np.arange(500), mat)
    for _ in range(10):
        q = rng.normal(size=32).astype(np.float32)
        allowed = rng.random(500) < 0.4
        ids, sims = vi.search(q, 10, allowed)
        np.testing.assert_array_equal(ids, _brute(mat, allowed, q, 10))
        np.testing.assert_allclose(sims, _unit(mat[ids]) @ _unit(q), rtol=1e-5)
        assert not vi.uses_hnsw


def test_missing_and_removed_never_returned() -> None:
    rng = np.random.default_rng(1)
    mat = rng.normal(size=(50, 8)).astype(np.float32)
    vi = VectorIndex(8)
    vi.add(np.arange(50), mat)
    q = mat[3]
    assert vi.search(q, 1)[0].tolist() == [3]
    vi.remove(3)
    vi.mark_missing(np.array([4]))
    vi.add(np.array([5]), np.zeros((1, 8)))  # zero vector: unusable -> missing
    ids, _ = vi.search(q, 50)
    assert {3, 4, 5}.isdisjoint(ids.tolist())
    assert len(ids) == 47
    cos = vi.cosine(np.array([3, 6]), q)
    assert np.isnan(cos[0]) and not np.isnan(cos[1])


def _recall(vi: VectorIndex, mat: np.ndarray, queries: np.ndarray) -> float:
    unit = _unit(mat)
    hits = 0
    for q in queries:
        ids, _ = vi.search(q, 10)
        truth = np.argsort(-(unit @ _unit(q)))[:10]
        hits += len(set(ids.tolist()) & set(truth.tolist()))
    return hits / (10 * len(queries))


def _clustered(rng: np.random.Generator, n: int, dim: int, centroids: np.ndarray) -> np.ndarray:
    # Real sentence embeddings are clustered (topics), not isotropic noise.
    pick = rng.integers(0, centroids.shape[0], n)
    return (centroids[pick] + 1.0 * rng.normal(size=(n, dim))).astype(np.float32)


def test_hnsw_recall_and_mask() -> None:
    rng = np.random.default_rng(2)
    n, dim = 30_000, 64
    cent = rng.normal(size=(300, dim))
    mat = _clustered(rng, n, dim, cent)
    vi = VectorIndex(dim, exact_below=20_000)  # defaults: M=16, ef 64/64, int8 graph
    vi.add(np.arange(n), mat)
    queries = _clustered(rng, 100, dim, cent)
    recall = _recall(vi, mat, queries)
    assert vi.uses_hnsw
    assert recall >= 0.95, recall
    # Filtering happens inside search: every hit allowed, k hits returned.
    allowed = rng.random(n) < 0.3
    hits = 0
    for q in queries[:30]:
        ids, _ = vi.search(q, 10, allowed)
        assert len(ids) == 10 and allowed[ids].all()
        hits += len(set(ids.tolist()) & set(_brute(mat, allowed, q, 10).tolist()))
    assert hits / 300 >= 0.9
    # Very selective mask: exact fallback, exact answer.
    tiny = np.zeros(n, dtype=bool)
    tiny[rng.choice(n, 50, replace=False)] = True
    ids, _ = vi.search(queries[0], 10, tiny)
    np.testing.assert_array_equal(ids, _brute(mat, tiny, queries[0], 10))
    # Incremental add after the HNSW exists, and removal.
    vi.add(np.array([n]), queries[1][None, :])
    assert vi.search(queries[1], 1)[0].tolist() == [n]
    vi.remove(n)
    assert n not in vi.search(queries[1], 10)[0].tolist()


def test_hnsw_recall_isotropic_needs_wider_ef() -> None:
    # Uniform random directions are HNSW's worst case (no neighbourhood
    # structure): ef_search=64 gives ~0.66 recall@10 here, 256 ~0.95, 512 ~0.99.
    rng = np.random.default_rng(4)
    n, dim = 30_000, 64
    mat = rng.normal(size=(n, dim)).astype(np.float32)
    vi = VectorIndex(dim, exact_below=20_000)
    vi.add(np.arange(n), mat)
    queries = rng.normal(size=(100, dim)).astype(np.float32)
    vi.set_ef_search(512)
    assert _recall(vi, mat, queries) >= 0.95
