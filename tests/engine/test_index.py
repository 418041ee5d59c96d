from __future__ import annotations

import math

import numpy as np

from memory.engine import (
    TENSION_THRESHOLD,
    EdgeKind,
    NodeRecord,
    ResonateParams,
    Scope,
    TenantIndex,
    resonate,
    tension,
)


def _vis_index() -> TenantIndex:
    idx = TenantIndex(4)
    idx.upsert_nodes(
        [
            NodeRecord(1, "mine private", owner_key=10, scope=Scope.PRIVATE),
            NodeRecord(2, "other private", owner_key=20, scope=Scope.PRIVATE),
            NodeRecord(3, "team a", owner_key=20, team_id=7, scope=Scope.TEAM),
            NodeRecord(4, "team b", owner_key=20, team_id=8, scope=Scope.TEAM),
            NodeRecord(5, "team b mine", owner_key=10, team_id=8, scope=Scope.TEAM),
            NodeRecord(6, "org", owner_key=20, scope=Scope.ORG),
            NodeRecord(7, "restricted", owner_key=20, scope=Scope.RESTRICTED),
            NodeRecord(8, "restricted other", owner_key=10, scope=Scope.RESTRICTED),
            NodeRecord(9, "org deleted", owner_key=10, scope=Scope.ORG),
        ]
    )
    idx.delete_nodes([9])
    return idx


def test_visibility_mask_semantics() -> None:
    idx = _vis_index()
    nid = idx.col("node_id")

    def visible(**kw) -> set[int]:
        return set(nid[idx.visibility_mask(**kw)].tolist())

    assert visible(owner_keys=[10], team_ids=[7]) == {1, 3, 5, 6}
    assert visible(owner_keys=[10], team_ids=[7], org_wide=False) == {1, 3, 5}
    assert visible(owner_keys=[10], restricted_allowed_node_ids=[7, 1, 2, 999]) == {1, 5, 6, 7}
    assert visible(owner_keys=[20], team_ids=[]) == {2, 3, 4, 6}
    assert visible() == {6}
    assert visible(org_wide=False) == set()
    # Restricted ids never unlock a non-restricted node (ACLs are for restricted only).
    assert 2 not in visible(restricted_allowed_node_ids=[2])


def test_upsert_updates_in_place_without_duplicate_postings() -> None:
    idx = TenantIndex(4)
    idx.upsert_nodes(
        [
            NodeRecord(1, "apple banana", scope=Scope.ORG, vector=[1, 0, 0, 0]),
            NodeRecord(2, "cherry", scope=Scope.ORG, vector=[0, 1, 0, 0]),
        ]
    )
    locs = idx.upsert_nodes([NodeRecord(1, "apple durian", scope=Scope.ORG, mentions=3)])
    assert locs.tolist() == [0] and idx.n == 2
    assert idx.col("mentions")[0] == 3
    allowed = idx.visibility_mask()
    ids, _ = idx.bm25.search(["banana"], 5, allowed)
    assert ids.size == 0
    ids, _ = idx.bm25.search(["appl", "durian"], 5, allowed)
    assert ids.tolist() == [0]
    assert idx.bm25.n_docs == 2
    # vector=None on update keeps the old vector.
    assert idx.vectors.has_vector(np.array([0]))[0]
    idx.upsert_nodes([NodeRecord(1, "apple durian", scope=Scope.ORG, vector=np.empty(0))])
    assert not idx.vectors.has_vector(np.array([0]))[0]


def test_column_dict_input_and_delete() -> None:
    idx = TenantIndex(2)
    idx.upsert_nodes(
        {"node_id": [5, 6], "text": ["red fox", "blue fox"], "scope": [2, 2], "vector": [[1.0, 0.0], None]}
    )
    assert idx.local_of(6) == 1 and not idx.vectors.has_vector(np.array([1]))[0]
    assert idx.delete_nodes([5, 404]) == 1
    r = resonate(
        idx, query_text="fox", query_vec=np.array([1.0, 0.0]), allowed=np.ones(idx.n, bool), now_days=0
    )
    assert r.node_ids == (6,)


def test_record_recall_and_tension() -> None:
    idx = TenantIndex(2)
    idx.upsert_nodes([NodeRecord(1, "x", t0=1.0, lam=0.1, last_updated=0.0)])
    before = idx.tension(np.array([0]), 10.0)[0]
    idx.record_recall(np.array([0, 0]), now=10.0)
    assert idx.col("mentions")[0] == 1 and idx.col("last_recalled")[0] == 10.0
    assert idx.tension(np.array([0]), 10.0)[0] == before * 1.1
    # The precomputed seeding horizon agrees with the formula.
    horizon = idx.col("seed_until")[0]
    assert tension(1.0, 0.1, 0.0, 1, horizon - 1e-6) >= TENSION_THRESHOLD
    assert tension(1.0, 0.1, 0.0, 1, horizon + 1e-6) < TENSION_THRESHOLD


def test_tension_formula() -> None:
    t = tension(
        np.array([1.0, 2.0, 1.0]),
        np.array([0.5, 0.0, 1.0]),
        np.array([0.0, 0.0, 5.0]),
        np.array([0, 25, 3]),
        2.0,
    )
    np.testing.assert_allclose(t, [math.exp(-1.0), 2.0 * 2.0, 1.0 * 1.3])


def _build(records: list[NodeRecord], edges, min_delta: int) -> TenantIndex:
    idx = TenantIndex(8, graph_opts={"min_delta": min_delta})
    for i in range(0, len(records), 17):  # several write batches
        idx.upsert_nodes(records[i : i + 17])
        s, d, w, k = edges
        sel = (s < 1000 + i + 17) & (d < 1000 + i + 17) & ((s >= 1000 + i) | (d >= 1000 + i))
        idx.add_edges(s[sel], d[sel], w[sel], k[sel])
    return idx


def test_rebuild_gives_identical_results() -> None:
    rng = np.random.default_rng(0)
    words = "ship deploy rollback alert cache queue kafka redis oncall pager".split()
    n = 300
    records = [
        NodeRecord(
            1000 + i,
            " ".join(rng.choice(words, 5)),
            scope=Scope.ORG,
            kind=int(rng.choice([0, 1, 2])),
            lam=0.01,
            last_updated=float(i % 30),
            vector=rng.normal(size=8),
        )
        for i in range(n)
    ]
    m = 1500
    edges = (
        rng.integers(1000, 1000 + n, m),
        rng.integers(1000, 1000 + n, m),
        rng.random(m).astype(np.float32),
        rng.integers(0, len(EdgeKind), m),
    )
    a = _build(records, edges, min_delta=100_000)  # everything stays in the delta
    b = _build(records, edges, min_delta=50)  # compacted many times
    c = _build(records, edges, min_delta=100_000)
    c.graph.compact()
    qv = rng.normal(size=8)
    params = ResonateParams(depth=3, k=20)
    results = [
        resonate(
            x,
            query_text="deploy rollback cache",
            query_vec=qv,
            allowed=x.visibility_mask(),
            params=params,
            now_days=40.0,
        )
        for x in (a, b, c)
    ]
    key = [[(h.node_id, h.score, h.explanation.path) for h in r.hits] for r in results]
    assert key[0] == key[1] == key[2]
    assert len(key[0]) == 20


def _refs_of(idx: TenantIndex) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    nid = idx.col("node_id")
    for loc, first, last in zip(*(a.tolist() for a in idx.day_refs()), strict=True):
        out.setdefault(int(nid[loc]), []).append((first, last))
    return {k: sorted(v) for k, v in out.items()}


def test_day_refs_follow_updates_and_compaction() -> None:
    idx = TenantIndex(4)
    idx.upsert_nodes([NodeRecord(1, "a", day_refs=[(10, 10), (12, 18)]), NodeRecord(2, "b"),
                      NodeRecord(3, "c", day_refs=[(5, 5)])])
    assert _refs_of(idx) == {1: [(10, 10), (12, 18)], 3: [(5, 5)]}
    size = idx.nbytes()
    idx.upsert_nodes([NodeRecord(1, "a", day_refs=[(10, 10), (12, 18)])])  # read again unchanged
    assert len(idx._ref_node) == 3 and idx.nbytes() == size
    idx.upsert_nodes([NodeRecord(1, "a", day_refs=[(11, 11)])])  # fewer: in place
    idx.upsert_nodes([NodeRecord(2, "b", day_refs=[(1, 1), (2, 2)])])  # first ones: appended
    idx.upsert_nodes([NodeRecord(3, "c", day_refs=[(6, 6), (7, 9)])])  # more than it had: moved
    assert _refs_of(idx) == {1: [(11, 11)], 2: [(1, 1), (2, 2)], 3: [(6, 6), (7, 9)]}
    idx.upsert_nodes([NodeRecord(2, "b")])  # none any more
    assert _refs_of(idx) == {1: [(11, 11)], 3: [(6, 6), (7, 9)]}
    assert len(idx._ref_node) == 7
    idx.compact()
    assert len(idx._ref_node) == 3 and _refs_of(idx) == {1: [(11, 11)], 3: [(6, 6), (7, 9)]}
    idx.upsert_nodes([NodeRecord(3, "c", day_refs=[(8, 8)]), NodeRecord(1, "a", day_refs=[(11, 11), (20, 20)])])
    assert _refs_of(idx) == {1: [(11, 11), (20, 20)], 3: [(8, 8)]}  # offsets right after compaction


def test_day_refs_keep_only_valid_pairs_and_the_first_ones() -> None:
    from memory.engine.index import MAX_DAY_REFS

    idx = TenantIndex(4)
    bad = [(3, 2), ("x", 1), (None, None), (1,), (2**40, 2**40), (-5, -5)]
    idx.upsert_nodes([NodeRecord(1, "a", day_refs=bad), NodeRecord(2, "b", day_refs=[(d, d) for d in range(500)])])
    refs = _refs_of(idx)
    assert refs[1] == [(-5, -5)]
    assert refs[2] == [(d, d) for d in range(MAX_DAY_REFS)]
    plain = TenantIndex(4)
    plain.upsert_nodes([NodeRecord(1, "a"), NodeRecord(2, "b")])
    def entries(ix: TenantIndex) -> int:
        return ix._ref_node.nbytes + ix._ref_first.nbytes + ix._ref_last.nbytes

    assert entries(idx) >= 12 * (1 + MAX_DAY_REFS)
    assert idx.nbytes() - plain.nbytes() == entries(idx) - entries(plain)  # counted in nbytes
