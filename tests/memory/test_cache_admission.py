"""Admission under memory pressure: orgs that each fit under NYLON_CACHE_MAX_BYTES but together do
not. Plain LRU rebuilt one on every switch between them; the frequency rule keeps the hot set
built, answers the others from Postgres (the same hits) and builds one once it is asked for often
enough. Real Postgres, the served read path (``memory.selectors.resonate_for``)."""

from __future__ import annotations

import pytest

import memory.cache as cache_mod
from memory.cache import ADMISSION_MARGIN, EngineCache, stem_cache_size
from memory.engine import TenantIndex
from memory.models import EMBEDDING_DIM

pytestmark = pytest.mark.django_db

TOPICS = ("invoice", "staging", "payroll", "backup", "venue")
QUERY = "Who moved the lighthouse?"


@pytest.fixture
def lexical_only():
    """NYLON_EMBEDDER=none: admission does not depend on vectors, and with the lexical channel alone
    the engine and the Postgres fallback seed from the same matching rows, so their hits compare."""
    from memory.embedding import NullEmbedder, get_embedder, set_embedder

    old = get_embedder()
    set_embedder(NullEmbedder())
    yield
    set_embedder(old)


def _orgs(n: int) -> list:
    """n orgs of the same shape (8 turns, three naming the lighthouse), each with its own topic words,
    written through the service write path; returns (org, actor) pairs."""
    from django.contrib.auth import get_user_model

    from memory.services import TurnIn, weave_session
    from teams import services as team_services
    from teams.auth import actor_for_user

    out = []
    for i in range(n):
        owner = get_user_model().objects.create_user(f"adm{i}", f"adm{i}@example.com", "pw-adm-123")
        org = team_services.organization_create(name=f"Adm {i}", slug=f"adm-{i}", owner=owner)
        topic = TOPICS[i % len(TOPICS)]
        turns = [TurnIn(speaker="Ana" if j % 2 else "Ben",
                        text=(f"Org {i}: the lighthouse {topic} rota moved to day {j + 3}." if j in (1, 4, 6)
                              else f"Org {i} note {j}: the {topic} review of batch {j * 7 + i} is done."))
                 for j in range(8)]
        actor = actor_for_user(owner, org)
        weave_session(actor=actor, turns=turns, session_key="s", visibility="org")
        out.append((org, actor))
    return out


def _measure(orgs: list) -> tuple[dict, dict, dict]:
    """Each org's built size, its lower bound, and the hit ids of QUERY served by a cached build."""
    from memory.selectors import resonate_for

    probe = EngineCache(max_bytes=1 << 40, count_stem_cache=False)
    old, cache_mod._cache = cache_mod._cache, probe
    try:
        sizes, bounds, ref = {}, {}, {}
        for org, actor in orgs:
            index = probe.get(org.id)
            sizes[org.id] = index.nbytes()
            bounds[org.id] = TenantIndex.estimate_nbytes(nodes=index.n, dim=EMBEDDING_DIM)
            out = resonate_for(actor=actor, query=QUERY, k=5, depth=0)
            assert out.served_by == "engine" and out.result.hits
            ref[org.id] = _ids(out)
    finally:
        cache_mod._cache = old
    return sizes, bounds, ref


def _ids(out) -> list[int]:
    """The hits found by the query's words (a lexical rank), in rank order: both paths find and
    rank the same memories. The engine adds neighbours of theirs from its other seed channels (the
    session windows) after them, which the Postgres fallback has not (memory.fallback), so those
    are left out of the comparison."""
    return [h.node_id for h in out.result.hits if h.explanation.channels.get("lexical") is not None]


def _ask(cache: EngineCache, pair) -> tuple[str, list[int]]:
    from memory.selectors import resonate_for

    old, cache_mod._cache = cache_mod._cache, cache
    try:
        out = resonate_for(actor=pair[1], query=QUERY, k=5, depth=0)
    finally:
        cache_mod._cache = old
    return out.served_by, _ids(out)


def _pressure(lexical_only, admission: str, slack=None):
    """Five orgs, a cap that holds the first two (the hot set) and less than any other's lower bound
    besides (or ``slack(bounds, sizes)`` bytes); the cache under test, the hot pair built and asked
    for three times each."""
    orgs = _orgs(5)
    sizes, bounds, ref = _measure(orgs)
    hot, cold = orgs[:2], orgs[2:]
    room = min(bounds[o.id] for o, _ in cold) // 2 if slack is None else slack(bounds, sizes)
    cap = sizes[hot[0][0].id] + sizes[hot[1][0].id] + room
    # each fits alone, no cold org fits beside both hot ones
    assert all(sizes[o.id] < cap for o, _ in orgs)
    assert all(sizes[o.id] > room for o, _ in cold)
    cache = EngineCache(max_bytes=cap, admission=admission, count_stem_cache=False)
    for _ in range(3):
        for pair in hot:
            assert _ask(cache, pair) == ("engine", ref[pair[0].id])
    assert cache.stats["builds"] == 2
    return cache, hot, cold, ref


def _alternate(cache, hot, cold, ref, rounds: int = 6) -> list[str]:
    """hot, hot, a cold one, ... (each cold org every third round): what served each cold request."""
    served = []
    for r in range(rounds):
        pair = cold[r % len(cold)]
        for h in hot:
            by, ids = _ask(cache, h)
            assert ids == ref[h[0].id]
        by, ids = _ask(cache, pair)
        assert ids == ref[pair[0].id], (by, ids, ref[pair[0].id])  # the same hits, whoever serves them
        served.append(by)
    return served


def test_hot_set_stays_built_and_cold_orgs_are_answered_from_postgres(lexical_only):
    cache, hot, cold, ref = _pressure(lexical_only, "frequency")
    served = _alternate(cache, hot, cold, ref, rounds=9)
    assert served == ["postgres"] * 9
    # Not one build after the hot pair's first: no eviction, no rebuild on any switch.
    assert cache.stats["builds"] == 2 and cache.stats["rebuilds"] == 0 and cache.stats["evictions"] == 0
    assert cache.stats["admission_refused"] == 9 and cache.stats["admitted_free"] == 2
    assert sorted(cache.org_ids()) == sorted(o.id for o, _ in hot)
    health = cache.health()
    assert health["status"] == "degraded" and "NYLON_CACHE_MAX_BYTES" in health["detail"]
    assert health["pressure"]["orgs_refused"] == 3 and health["pressure"]["rebuilds"] == 0
    assert health["pressure"]["working_set_bytes"] > cache.max_bytes


def test_plain_lru_rebuilds_on_every_switch(lexical_only):
    """The baseline the rule replaces, still selectable (NYLON_CACHE_ADMISSION=lru)."""
    cache, hot, cold, ref = _pressure(lexical_only, "lru")
    served = _alternate(cache, hot, cold, ref, rounds=6)
    assert served == ["engine"] * 6
    # every cold request evicts a hot org, rebuilt at its next request
    assert cache.stats["rebuilds"] >= 6 and cache.stats["builds"] >= 2 + 6 + 6
    assert cache.stats["admission_refused"] == 0
    health = cache.health()
    assert health["status"] == "degraded" and health["pressure"]["rebuilds"] >= 6


def test_an_org_asked_for_often_enough_is_admitted(lexical_only):
    cache, hot, cold, ref = _pressure(lexical_only, "frequency")
    _alternate(cache, hot, cold, ref, rounds=6)
    riser = cold[0]
    first_engine = None
    for i in range(200):
        victim = cache.org_ids()[0]  # least recently used: the one its build would evict
        by, ids = _ask(cache, riser)
        assert ids == ref[riser[0].id]
        # admitted exactly when its count (this request included) passed the margin over the victim's
        earned = cache.frequency(riser[0].id) > ADMISSION_MARGIN * cache.frequency(victim)
        assert (by == "engine") == earned, (i, cache.frequency(riser[0].id), cache.frequency(victim))
        if by == "engine":
            first_engine = i
            break
    assert first_engine is not None and first_engine > 0  # not at once: it had to earn it
    assert riser[0].id in cache.org_ids() and cache.stats["admitted_over"] == 1
    assert cache.stats["builds"] == 3 and cache.stats["rebuilds"] == 0 and cache.stats["evictions"] == 1
    for _ in range(5):  # it stays
        assert _ask(cache, riser)[0] == "engine"
    assert cache.stats["builds"] == 3


def test_a_build_bigger_than_predicted_does_not_evict_a_hotter_index(lexical_only):
    """A cold org never built here is judged by its lower bound; one whose bound fits the room left
    but whose built index does not serves that request and is dropped, instead of evicting a hot
    index (which would then be rebuilt); its measured size sends it to Postgres from then on."""
    def between(bounds, sizes):
        room = (max(bounds.values()) + min(sizes.values())) // 2
        assert all(bounds[o] < room < sizes[o] for o in sizes)  # built indexes are >= 1.5x their bound
        return room
    cache, hot, cold, ref = _pressure(lexical_only, "frequency", slack=between)
    pair = cold[0]
    assert _ask(cache, pair) == ("engine", ref[pair[0].id])  # built for this request, not kept
    assert cache.stats["builds"] == 3 and cache.stats["admission_dropped"] == 1
    assert sorted(cache.org_ids()) == sorted(o.id for o, _ in hot) and cache.stats["evictions"] == 0
    assert _ask(cache, pair) == ("postgres", ref[pair[0].id])  # judged by its measured size now
    assert cache.stats["builds"] == 3 and cache.stats["admission_refused"] == 1
    for h in hot:
        assert _ask(cache, h)[0] == "engine"
    assert cache.stats["builds"] == 3
    # The dropped build was never kept, so never evicted: its first kept build is no "rebuild after
    # an eviction" (which /healthz reports as pressure).
    cache.get(pair[0].id)
    assert cache.stats["builds"] == 4 and cache.stats["rebuilds"] == 0


def test_stem_cache_is_reported_and_counted_against_the_cap():
    from memory.engine.tokenize import tokenize

    before = stem_cache_size()
    assert before["status"] == "ok", before
    tokenize(" ".join(f"zqadmission{i}word" for i in range(50)))  # 50 words the memo has not seen
    after = stem_cache_size()
    assert after["entries"] == before["entries"] + 50 or after["entries"] <= 50  # (or it was cleared when full)
    assert after["bytes"] > 0
    counted = EngineCache(max_bytes=1 << 30).info()
    assert counted["stem_cache"]["counted"] and counted["stem_cache"]["entries"] == after["entries"]
    assert counted["index_budget_bytes"] < 1 << 30
    assert EngineCache(max_bytes=1 << 30, count_stem_cache=False).info()["index_budget_bytes"] == 1 << 30


def test_the_budget_measures_the_stem_memo_at_most_every_ttl(monkeypatch):
    # Measuring the memo walks its entries (~40 ms at 50,000), and every catch-up after a write asks
    # for the budget twice: the measure is reused for STEM_SIZE_TTL_SECS.
    from memory import cache as cache_mod

    calls = []
    monkeypatch.setattr(cache_mod, "stem_cache_size", lambda: calls.append(1) or {"status": "ok", "bytes": 1000})
    clock = [1000.0]
    monkeypatch.setattr(cache_mod.time, "monotonic", lambda: clock[0])
    cache = EngineCache(max_bytes=1 << 20)
    assert [cache._budget() for _ in range(50)] == [(1 << 20) - 1000] * 50
    assert cache.info()["stem_cache"]["bytes"] == 1000 and len(calls) == 1
    clock[0] += cache_mod.STEM_SIZE_TTL_SECS
    cache._budget()
    assert len(calls) == 2
