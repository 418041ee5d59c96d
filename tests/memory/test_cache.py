from __future__ import annotations

import pytest

from memory.cache import EngineCache

pytestmark = pytest.mark.django_db


def _weave(client, n):
    turns = [{"text": f"Note {i}: the build server rotates logs every {i} hours."} for i in range(n)]
    r = client.post("/api/v1/memories/weave-session", {"session_key": "s", "turns": turns}, format="json")
    assert r.status_code == 201


def test_lru_eviction_respects_the_byte_cap(world, client_for):
    a, b = world["a"], world["b"]
    _weave(client_for(a.key), 5)
    _weave(client_for(b.key), 5)
    probe = EngineCache()
    size_a = probe.get(a.org.id).nbytes()
    size_b = probe.get(b.org.id).nbytes()
    cache = EngineCache(max_bytes=max(size_a, size_b) + 1)
    cache.get(a.org.id)
    cache.get(b.org.id)  # both do not fit: the least recently used (a) goes
    assert cache.peek(a.org.id) is None and cache.peek(b.org.id) is not None
    assert cache.stats["evictions"] == 1
    cache.get(a.org.id)  # rebuilt on demand, b evicted in turn
    assert cache.peek(b.org.id) is None and cache.stats["builds"] == 3


def test_incremental_sync_does_not_rebuild(world, client_for):
    a = world["a"]
    cache = EngineCache()
    _weave(client_for(a.key), 3)
    assert cache.get(a.org.id).n == 3
    _weave(client_for(a.key), 2)  # event-less turns: two more nodes
    index = cache.get(a.org.id)
    assert index.n == 5 and cache.stats["builds"] == 1 and cache.stats["syncs"] == 2
