"""A cold build reads the org a page at a time: the same index as a build that reads it whole, with
a peak that is the index plus one page, not the index plus every row, record and vector copy of
the org (real Postgres rows)."""

from __future__ import annotations

import gc
import random
import tracemalloc

import numpy as np
import pytest
from django.utils import timezone

from memory.cache import EngineCache, now_days
from memory.engine import ResonateParams, resonate
from memory.engine.tokenize import tokenize
from memory.models import EMBEDDING_DIM, Edge, Node

pytestmark = pytest.mark.django_db

WORDS = ("deploy budget meeting customer review roadmap incident ticket sprint design feature billing staging "
         "cluster backup vendor invoice release pager audit garden guitar marathon podcast lake cabin").split()


def _org_rows(w, n: int, *, seed: int = 4) -> list[int]:
    """``n`` turns in sessions of 7 (some deleted, some superseded, some without a vector) and their
    edges, written straight as rows: the cache reads rows, whoever wrote them."""
    rng = random.Random(seed)
    vecs = np.random.default_rng(seed).standard_normal((n, EMBEDDING_DIM)).astype(np.float32)
    now = timezone.now()
    nodes = Node.objects.bulk_create([
        Node(org=w.org, owner_agent=w.agent, visibility=rng.choice(["org", "team", "private"]), team=w.team,
             text=" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 25))) + f" ({i})",
             speaker=rng.choice(["Ana", "Ben", ""]), session_key=f"s{i // 7}", seq=i % 7, occurred_at=now,
             tension_updated_at=now, embedding=None if i % 23 == 0 else vecs[i], embedded=i % 23 != 0,
             deleted_at=now if i % 31 == 0 else None, valid_to=now if i % 37 == 0 else None)
        for i in range(n)])
    ids = [x.id for x in nodes]
    pairs = {(ids[i - 1], ids[i], "temporal_next") for i in range(1, n)}
    pairs |= {(rng.choice(ids), rng.choice(ids), "similar") for _ in range(2 * n)}
    Edge.objects.bulk_create([Edge(org=w.org, src_id=s, dst_id=d, kind=k, weight=rng.random())
                              for s, d, k in pairs if s != d])
    return ids


def test_a_build_in_pages_is_the_index_of_a_build_in_one(world):
    a = world["a"]
    _org_rows(a, 300)
    whole = EngineCache(max_bytes=1 << 40, build_page_rows=1 << 20).get(a.org.id)
    paged = EngineCache(max_bytes=1 << 40, build_page_rows=16).get(a.org.id)  # 19 node pages, 53 edge pages
    assert paged.n == whole.n == 300
    assert paged.nbytes() == whole.nbytes()  # no capacity left over from growing page by page
    for name in ("node_id", "deleted", "mentions", "session_key", "seq", "scope", "seed_until"):
        np.testing.assert_array_equal(paged.col(name), whole.col(name))
    for got, want in zip(paged.graph.edges(), whole.graph.edges(), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(paged.vectors._mat[: paged.n], whole.vectors._mat[: whole.n])
    rng = np.random.default_rng(2)
    for q in ("budget review lake", "pager incident Friday", "what did Ana say about the vendor invoice"):
        qvec = rng.standard_normal(EMBEDDING_DIM).astype(np.float32)
        out = [resonate(ix, query_text=q, query_tokens=tokenize(q), query_vec=qvec,
                        allowed=ix.visibility_mask(owner_keys=[a.agent.id * 2 + 1], team_ids=[a.team.id]),
                        params=ResonateParams(k=10), now_days=now_days()) for ix in (whole, paged)]
        assert [(h.node_id, h.score) for h in out[0].hits] == [(h.node_id, h.score) for h in out[1].hits]
        assert out[0].hits


def test_a_build_peaks_at_the_index_plus_a_page(world):
    """Read whole, a build held every row (each vector as a pgvector object), every record and two
    float32 copies of all vectors beside the index: a traced peak of 3.7x the index here (a page as
    large as the org), 3.5x in RSS on a 20k-node org. In pages of 256 rows the peak is the index,
    a page's worth and what a first build adds to the process's own caches (stems, speakers): 1.27x
    with those warm, ~1.36x cold."""
    a = world["a"]
    _org_rows(a, 3000)
    cache = EngineCache(max_bytes=1 << 40, build_page_rows=256)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        index = cache.get(a.org.id)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert index.n == 3000
    assert peak < 1.5 * index.nbytes(), (peak, index.nbytes())
