"""What the engine cache holds: catch-ups that leave nothing behind, and a byte cap that bounds the
process (an org that cannot fit is served from Postgres, not built over and over, and never evicts
the orgs that fit). Real Postgres, writes through the API."""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from django.db.models import F

import memory.cache as cache_mod
from memory.cache import EngineCache
from memory.engine import TenantIndex
from memory.models import EMBEDDING_DIM, Node

pytestmark = pytest.mark.django_db


def _weave(client, n: int, start: int = 0) -> None:
    turns = [{"text": f"Note {i}: the build server rotates logs every {i} hours."} for i in range(start, start + n)]
    r = client.post("/api/v1/memories/weave-session", {"session_key": f"s{start}", "turns": turns}, format="json")
    assert r.status_code == 201


def _dumper_classes() -> int:
    """pgvector dumper classes alive in the process (psycopg keeps every one it is given)."""
    from pgvector.psycopg.vector import VectorDumper

    gc.collect()
    seen: set[type] = set()
    stack = [VectorDumper]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
    return len(seen)


def _rewrite(node_id: int) -> None:
    Node.objects.filter(id=node_id).update(mentions=F("mentions") + 1)


def test_catch_ups_leave_nothing_behind(world, client_for):
    """Each catch-up registered pgvector's adapters with ``register_vector_info``, which makes two
    classes that psycopg keeps for ever: web RSS grew with every write and every recall."""
    a = world["a"]
    _weave(client_for(a.key), 3)
    ids = list(Node.objects.filter(org_id=a.org.id).values_list("id", flat=True))
    cache = EngineCache(max_bytes=1 << 40)
    cache.get(a.org.id)
    _rewrite(ids[0])
    cache.get(a.org.id)  # one catch-up first: what is made once per process is made now
    classes = _dumper_classes()
    syncs = cache.stats["syncs"]
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(60):
            _rewrite(ids[i % len(ids)])  # a row rewritten (as the recall flush does): read again
            cache.get(a.org.id)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cache.stats["syncs"] - syncs == 60 and cache.stats["builds"] == 1  # 60 catch-ups, no rebuild
    assert _dumper_classes() == classes
    assert grown < 60 * 512, grown  # under half a KiB a catch-up (it was ~4 KiB, in classes alone)


# Caps set to the byte from measured index sizes: the tokenizer's stem memo (process-wide, grown by
# every write and query of the run) is left out of them, else its few MB decide instead.
EXACT = {"count_stem_cache": False}


def _sizes(org_id: int) -> tuple[int, int]:
    """(what the org's index measures built, the lower bound the cache judges it by unbuilt)."""
    index = EngineCache(max_bytes=1 << 40).get(org_id)
    live = index.n - int(index.col("deleted").sum())
    return index.nbytes(), TenantIndex.estimate_nbytes(nodes=index.n, live=live, dim=EMBEDDING_DIM)


def _resonate(client) -> dict:
    r = client.post("/api/v1/memories/resonate", {"query": "build server logs", "reinforce": False}, format="json")
    assert r.status_code == 200
    return r.json()


def test_org_over_the_cap_by_its_rows_is_never_built(world, client_for, monkeypatch):
    big, small = world["a"], world["b"]
    _weave(client_for(big.key), 40)
    _weave(client_for(small.key), 3)
    _, big_bound = _sizes(big.org.id)
    small_size, _ = _sizes(small.org.id)
    assert small_size < big_bound
    cache = EngineCache(max_bytes=(small_size + big_bound) // 2, oversize_recheck_secs=0, **EXACT)
    monkeypatch.setattr(cache_mod, "_cache", cache)  # the process's cache, as the API uses it
    for _ in range(4):
        assert _resonate(client_for(small.key))["served_by"] == "engine"
        body = _resonate(client_for(big.key))
        assert body["served_by"] == "postgres" and body["hits"]  # answered, from Postgres
    # The big org was judged by its row count and never built; it evicted nothing, so the small
    # one was built once. (Before: the big one was built, evicted the small one, was dropped.)
    assert cache.stats["builds"] == 1 and cache.stats["evictions"] == 0
    assert cache.org_ids() == [small.org.id]
    mark = cache.oversize(big.org.id)
    assert mark is not None and not mark.measured and mark.nbytes > cache.max_bytes


def _over_by_build(world, client_for) -> tuple:
    """Org a whose lower bound fits the cap but whose built index does not; org b that fits."""
    a, b = world["a"], world["b"]
    _weave(client_for(a.key), 12)
    _weave(client_for(b.key), 3)
    size_a, bound_a = _sizes(a.org.id)
    size_b, _ = _sizes(b.org.id)
    cap = (size_a + bound_a) // 2
    assert bound_a < cap < size_a and size_b < cap < size_a + size_b
    return a, b, cap, size_a


def test_org_found_over_the_cap_by_its_build_is_not_built_again(world, client_for):
    a, b, cap, _ = _over_by_build(world, client_for)
    # lru: a's first build over b is what measures it (frequency admission leaves it unbuilt for
    # a demand equal to b's, served from Postgres all the same: tests/memory/test_cache_admission.py)
    cache = EngineCache(max_bytes=cap, oversize_recheck_secs=0, admission="lru",
                        **EXACT)  # its row count is read again at every query
    assert cache.get_or_none(b.org.id) is not None
    assert cache.get_or_none(a.org.id) is None  # built once, measured, not kept
    assert cache.stats["builds"] == 2 and cache.stats["oversize_builds"] == 1
    assert cache.org_ids() == [b.org.id] and cache.stats["evictions"] == 0  # b was not evicted for it
    mark = cache.oversize(a.org.id)
    assert mark is not None and mark.measured and mark.nbytes > cap
    _weave(client_for(a.key), 2, start=100)  # it grows: still cannot fit
    for _ in range(5):
        assert cache.get_or_none(a.org.id) is None
        assert cache.get_or_none(b.org.id) is not None
    assert cache.stats["builds"] == 2  # neither built again
    assert cache.nbytes() <= cap


def test_oversized_org_is_built_again_once_it_could_fit(world, client_for):
    a, _, cap, size_a = _over_by_build(world, client_for)
    cache = EngineCache(max_bytes=cap, oversize_recheck_secs=3600, **EXACT)
    assert cache.get_or_none(a.org.id) is None
    cache.max_bytes = 2 * size_a  # the operator raises the cap (a new setting, or the org shrank)
    assert cache.get_or_none(a.org.id) is None  # no recheck within the hour: no census, no build
    assert cache.stats["builds"] == 1
    cache.oversize_recheck_secs = 0
    index = cache.get_or_none(a.org.id)  # rechecked: 1.0x of its measured size fits 0.9x of the cap
    assert index is not None and cache.oversize(a.org.id) is None and cache.stats["builds"] == 2


def test_drop_forgets_that_an_org_was_oversized(world, client_for):
    """``drop()`` resets the cache (tests reuse org ids): an org id marked oversized before must not
    stay on the fallback."""
    a, _, cap, size_a = _over_by_build(world, client_for)
    cache = EngineCache(max_bytes=cap, oversize_recheck_secs=3600, **EXACT)
    assert cache.get_or_none(a.org.id) is None
    cache.max_bytes = 2 * size_a
    cache.drop()
    assert cache.oversize(a.org.id) is None and cache.get_or_none(a.org.id) is not None


def test_catch_up_past_the_cap_drops_that_index_alone(world, client_for):
    a, b = world["a"], world["b"]
    _weave(client_for(a.key), 5)
    _weave(client_for(b.key), 5)
    size_a, _ = _sizes(a.org.id)
    size_b, _ = _sizes(b.org.id)
    cache = EngineCache(max_bytes=size_a + size_b + 1, oversize_recheck_secs=3600, **EXACT)
    assert cache.get_or_none(a.org.id) is not None and cache.get_or_none(b.org.id) is not None
    _weave(client_for(b.key), 60, start=100)  # b alone outgrows the whole cap
    assert cache.get_or_none(b.org.id) is None  # caught up, over the cap: dropped, served from Postgres
    # a stays: evicting it for an index that is dropped anyway only made a rebuild a's next query.
    assert cache.org_ids() == [a.org.id] and cache.stats["evictions"] == 0
    assert cache.get_or_none(a.org.id) is not None and cache.stats["builds"] == 2
    assert cache.oversize(b.org.id).measured


def test_orgs_that_fit_share_the_cap_by_recency_and_rebuilds_are_counted(world, client_for):
    """Under NYLON_CACHE_ADMISSION=lru, orgs that each fit but not together keep LRU order; every
    build of an org evicted before is a rebuild, counted (and logged), so a working set over the cap
    shows. (The default policy serves the second org from Postgres instead: test_cache_admission.)"""
    a, b = world["a"], world["b"]
    _weave(client_for(a.key), 5)
    _weave(client_for(b.key), 5)
    size_a, _ = _sizes(a.org.id)
    size_b, _ = _sizes(b.org.id)
    cache = EngineCache(max_bytes=max(size_a, size_b) + 1, admission="lru", **EXACT)  # the policy that thrashed
    for org in (a, b, a, b):
        assert cache.get_or_none(org.org.id) is not None
        assert cache.org_ids() == [org.org.id]
    assert cache.stats["builds"] == 4 and cache.stats["rebuilds"] == 2 and cache.stats["evictions"] == 3
    assert cache.oversize(a.org.id) is None and cache.oversize(b.org.id) is None
