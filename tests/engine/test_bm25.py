from __future__ import annotations

import math

import numpy as np
import pytest

from memory.engine import BM25Index


def _corpus(rng: np.random.Generator, n_docs: int, vocab: int) -> list[list[str]]:
    # Zipf-ish term draw so some terms are common and some rare.
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    docs = []
    for _ in range(n_docs):
        length = int(rng.integers(1, 30))
        docs.append([f"t{x}" for x in rng.choice(vocab, size=length, p=p)])
    return docs


def brute_bm25(
    docs: list[list[str] | None], query: list[str], allowed: np.ndarray | None, k1=1.2, b=0.75
) -> np.ndarray:
    """Scores straight from the formula; stats over live allowed docs."""
    live = [i for i, d in enumerate(docs) if d is not None and (allowed is None or allowed[i])]
    n = len(live)
    avgdl = sum(len(docs[i]) for i in live) / n
    scores = np.zeros(len(docs))
    for term in dict.fromkeys(query):
        df = sum(1 for i in live if term in docs[i])
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i in live:
            tf = docs[i].count(term)
            if tf:
                scores[i] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(docs[i]) / avgdl))
    return scores


def _check(index: BM25Index, docs, query, allowed, k) -> None:
    ref = brute_bm25(docs, query, allowed)
    ids, scores = index.search(query, k, allowed)
    cand = np.flatnonzero(ref > 0)
    order = cand[np.lexsort((cand, -ref[cand]))][:k]
    np.testing.assert_array_equal(ids, order)
    np.testing.assert_allclose(scores, ref[order], rtol=1e-9)
    if allowed is not None:
        assert allowed[ids].all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    docs: list[list[str] | None] = list(_corpus(rng, 400, 300))
    index = BM25Index()
    for i, d in enumerate(docs):
        index.add(i, d)
    for _ in range(10):
        q = [f"t{x}" for x in rng.integers(0, 300, size=int(rng.integers(1, 8)))]
        _check(index, docs, q, None, 10)
        allowed = rng.random(len(docs)) < 0.5
        _check(index, docs, q, allowed, 10)


def test_remove_and_update() -> None:
    rng = np.random.default_rng(7)
    docs: list[list[str] | None] = list(_corpus(rng, 200, 100))
    index = BM25Index()
    for i, d in enumerate(docs):
        index.add(i, d)
    for i in range(0, 200, 3):
        index.remove(i)
        docs[i] = None
    for i in range(1, 200, 5):
        new = [f"t{x}" for x in rng.integers(0, 100, size=5)]
        index.add(i, new)  # replaces, must not duplicate postings
        docs[i] = new
    for _ in range(10):
        q = [f"t{x}" for x in rng.integers(0, 100, size=4)]
        _check(index, docs, q, None, 20)
        _check(index, docs, q, rng.random(200) < 0.3, 20)
    ids, _ = index.search(["t0", "t1", "t2"], 200)
    assert len(set(ids.tolist())) == len(ids)
    assert not any(i % 3 == 0 and docs[i] is None for i in ids.tolist())


def test_hidden_never_returned_and_no_stat_leak() -> None:
    index = BM25Index()
    index.add(0, ["secret", "alpha"])
    index.add(1, ["alpha", "beta"])
    index.add(2, ["gamma"])
    allowed = np.array([False, True, True])
    ids, s1 = index.search(["alpha", "secret"], 5, allowed)
    assert ids.tolist() == [1]
    # Same score as a corpus without doc 0 at all.
    other = BM25Index()
    other.add(1, ["alpha", "beta"])
    other.add(2, ["gamma"])
    _, s2 = other.search(["alpha", "secret"], 5)
    np.testing.assert_allclose(s1, s2, rtol=0, atol=0)
    assert index.search(["secret"], 5, allowed)[0].size == 0


def test_match_fraction() -> None:
    index = BM25Index()
    index.add(0, ["a", "b"])
    index.add(1, ["b"])
    index.add(2, ["c"])
    q = index.query(["a", "b", "z", "b"])
    np.testing.assert_allclose(q.match_fraction(np.array([0, 1, 2, 9])), [2 / 3, 1 / 3, 0, 0])


def test_write_while_a_query_view_is_alive() -> None:
    index = BM25Index()
    index.add(0, ["a"])
    pinned = np.frombuffer(index._post_slots[0], dtype=np.int32)  # like a leaked view
    index.add(1, ["a"])
    assert pinned.tolist() == [0]
    assert index.search(["a"], 5)[0].tolist() == [0, 1]


def _fresh(docs: list[list[str] | None]) -> BM25Index:
    idx = BM25Index()
    for i, d in enumerate(docs):
        if d is not None:
            idx.add(i, d)
    return idx


def _same(a, b) -> None:
    np.testing.assert_array_equal(a.locals, b.locals)
    np.testing.assert_array_equal(a.scores, b.scores)  # bit for bit, not approximately
    np.testing.assert_array_equal(a.matches, b.matches)


def test_cached_statistics_and_extended_queries_equal_a_fresh_index() -> None:
    rng = np.random.default_rng(11)
    docs: list[list[str] | None] = list(_corpus(rng, 300, 60))
    idx = _fresh(docs)
    masks = [rng.random(300) < 0.7, rng.random(300) < 0.4]
    for _ in range(30):
        mask = masks[int(rng.integers(0, 2))]
        q = [f"t{x}" for x in rng.integers(0, 60, 3)]
        extra = [f"t{x}" for x in rng.integers(0, 60, 4)]
        weights = dict.fromkeys(extra, 0.3)
        first = idx.query(q, mask)
        second = idx.query(q + extra, mask, weights)  # the feedback pass: starts from the first
        ref = _fresh(docs)
        _same(first, ref.query(q, mask))
        _same(second, _fresh(docs).query(q + extra, mask, weights))
        assert idx.doc_freqs(extra, mask)[0].tolist() == ref.doc_freqs(extra, mask)[0].tolist()
        if rng.random() < 0.3:  # a write between queries: statistics must not be reused
            i = int(rng.integers(0, 300))
            docs[i] = None if docs[i] is not None else ["t1", "t2"]
            if docs[i] is None:
                idx.remove(i)
            else:
                idx.add(i, docs[i])


def test_compaction_keeps_scores_and_drops_dead_postings() -> None:
    rng = np.random.default_rng(12)
    docs: list[list[str] | None] = list(_corpus(rng, 200, 40))
    idx = _fresh(docs)
    for i in range(0, 200, 3):  # rewrite a third, delete a tenth
        docs[i] = [f"t{x}" for x in rng.integers(0, 40, 5)]
        idx.add(i, docs[i])
    for i in range(1, 200, 10):
        docs[i] = None
        idx.remove(i)
    mask = rng.random(200) < 0.8
    before = [idx.query([f"t{x}", f"t{x + 1}"], mask) for x in range(0, 38, 2)]
    assert idx.dead_fraction() > 0.3
    idx.compact()
    assert idx.dead_fraction() == 0.0
    assert idx.nbytes() < _fresh(docs).nbytes() * 1.05
    for x, b in zip(range(0, 38, 2), before, strict=True):
        _same(idx.query([f"t{x}", f"t{x + 1}"], mask), b)
