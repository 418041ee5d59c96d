"""The engine's faster query paths against plain restatements of what they replace: BM25 sums in
query order (bit for bit), the top-k cut, the session scores. Results must not move by a bit, so
these compare exactly, not approximately."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memory.engine import BM25Index, NodeRecord, Scope, TenantIndex
from memory.engine.bm25 import _topk
from memory.engine.ranking import kth_largest
from memory.engine.resonance import _session_scores


def _zipf_docs(rng: np.random.Generator, n: int, vocab: int) -> list[list[str]]:
    p = 1.0 / (np.arange(1, vocab + 1) + 2.0)
    p /= p.sum()
    return [[f"t{x}" for x in rng.choice(vocab, size=int(rng.integers(1, 40)), p=p)] for _ in range(n)]


def _sequential_scores(docs, query, weights, allowed, k1=1.2, b=0.75):
    """Per-document BM25 summed term by term in query order, each term's part computed as
    ``(w * idf * (k1 + 1)) * tf / (tf + norm)`` in float64: the order and grouping of the
    engine's float operations, so equal to its scores bit for bit."""
    live = [i for i, d in enumerate(docs) if d is not None and (allowed is None or allowed[i])]
    n = len(live)
    avgdl = float(sum(len(docs[i]) for i in live)) / n
    scores = np.zeros(len(docs))
    counts = np.zeros(len(docs), dtype=np.int64)
    for term in dict.fromkeys(query):
        df = sum(1 for i in live if term in docs[i])
        if df == 0:
            continue
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        c = (weights.get(term, 1.0) * idf * (k1 + 1.0))
        for i, d in enumerate(docs):  # hidden documents are summed too, then dropped
            if d is None or term not in d:
                continue
            tf = float(d.count(term))
            norm = (k1 * (1.0 - b)) + (k1 * b / max(avgdl, 1e-9)) * len(d)
            scores[i] = scores[i] + c * tf / (tf + norm)
            counts[i] += 1
    keep = [i for i in live if counts[i]]
    return np.asarray(keep, dtype=np.int64), scores[keep], counts[keep]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bm25_scores_sum_terms_in_query_order_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    docs: list[list[str] | None] = list(_zipf_docs(rng, 500, 80))
    idx = BM25Index()
    for i, d in enumerate(docs):
        idx.add(i, d)
    for i in range(0, 500, 7):  # rewritten documents leave dead slots behind
        docs[i] = _zipf_docs(rng, 1, 80)[0]
        idx.add(i, docs[i])
    for i in range(3, 500, 41):
        docs[i] = None
        idx.remove(i)
    mask = rng.random(500) < 0.7
    for _ in range(25):
        q = [f"t{x}" for x in rng.integers(0, 90, int(rng.integers(1, 7)))]  # some unknown terms
        extra = [f"t{x}" for x in rng.integers(0, 80, 10)]
        weights = dict.fromkeys(extra, 0.3)
        for query, w in ((q, {}), (q + extra, weights)):  # the second continues the first
            got = idx.query(query, mask, w or None)
            locs, scores, counts = _sequential_scores(docs, query, w, mask)
            np.testing.assert_array_equal(got.locals, locs)
            np.testing.assert_array_equal(got.scores, scores)  # bit for bit
            np.testing.assert_array_equal(got.matches, counts)
            assert got.matches.dtype == np.int32


def _reference_cut(values: np.ndarray, k: int) -> float:
    return values[np.argpartition(-values, k - 1)[:k]].min()


def test_kth_largest_equals_a_full_partition() -> None:
    rng = np.random.default_rng(5)
    for it in range(3000):
        n = int(rng.integers(1, 6000))
        k = int(rng.integers(1, min(n, 120) + 1))
        shape = it % 7
        if shape == 0:
            v = rng.random(n)
        elif shape == 1:  # ascending: the strided sample sees the largest values
            v = np.sort(rng.gamma(2.0, 1.0, n))
        elif shape == 2:
            v = np.sort(rng.random(n))[::-1].copy()
        elif shape == 3:  # heavy ties around the cut
            v = rng.integers(0, 4, n).astype(np.float64)
        elif shape == 4:
            v = np.full(n, 2.5)
        elif shape == 5:  # a few large values hiding between the sample's strides
            v = rng.random(n) * 1e-3
            v[rng.integers(0, n, 3)] = 10.0
        else:
            v = rng.random(n)
            v[rng.random(n) < 0.3] = np.nan
        want, got = _reference_cut(v, k), kth_largest(v, k)
        assert want == got or (np.isnan(want) and np.isnan(got)), (shape, n, k)


def test_topk_equals_a_full_sort() -> None:
    rng = np.random.default_rng(6)
    for _ in range(300):
        n = int(rng.integers(1, 5000))
        ids = rng.permutation(10 * n)[:n].astype(np.int64)
        scores = np.round(rng.gamma(2.0, 1.0, n), int(rng.integers(1, 4)))  # ties, broken by id
        k = int(rng.integers(1, 40))
        got_ids, got_sc = _topk(ids, scores, k)
        order = np.lexsort((ids, -scores))[:k]
        np.testing.assert_array_equal(got_ids, ids[order])
        np.testing.assert_array_equal(got_sc, scores[order])


def test_session_scores_equal_a_per_session_loop() -> None:
    rng = np.random.default_rng(7)
    idx = TenantIndex(4)
    recs = []
    for i in range(600):
        sess = int(rng.integers(0, 40))  # 0: written without a session
        recs.append(NodeRecord(node_id=i + 1, text=" ".join(f"w{x}" for x in rng.integers(0, 30, 6)),
                               scope=Scope.ORG, session_key=sess * 7919, seq=i))
    idx.upsert_nodes(recs)
    vis = rng.random(600) < 0.8
    skey = idx.col("session_key")
    for _ in range(20):
        bm = idx.bm25.query([f"w{x}" for x in rng.integers(0, 30, 3)], vis)
        cand = np.unique(rng.integers(0, 600, 80)).astype(np.int64)
        top = int(rng.integers(1, 5))
        got = _session_scores(idx, cand, bm, top)
        by_session: dict[int, list[float]] = {}
        for loc, sc in zip(bm.locals.tolist(), bm.scores.tolist(), strict=True):
            by_session.setdefault(int(skey[loc]), []).append(sc)
        for c, g in zip(cand.tolist(), got.tolist(), strict=True):
            s = int(skey[c])
            if s == 0:
                own = bm.scores[bm.locals == c]
                want = float(own[0]) if own.size else math.nan
            elif s in by_session:
                want = float(np.sum(sorted(by_session[s], reverse=True)[:top]))
            else:
                want = math.nan
            assert (math.isnan(want) and math.isnan(g)) or math.isclose(g, want, rel_tol=1e-12), (c, g, want)


def test_query_top_equals_the_top_of_the_full_query() -> None:
    rng = np.random.default_rng(8)
    docs = _zipf_docs(rng, 700, 60)
    idx = BM25Index()
    for i, d in enumerate(docs):
        idx.add(i, d)
    for i in range(0, 700, 9):  # dead slots, and slots no longer in local order
        idx.add(i, _zipf_docs(rng, 1, 60)[0])
    allowed = [rng.random(700) < 0.7, rng.random(700) < 0.3, None]
    for _ in range(40):
        vis = allowed[int(rng.integers(0, 3))]
        mask = [None, rng.random(650) < 0.8][int(rng.integers(0, 2))]  # shorter than the index: False past it
        q = [f"t{x}" for x in rng.integers(0, 70, int(rng.integers(1, 5)))]
        extra = [f"t{x}" for x in rng.integers(0, 60, 8)]
        k = int(rng.integers(0, 30))
        for query, w in ((q, None), (q + extra, dict.fromkeys(extra, 0.3))):  # the second continues
            # Either first (continuing from the last query, or fresh), or right after the same full
            # query (a continuation with nothing to add).
            if rng.random() < 0.5:
                got = idx.query_top(query, k, vis, mask, w)
                want = idx.query(query, vis, w).top(k, mask)
            else:
                want = idx.query(query, vis, w).top(k, mask)
                got = idx.query_top(query, k, vis, mask, w)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])


def test_the_remembered_unit_query_vector_follows_the_vector() -> None:
    from memory.engine.vectors import VectorIndex, normalize

    rng = np.random.default_rng(9)
    mat = rng.standard_normal((300, 16)).astype(np.float32)
    vi = VectorIndex(16)
    vi.add(np.arange(300), mat)
    unit, _ = normalize(mat)
    ids = np.arange(0, 300, 3)
    q = rng.standard_normal(16).astype(np.float32)
    for _ in range(5):
        for shape in ((16,), (1, 16)):
            qq = q.reshape(shape)
            want = unit[ids] @ normalize(qq)[0][0]
            np.testing.assert_array_equal(vi.cosine(ids, qq), want.astype(np.float64))
            top, sims = vi.search(qq, 5)
            np.testing.assert_array_equal(top, np.lexsort((np.arange(300), -(unit @ normalize(qq)[0][0])))[:5])
        q[rng.integers(0, 16)] += 1.0  # the same array, changed in place: never the old unit vector
    zero = np.zeros(16, np.float32)
    assert np.isnan(vi.cosine(ids, zero)).all() and vi.search(zero, 5)[0].size == 0


def test_sorted_unique_equals_np_unique() -> None:
    from memory.engine._arrays import sorted_unique

    rng = np.random.default_rng(10)
    for n in (0, 1, 2, 3, 50, 400, 3000):
        for dtype in (np.int64, np.int32, np.float64):
            a = rng.integers(0, max(n, 1) * 2, n).astype(dtype)
            got = sorted_unique(a)
            want = np.unique(a)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_isin_few_equals_np_isin() -> None:
    from memory.engine._arrays import isin_few

    rng = np.random.default_rng(11)
    col = rng.integers(-3, 40, 5000).astype(np.int64)
    for size in (0, 1, 2, 5, 16, 17, 60):  # 17 and more: numpy's own isin
        values = rng.integers(-5, 45, size).astype(np.int64)
        got = isin_few(col, values)
        assert got.dtype == np.bool_ and got.shape == col.shape
        np.testing.assert_array_equal(got, np.isin(col, values))
    np.testing.assert_array_equal(isin_few(col[:0], np.array([1])), np.zeros(0, bool))


def _rank_order_reference(values: np.ndarray, tie: np.ndarray, eps: float, abs_eps: float) -> list[int]:
    """Sorted by value descending; runs of values each within eps (relative) / abs_eps of the one
    before form a group ordered by tie; NaN and -inf last, as their own group."""
    v = [(-math.inf if math.isnan(x) else float(x)) for x in values]
    order = sorted(range(len(v)), key=lambda i: (-v[i], tie[i]))
    groups: list[list[int]] = []
    for i in order:
        if groups:
            p = v[groups[-1][-1]]
            both_fin = math.isfinite(p) and math.isfinite(v[i])
            same = (not math.isfinite(p) and not math.isfinite(v[i])) or (
                both_fin and p - v[i] <= max(eps * max(abs(p), abs(v[i])), abs_eps)
            )
            if same:
                groups[-1].append(i)
                continue
        groups.append([i])
    return [i for g in groups for i in sorted(g, key=lambda i: tie[i])]


def test_rank_order_equals_its_definition() -> None:
    from memory.engine.ranking import rank_order

    rng = np.random.default_rng(11)
    for it in range(400):
        n = int(rng.integers(0, 60))
        v = rng.random(n)
        if it % 3 == 0:  # near-ties and exact ties
            v = np.round(v, 2) + rng.random(n) * 1e-9
        if it % 4 == 0 and n:
            v[rng.random(n) < 0.2] = np.nan
        tie = rng.permutation(1000)[:n]
        abs_eps = [0.0, 1e-6][it % 2]
        got = rank_order(v, tie, abs_eps=abs_eps).tolist()
        assert got == _rank_order_reference(v, tie, 1e-6, abs_eps)


def _skewed_docs(rng: np.random.Generator, n: int) -> list[list[str]]:
    """Frequent words in every other document, a few rare ones, and lengths from 1 to 60 tokens,
    some with a word repeated many times: a top-k query can skip most postings here, and a term's
    bound (its largest tf, its shortest document) is tested at both ends."""
    docs = []
    for _ in range(n):
        words = [f"f{x}" for x in rng.integers(0, 12, int(rng.integers(0, 30)))]
        words += [f"r{x}" for x in rng.integers(0, 400, int(rng.integers(0, 4)))]
        if rng.random() < 0.05:
            words += [f"f{int(rng.integers(0, 12))}"] * int(rng.integers(5, 40))
        docs.append(words or ["f0"])
    return docs


def test_pruned_top_k_equals_the_top_of_the_full_query() -> None:
    rng = np.random.default_rng(11)
    idx = BM25Index()
    for i, d in enumerate(_skewed_docs(rng, 3000)):
        idx.add(i, d)
    pruned_before = idx.terms_pruned
    for round_ in range(3):
        allowed = [rng.random(3000) < 0.6, None]
        for _ in range(60):
            vis = allowed[int(rng.integers(0, 2))]
            mask = [None, rng.random(2900) < 0.9][int(rng.integers(0, 2))]
            q = [f"r{x}" for x in rng.integers(0, 400, int(rng.integers(1, 4)))]
            q += [f"f{x}" for x in rng.integers(0, 12, int(rng.integers(0, 3)))]
            extra = [f"f{x}" for x in rng.integers(0, 12, 8)] + [f"r{x}" for x in rng.integers(0, 400, 3)]
            beta = float(rng.choice([0.05, 0.3, 1.0, 2.5]))
            k = int(rng.integers(1, 40))
            for query, w in ((q, None), (q + extra, dict.fromkeys(extra, beta))):
                want = idx.query(query, vis, w).top(k, mask)
                got = idx.query_top(query, k, vis, mask, w)
                np.testing.assert_array_equal(got[0], want[0])
                np.testing.assert_array_equal(got[1], want[1])
        if round_ == 0:
            # Replaced documents (dead slots) and new ones with larger tfs and shorter lengths than
            # any before: the bounds must follow the postings' new tails.
            for i in range(0, 3000, 7):
                idx.add(i, [f"f{i % 12}"] * 60 if i % 2 else [f"f{i % 12}", f"r{i % 400}"])
        elif round_ == 1:
            idx.compact()  # renumbered slots: bounds start again
    assert idx.terms_pruned > pruned_before  # the pruned path ran, not only the full one


def test_top_k_with_zero_or_negative_weights_scores_everything() -> None:
    rng = np.random.default_rng(12)
    idx = BM25Index()
    for i, d in enumerate(_skewed_docs(rng, 500)):
        idx.add(i, d)
    for beta in (0.0, -0.5):
        q, extra = ["r1", "r2", "f0"], ["f1", "f2", "f3"]
        w = dict.fromkeys(extra, beta)
        want = idx.query(q + extra, None, w).top(15)
        got = idx.query_top(q + extra, 15, None, None, w)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_top_k_outside_the_pruning_bounds_scores_everything() -> None:
    """b above 1 (a negative length normalisation for short documents) and a weight so small that a
    contribution rounds to zero: the pruned path's assumptions fail, so the full path answers."""
    rng = np.random.default_rng(13)
    docs = _skewed_docs(rng, 400)
    for b in (1.5, 0.75):
        idx = BM25Index(b=b)
        for i, d in enumerate(docs):
            idx.add(i, d)
        for q, w in ((["r1", "r2", "f0", "f1"], None), (["f0"], {"f0": 5e-324})):
            want = idx.query(q, None, w).top(7)
            got = idx.query_top(q, 7, None, None, w)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])


def test_concurrent_top_k_queries_with_different_masks_keep_their_own() -> None:
    """Readers share one index's statistics under a read lock; each one's mask must stay its own."""
    import sys
    import threading

    rng = np.random.default_rng(14)
    idx = BM25Index()
    for i, d in enumerate(_skewed_docs(rng, 600)):
        idx.add(i, d)
    masks = [np.arange(600) % 2 == 0, np.arange(600) % 2 == 1]
    wrong: list[int] = []

    def reader(m: np.ndarray) -> None:
        for _ in range(1500):
            ids, _sc = idx.query_top(["f0", "f1", "r3"], 10, None, m)
            if ids.size and not m[ids].all():
                wrong.append(1)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=reader, args=(masks[i % 2],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not wrong
