from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from memory.engine import (
    EdgeKind,
    NodeKind,
    NodeRecord,
    ResonateParams,
    Scope,
    TenantIndex,
    diffuse,
    resonate,
    tokenize,
)

from ._reference import dense_adjacency, ref_diffuse, ref_resonate

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron".split()


def _random_index(rng: np.random.Generator, n: int = 40, m: int = 90, dim: int = 8,
                  occurred: bool = False, days: list[float] | None = None) -> TenantIndex:
    idx = TenantIndex(dim)
    recs = []
    for i in range(n):
        when = float("nan")
        if occurred and rng.random() < 0.9:
            when = float(rng.choice(days)) + float(rng.uniform(0, 1)) if days else float(rng.uniform(0, 12))
        words = list(rng.choice(WORDS, size=int(rng.integers(2, 7))))
        if rng.random() < 0.2:
            words.append("yesterday")  # a resolvable time expression
        refs = []
        if occurred and rng.random() < 0.35:  # days the text speaks of: single days, short and long spans
            for _ in range(int(rng.integers(1, 3))):
                first = int(rng.choice(days)) if days else int(rng.integers(-1, 13))
                refs.append((first, first + int(rng.choice([0, 0, 0, 1, 6, 20]))))
        recs.append(
            NodeRecord(
                node_id=1000 + i,
                text=" ".join(words) + ("?" if i % 7 == 3 else ""),  # some only ask
                speaker=str(rng.choice(["Ann", "Bob", ""])),
                kind=int(rng.choice([0, 0, 0, 1, 2, 3])),
                owner_key=int(rng.integers(1, 3)),
                scope=int(rng.choice([Scope.PRIVATE, Scope.ORG, Scope.ORG])),
                t0=float(rng.uniform(0.5, 1.5)),
                lam=float(rng.uniform(0, 0.2)),
                last_updated=float(rng.uniform(0, 10)),
                mentions=int(rng.integers(0, 15)),
                vector=None if rng.random() < 0.15 else rng.normal(size=dim),
                session_key=int(rng.integers(0, 3)),
                seq=i,
                occurred_at=when,
                day_refs=refs,
            )
        )
    idx.upsert_nodes(recs)
    s = rng.integers(0, n, m) + 1000
    d = rng.integers(0, n, m) + 1000
    idx.add_edges(s, d, rng.uniform(0.05, 1.0, m), rng.integers(0, 9, m))
    return idx


@pytest.mark.parametrize("combine", ["sum", "max"])
@pytest.mark.parametrize("depth", [0, 1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_diffuse_matches_dense_reference(combine: str, depth: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    idx = _random_index(rng)
    n = idx.n
    allowed = rng.random(n) < 0.8
    seeds = np.flatnonzero(allowed)[:4]
    acts = rng.uniform(0.2, 1.0, seeds.size)
    W = dense_adjacency(idx)
    for budget in (64, 3):
        got = diffuse(
            idx.graph, seeds, acts, allowed, depth=depth, hop_decay=0.5, combine=combine, max_activated=budget
        )
        ref = ref_diffuse(W, seeds, acts, allowed, depth, 0.5, combine, budget)
        assert sorted(got.locals.tolist()) == sorted(ref)
        for loc, a, h, p in zip(got.locals, got.act, got.hop, got.parent, strict=True):
            ra, rh, rp = ref[int(loc)]
            assert a == pytest.approx(ra, rel=1e-12)
            assert (h, p) == (rh, rp)
        assert allowed[got.locals].all()


_LEGACY = {"w_lex": 0.5, "n_win": 0, "n_wvec": 0, "final": "blend"}  # turn channels, cosine blend
_INTERLEAVED = {"w_lex": 0.5, "w_wvec_as": "win", "w_rank_cos": 0.3}
_NO_FEEDBACK = {"n_prf": 0, "w_vprf": 0.0, "w_rank_sess": 0.0, "w_spk": 0.0, "w_time": 0.0, "w_own": 0.0}
_FEEDBACK = {"prf_docs": 4, "prf_terms": 3, "prf_beta": 0.6, "n_prf": 6, "w_rank_sess": 1.0, "sess_top": 2}


@pytest.mark.parametrize("variant", [{}, _LEGACY, _INTERLEAVED, _NO_FEEDBACK, _FEEDBACK])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_resonate_matches_reference(seed: int, depth: int, variant: dict) -> None:
    rng = np.random.default_rng(seed)
    idx = _random_index(rng)
    allowed = idx.visibility_mask(owner_keys=[1])
    opts = {"depth": depth, "n_lex": 5, "n_vec": 5, "n_win": 5, "n_wvec": 5, "max_activated": 6, "k": 8}
    params = ResonateParams(**{**opts, **variant})
    for _ in range(3):
        q = " ".join(rng.choice(WORDS, size=3))
        q = str(rng.choice(["", "When did Ann ", "What did Bo ", "Did Bob and Ann "])) + q
        qvec = rng.normal(size=8)
        for vec in (qvec, None):
            got = resonate(idx, query_text=q, query_vec=vec, allowed=allowed, params=params, now_days=12.0)
            ref = ref_resonate(idx, q, vec, allowed, params, 12.0)
            assert [h.node_id for h in got.hits] == [r[0] for r in ref]
            np.testing.assert_allclose(
                [h.score for h in got.hits], [r[1] for r in ref], rtol=1e-6, atol=1e-6
            )  # engine cosines are float32
            kinds = idx.col("kind")
            assert all(kinds[h.local] != NodeKind.BRIDGE for h in got.hits)
            assert all(allowed[h.local] for h in got.hits)
            assert all(allowed[s.local] and kinds[s.local] != NodeKind.BRIDGE for s in got.seeds)


@pytest.mark.parametrize("mode", ["pool", "search"])
@pytest.mark.parametrize("sizes", [{"n_vec": 5, "n_wvec": 5}, {"n_vec": 120, "n_wvec": 5}, {"n_vec": 5, "n_wvec": 150}])
def test_vector_feedback_pools_match_reference_past_a_hundred_nodes(mode: str, sizes: dict) -> None:
    """Both feedback pools (the first search's, of max(100, n_vec) nodes; a second search's, of
    max(100, n_wvec)) on an index larger than them: the 40-node indexes above never cut a pool."""
    rng = np.random.default_rng(7)
    idx = _random_index(rng, n=260, m=600)
    allowed = idx.visibility_mask(owner_keys=[1])
    params = ResonateParams(depth=1, n_lex=5, n_win=5, max_activated=6, k=10, vprf_pool=mode, **sizes)
    for _ in range(4):
        q = " ".join(rng.choice(WORDS, size=3))
        qvec = rng.normal(size=8)
        got = resonate(idx, query_text=q, query_vec=qvec, allowed=allowed, params=params, now_days=12.0)
        ref = ref_resonate(idx, q, qvec, allowed, params, 12.0)
        assert [h.node_id for h in got.hits] == [r[0] for r in ref]
        np.testing.assert_allclose([h.score for h in got.hits], [r[1] for r in ref], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("variant", [{}, _NO_FEEDBACK, {"w_date": 3.0, "n_lex": 3}])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_resonate_with_a_date_in_the_query_matches_reference(seed: int, variant: dict) -> None:
    rng = np.random.default_rng(seed)
    idx = _random_index(rng, occurred=True)  # nodes happened on days 0-12 after 1970-01-01
    allowed = idx.visibility_mask(owner_keys=[1])
    params = ResonateParams(**{"depth": 1, "n_lex": 5, "n_vec": 5, "n_win": 5, "n_wvec": 5, "k": 8, **variant})
    for when in ("yesterday", "on 5 January", "last week", "on Tuesday", "in March", "",
                 "on Friday, January 9", "9 times on Friday", "on Fri 9 January 1970 and on 1970"):
        q = f"what did Ann say {when} about " + " ".join(rng.choice(WORDS, size=2))
        for vec in (rng.normal(size=8), None):
            got = resonate(idx, query_text=q, query_vec=vec, allowed=allowed, params=params, now_days=12.5)
            ref = ref_resonate(idx, q, vec, allowed, params, 12.5)
            assert [h.node_id for h in got.hits] == [r[0] for r in ref], q
            np.testing.assert_allclose([h.score for h in got.hits], [r[1] for r in ref], rtol=1e-6, atol=1e-6)


def _day(y: int, m: int, d: int) -> int:
    return (date(y, m, d) - date(1970, 1, 1)).days


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_day_named_without_its_year_matches_reference(seed: int) -> None:
    # Nodes over three years, several on 5 January and 3 March of different years.
    days = [_day(y, m, d) for y in (1970, 1971, 1972) for m, d in ((1, 5), (1, 6), (3, 3), (12, 31), (2, 29))
            if not (m == 2 and y != 1972)] + [_day(1969, 12, 31), _day(1971, 7, 1)]
    rng = np.random.default_rng(seed)
    idx = _random_index(rng, occurred=True, days=days)
    allowed = idx.visibility_mask(owner_keys=[1])
    params = ResonateParams(depth=1, n_lex=5, n_vec=5, n_win=5, n_wvec=5, k=8)
    now = _day(1972, 11, 30) + 0.5  # the nearest 5 January and 3 March are next year's, where nothing is
    for when in ("on 5 January", "on March 3rd", "on the 31st of December", "on February 29", "on 5 January 1971"):
        q = f"what did Ann say {when} about " + " ".join(rng.choice(WORDS, size=2))
        for vec in (rng.normal(size=8), None):
            got = resonate(idx, query_text=q, query_vec=vec, allowed=allowed, params=params, now_days=now)
            ref = ref_resonate(idx, q, vec, allowed, params, now)
            assert [h.node_id for h in got.hits] == [r[0] for r in ref], q
            np.testing.assert_allclose([h.score for h in got.hits], [r[1] for r in ref], rtol=1e-6, atol=1e-6)


def test_a_day_named_without_its_year_is_that_day_in_every_year() -> None:
    # Asked on 1 December 2026, "March 5" resolves to the nearest one, 5 March 2027, where nothing
    # happened yet; the question is about the March 5 that memory holds.
    idx = TenantIndex(4)
    idx.upsert_nodes([
        NodeRecord(1, "Yes, my train was late.", scope=Scope.ORG, occurred_at=_day(2024, 3, 5) + 0.40),
        NodeRecord(2, "We decided to move the launch to April 2.", scope=Scope.ORG, occurred_at=_day(2024, 3, 5) + 0.41),
        NodeRecord(3, "Lol, my cat walked over the keyboard.", scope=Scope.ORG, occurred_at=_day(2024, 3, 5) + 0.42),
        NodeRecord(4, "We decided to hire a second backend engineer.", scope=Scope.ORG,
                   occurred_at=_day(2024, 3, 4) + 0.4),
        NodeRecord(5, "We decided to drop Python 3.8.", scope=Scope.ORG, occurred_at=_day(2025, 3, 5) + 0.5),
    ])
    for a, b in ((1, 2), (2, 3)):
        idx.add_edges([a], [b], [0.5], EdgeKind.TEMPORAL_NEXT)
    allowed = np.ones(idx.n, dtype=bool)
    now = _day(2026, 12, 1) + 0.5
    got = resonate(idx, query_text="What did we decide on March 5?", allowed=allowed,
                   params=ResonateParams(k=3), now_days=now)
    assert {h.node_id for h in got.hits[:2]} == {2, 5}, [(h.node_id, h.text) for h in got.hits]
    dated = resonate(idx, query_text="What did we decide on 5 March 2024?", allowed=allowed,
                     params=ResonateParams(k=3), now_days=now)
    assert dated.hits[0].node_id == 2  # a year given still means that year only
    assert 5 not in {h.node_id for h in dated.hits[:2]}


def test_named_day_does_not_drop_the_querys_own_numbers() -> None:
    # Asked on Tuesday 10 November 2026, "Friday" is Friday 6 November 2026: the query lost every
    # word of that day's date ("6 November 2026 Friday"), its own "2026" and "6" too.
    from memory.engine.resonance import _EPOCH, _named_days, _without_words_of

    now = (date(2026, 11, 10) - _EPOCH).days + 0.5
    for q, kept in [("What did we decide about the 2026 budget on Friday?", "2026"),
                    ("Did we move to PostgreSQL 6 on Friday?", "6")]:
        tokens = tokenize(q)
        assert kept in tokens
        assert kept in _without_words_of(tokens, _named_days(q, now, ResonateParams())), q
        assert kept in _without_words_of(tokens, _named_days(q, now, ResonateParams()), q), q
        assert "friday" not in _without_words_of(tokens, _named_days(q, now, ResonateParams()), q)


@pytest.mark.parametrize(("query", "left"), [
    # the weekday written before a date is part of it, as the day's nodes hold it
    ("Can I deploy to production on Friday November 20?", ["deploy", "product"]),
    ("Can I deploy on Fri, 20 November?", ["deploy"]),
    ("What did we decide last Friday, November 6?", ["decid", "last"]),
    ("What happened on Friday, the 20th of November?", ["happen"]),
    # a word the query writes outside the date stays
    ("What about the 2026 budget on 6 November 2026?", ["2026", "budget", "2026"]),
    ("What did we decide last Tuesday?", ["decid"]),
])
def test_a_named_days_own_words_leave_the_lexical_query(query: str, left: list[str]) -> None:
    from memory.engine.resonance import _EPOCH, _named_days, _without_words_of

    now = (date(2026, 11, 10) - _EPOCH).days + 0.5
    assert _without_words_of(tokenize(query), _named_days(query, now, ResonateParams()), query) == left


def test_month_day_of_day_counts_agrees_with_the_calendar() -> None:
    from datetime import timedelta

    from memory.engine.resonance import _month_day

    rng = np.random.default_rng(7)
    first, last = _day(1, 1, 1), _day(9999, 12, 31)
    occ = np.concatenate([rng.uniform(first, last + 1, 20_000), [first, last + 0.99, -0.5, 0.0, 59.0, 789.9]])
    want = [(d := date(1970, 1, 1) + timedelta(days=int(np.floor(o)))).month * 100 + d.day for o in occ]
    assert _month_day(occ).tolist() == want
    # no time, or none the calendar has: no month and day
    assert _month_day(np.array([np.nan, np.inf, -np.inf, first - 1.0, last + 1.0, 1e300])).tolist() == [-1] * 6


def test_a_named_day_brings_what_happened_that_day() -> None:
    # "What did we decide on November 24?": the decisions of that day, not every text with 24 in it.
    day = (date(2026, 11, 24) - date(1970, 1, 1)).days
    idx = TenantIndex(4)
    recs = [NodeRecord(1, "Standup 24 November: what is everyone on?", scope=Scope.ORG, occurred_at=day - 2.5),
            NodeRecord(2, "ticket 24 closed, the 24 hour window holds", scope=Scope.ORG, occurred_at=day - 5.5),
            NodeRecord(3, "We decided to move feature flags to LaunchDarkly.", scope=Scope.ORG, occurred_at=day + 0.4),
            NodeRecord(4, "Decision: Marcus now owns the billing migration.", scope=Scope.ORG, occurred_at=day + 0.6),
            NodeRecord(5, "We decided to keep the old CI runners.", scope=Scope.ORG, occurred_at=day - 7.5)]
    idx.upsert_nodes(recs)
    allowed = np.ones(idx.n, dtype=bool)
    now = day + 6.0
    got = resonate(idx, query_text="What did we decide on November 24?", allowed=allowed,
                   params=ResonateParams(k=3), now_days=now)
    assert {h.node_id for h in got.hits[:2]} == {3, 4}, [(h.node_id, h.text) for h in got.hits]
    off = resonate(idx, query_text="What did we decide on November 24?", allowed=allowed,
                   params=ResonateParams(k=3, w_date=0.0), now_days=now)
    assert {h.node_id for h in off.hits[:2]} != {3, 4}  # what the date focus adds
    last = resonate(idx, query_text="What did we decide last Tuesday?", allowed=allowed,
                    params=ResonateParams(k=2), now_days=now)  # 2026-11-30 is a Monday: Tuesday the 24th
    assert {h.node_id for h in last.hits} == {3, 4}


def _chain_index(
    with_middle: bool, middle_scope: int, middle_kind: int = NodeKind.LEAF, middle_last: bool = False
) -> TenantIndex:
    """A - M - B (M optional), plus an unrelated visible node C."""
    idx = TenantIndex(4)
    a = NodeRecord(1, "deploy pipeline broke on friday", scope=Scope.ORG, vector=[1, 0, 0, 0])
    m = NodeRecord(
        2,
        "deploy pipeline secret rotation",
        kind=middle_kind,
        scope=middle_scope,
        owner_key=99,
        vector=[1, 0.1, 0, 0],
    )
    b = NodeRecord(3, "rollback procedure for releases", scope=Scope.ORG, vector=[0, 1, 0, 0])
    c = NodeRecord(4, "team lunch on friday", scope=Scope.ORG, vector=[0, 0, 1, 0])
    recs = [a, b, c]
    if with_middle:
        recs = [a, b, c, m] if middle_last else [a, m, b, c]
    idx.upsert_nodes(recs)
    if with_middle:
        idx.add_edges([1, 2], [2, 3], [0.9, 0.9], EdgeKind.ENTITY)
    idx.add_edges([1], [4], [0.2], EdgeKind.TEMPORAL_NEXT)
    return idx


@pytest.mark.parametrize("middle_last", [False, True])
def test_hidden_node_leaks_nothing(middle_last: bool) -> None:
    with_hidden = _chain_index(True, Scope.PRIVATE, middle_last=middle_last)
    without = _chain_index(False, Scope.PRIVATE)
    params = ResonateParams(depth=3)
    q, qv = "deploy pipeline secret", np.array([1.0, 0.05, 0, 0])
    r1 = resonate(
        with_hidden,
        query_text=q,
        query_vec=qv,
        allowed=with_hidden.visibility_mask(owner_keys=[1]),
        params=params,
        now_days=0,
    )
    r2 = resonate(
        without,
        query_text=q,
        query_vec=qv,
        allowed=without.visibility_mask(owner_keys=[1]),
        params=params,
        now_days=0,
    )
    assert [h.node_id for h in r1.hits] == [h.node_id for h in r2.hits]
    np.testing.assert_allclose([h.score for h in r1.hits], [h.score for h in r2.hits], rtol=1e-6)
    assert 2 not in r1.node_ids
    assert r1.seed_ids == r2.seed_ids
    # Lexical only, B is reachable solely through M: hidden M must not be a path.
    r1 = resonate(
        with_hidden,
        query_text=q,
        allowed=with_hidden.visibility_mask(owner_keys=[1]),
        params=params,
        now_days=0,
    )
    assert 3 not in r1.node_ids and 2 not in r1.node_ids
    # Sanity: when the owner looks, M is there and carries activation to B.
    r3 = resonate(
        with_hidden,
        query_text=q,
        allowed=with_hidden.visibility_mask(owner_keys=[99]),
        params=params,
        now_days=0,
    )
    assert {2, 3} <= set(r3.node_ids)
    assert next(h for h in r3.hits if h.node_id == 3).explanation.path[-2:] == (2, 3)


def test_bridges_walkable_but_never_returned() -> None:
    bridged = _chain_index(True, Scope.ORG, middle_kind=NodeKind.BRIDGE)
    plain = _chain_index(False, Scope.ORG)
    params = ResonateParams(depth=2)
    allowed = bridged.visibility_mask(org_wide=True)
    r = resonate(bridged, query_text="deploy pipeline secret", allowed=allowed, params=params, now_days=0)
    assert 2 not in r.node_ids and 2 not in r.seed_ids  # matches the query, still never seeds
    assert 3 in r.node_ids  # reached through the bridge
    hit_b = next(h for h in r.hits if h.node_id == 3)
    assert hit_b.explanation.path == (1, 2, 3) and hit_b.explanation.hops == 2
    r0 = resonate(
        plain, query_text="deploy pipeline secret", allowed=plain.visibility_mask(), params=params, now_days=0
    )
    assert 3 not in r0.node_ids


def test_result_shape_and_limits() -> None:
    rng = np.random.default_rng(9)
    idx = _random_index(rng, n=60, m=200)
    allowed = idx.visibility_mask(org_wide=True, owner_keys=[1, 2])
    r = resonate(
        idx,
        query_text="alpha beta",
        query_vec=rng.normal(size=8),
        allowed=allowed,
        params=ResonateParams(k=500, depth=2),
        now_days=5,
    )
    assert 0 < len(r.hits) <= 100
    h = r.hits[0]
    assert set(h.explanation.parts) == {"activation", "tension", "context_match", "cosine", "final"}
    assert set(h.explanation.channels) == {"lexical", "vector", "date"}
    assert h.explanation.path[-1] == h.node_id
    # An exhausted time budget stops diffusion and flags it.
    r = resonate(
        idx,
        query_text="alpha",
        allowed=allowed,
        params=ResonateParams(depth=3, time_budget_ms=-1.0),
        now_days=5,
    )
    assert r.truncated and all(h.explanation.hops == 0 for h in r.hits)


def test_max_chars() -> None:
    idx = TenantIndex(4)
    idx.upsert_nodes(
        [NodeRecord(i, f"incident {'x' * i} " + "padding " * 11, scope=Scope.ORG) for i in (1, 2, 3)]
    )
    texts = idx.texts
    params = ResonateParams(max_chars=len(texts[0]) + 50, depth=0)
    r = resonate(idx, query_text="incident", allowed=idx.visibility_mask(), params=params, now_days=0)
    assert len(r.hits) == 2 and r.dropped_for_chars == 1
    assert r.hits[0].text in texts
    assert r.hits[1].text.endswith("[truncated]") and len(r.hits[1].text) == 50
    assert sum(len(h.text) for h in r.hits) <= params.max_chars


def test_weighted_fusion_and_empty_query() -> None:
    rng = np.random.default_rng(11)
    idx = _random_index(rng)
    allowed = idx.visibility_mask(org_wide=True, owner_keys=[1, 2])
    r = resonate(
        idx,
        query_text="gamma delta",
        query_vec=rng.normal(size=8),
        allowed=allowed,
        params=ResonateParams(fusion="weighted"),
        now_days=1,
    )
    acts = [s.activation for s in r.seeds]
    assert acts and max(acts) == 1.0 and min(acts) >= 0.1
    r = resonate(idx, query_text="", allowed=allowed, now_days=1)
    assert r.hits == () and r.seeds == ()


def test_decayed_nodes_do_not_seed_but_stay() -> None:
    idx = TenantIndex(4)
    idx.upsert_nodes(
        [
            NodeRecord(1, "kubernetes upgrade", scope=Scope.ORG, lam=1.0, last_updated=0.0),
            NodeRecord(2, "kubernetes cluster notes", scope=Scope.ORG, lam=0.0),
        ]
    )
    idx.add_edges([1], [2], [1.0])
    allowed = idx.visibility_mask()
    r = resonate(idx, query_text="kubernetes upgrade", allowed=allowed, now_days=30.0)
    assert r.seed_ids == (2,)
    assert 1 in r.node_ids  # reached by diffusion, just ranked low
    r = resonate(idx, query_text="kubernetes upgrade", allowed=allowed, now_days=0.5)
    assert r.seed_ids[0] == 1


def test_empty_index_and_no_visible_nodes() -> None:
    idx = TenantIndex(4)
    r = resonate(idx, query_text="anything", query_vec=np.ones(4), allowed=np.zeros(0, bool), now_days=0)
    assert r.hits == () and r.activated_count == 0
    idx.upsert_nodes([NodeRecord(1, "anything at all", scope=Scope.PRIVATE, owner_key=5, vector=np.ones(4))])
    r = resonate(
        idx,
        query_text="anything",
        query_vec=np.ones(4),
        allowed=idx.visibility_mask(owner_keys=[6]),
        now_days=0,
    )
    assert r.hits == () and r.seeds == ()


def test_speaker_focus_resolves_nicknames() -> None:
    """A question naming a person (by nickname) ranks that person's own turn above an equally
    matching turn of someone else."""
    idx = TenantIndex(2)
    idx.upsert_nodes(
        [
            NodeRecord(1, "painted a sunset", speaker="Caroline", vector=np.array([1.0, 0.0])),
            NodeRecord(2, "painted a sunset", speaker="Melanie", vector=np.array([1.0, 0.0])),
        ]
    )
    allowed = np.ones(2, dtype=bool)
    for q, first in (("What did Mel paint?", 2), ("What did Caroline paint?", 1)):
        got = resonate(idx, query_text=q, query_vec=np.array([1.0, 0.0]), allowed=allowed, now_days=1.0)
        assert got.node_ids[0] == first
    off = resonate(idx, query_text="What did Mel paint?", query_vec=np.array([1.0, 0.0]), allowed=allowed,
                   params=ResonateParams(w_spk=0.0), now_days=1.0)
    assert off.node_ids[0] == 1  # tie broken by position without the speaker focus
    # A speaker the caller cannot see neither matches nor makes "Mel" ambiguous.
    idx.upsert_nodes([NodeRecord(3, "painted a wall", speaker="Melvin", vector=np.array([0.0, 1.0]))])
    allowed = np.array([True, True, False])
    got = resonate(idx, query_text="What did Mel paint?", query_vec=np.array([1.0, 0.0]), allowed=allowed,
                   now_days=1.0)
    assert got.node_ids[0] == 2 and 3 not in got.node_ids


def test_rank_order_groups_near_ties_by_id() -> None:
    """Values within RANK_TIE_EPS of their predecessor rank by id (float32 noise must not decide),
    distinct values by value, and NaN / -inf last, never inside a finite value's group."""
    from memory.engine.ranking import RANK_TIE_EPS, rank_order

    v = np.array([0.5, 0.3 + RANK_TIE_EPS / 4, np.nan, 0.3, 0.9, -np.inf, 0.3 - 1e-3])
    tie = np.array([10, 5, 3, 1, 7, 2, 0])
    assert rank_order(v, tie).tolist() == [4, 0, 3, 1, 6, 5, 2]
    # Without grouping the larger of the two near-equal values would come first.
    assert np.lexsort((tie, -np.nan_to_num(v, nan=-np.inf)))[2] == 1
    assert rank_order(np.array([1.0]), np.array([0])).tolist() == [0]


def test_rank_order_is_relative_for_small_scores() -> None:
    """Diffusion scores of decayed memories sit far below 1e-6 and are still ranked by value."""
    from memory.engine.ranking import rank_order

    v = np.array([1e-9, 5e-9, 3e-9, 0.0, 0.0])
    assert rank_order(v, np.array([0, 1, 2, 3, 4])).tolist() == [1, 2, 0, 3, 4]


def test_cosines_near_zero_tie_within_an_absolute_gap() -> None:
    """A float32 dot product of unit vectors is off by ~1e-7 whatever its size: two equal cosines
    near zero differ by far more than 1e-6 relative, so cosine rankings group them absolutely."""
    from memory.engine.ranking import COSINE_TIE_ABS, rank_order

    v = np.array([1.7285e-4, 1.7290e-4, 0.3])  # equal up to float32 noise, and a distinct one
    tie = np.array([0, 1, 2])
    assert rank_order(v, tie).tolist() == [2, 1, 0]  # relative only: the noise decides
    assert rank_order(v, tie, abs_eps=COSINE_TIE_ABS).tolist() == [2, 0, 1]


def test_windows_with_the_same_members_rank_by_id_in_the_window_vector_channel(monkeypatch) -> None:
    """Two windows holding the same vectors have equal mean cosines up to float32 noise (a BLAS
    call sums a row differently at another position: the Rocchio channel met two 6e-8 apart). The
    channel orders them by id, as its reference does, not by that noise."""
    from memory.engine import windows as W

    idx = TenantIndex(4)
    rng = np.random.default_rng(3)
    idx.upsert_nodes([NodeRecord(node_id=100 + i, text=f"turn {i}", kind=0, owner_key=1, team_id=0,
                                 scope=Scope.ORG, t0=1.0, lam=0.0, last_updated=0.0, mentions=0,
                                 vector=rng.normal(size=4), session_key=5, seq=i) for i in range(3)])
    vis = np.ones(idx.n, dtype=bool)
    noisy = {0: 0.8850762844085693, 1: 0.8850763440132141, 2: 0.5}  # 0 and 1 equal but for noise
    monkeypatch.setattr(W, "window_cosine", lambda _w, _v, ids, _q, _vis: np.array([noisy[int(i)] for i in ids]))
    ids, _ = W.window_vector_top(idx.windows, idx.vectors, rng.normal(size=4), 3, vis, vis)
    assert ids.tolist() == [0, 1, 2]


def test_a_lone_write_is_its_own_session_in_the_session_scores() -> None:
    # An MCP/SDK weave without a session key: before, its session score was NaN, so the rank fusion's
    # session list put it last, and session turns that matched less passed it (an audit's lone write,
    # lexical and vector rank 1, came 5th; it is 1st with this).
    from memory.engine.resonance import _session_scores

    idx = TenantIndex(4)
    idx.upsert_nodes([
        NodeRecord(1, "production database is postgres 15", scope=Scope.ORG, session_key=7, seq=0),
        NodeRecord(2, "noted postgres 15 on db main", scope=Scope.ORG, session_key=7, seq=1),
        NodeRecord(3, "staging database upgraded to postgres 16", scope=Scope.ORG),
        NodeRecord(4, "lunch on friday", scope=Scope.ORG),
    ])
    vis = np.ones(idx.n, dtype=bool)
    from memory.engine.tokenize import tokenize

    bm = idx.bm25.query(tokenize("staging database postgres"), vis)
    cand = np.arange(idx.n, dtype=np.int64)
    sess = _session_scores(idx, cand, bm, 3)
    own = dict(zip(bm.locals.tolist(), bm.scores.tolist(), strict=True))
    assert sess[2] == pytest.approx(own[2])  # the lone write: its own score
    assert sess[0] == sess[1] == pytest.approx(own[0] + own[1])  # a session: its turns' sum
    assert np.isnan(sess[3])  # no session and no match


def test_a_question_ranks_below_the_statements_it_asks_about() -> None:
    # The proxy writes back the user's question; asked again, it matched its own words best and
    # answered nothing, above the statement that does.
    idx = TenantIndex(4)
    idx.upsert_nodes([
        NodeRecord(1, "What Postgres version does production run?", scope=Scope.ORG, vector=[1, 0, 0, 0]),
        NodeRecord(2, "Production runs Postgres 16 since the migration.", scope=Scope.ORG, vector=[0.9, 0.3, 0, 0]),
        NodeRecord(3, "Lunch is at noon.", scope=Scope.ORG, vector=[0, 0, 1, 0]),
    ])
    q = "What Postgres version does production run?"
    allowed = np.ones(idx.n, dtype=bool)
    on = resonate(idx, query_text=q, query_vec=np.array([1.0, 0, 0, 0]), allowed=allowed,
                  params=ResonateParams(k=3), now_days=0.0)
    off = resonate(idx, query_text=q, query_vec=np.array([1.0, 0, 0, 0]), allowed=allowed,
                   params=ResonateParams(k=3, w_ask=0.0), now_days=0.0)
    assert [h.node_id for h in off.hits][:2] == [1, 2]
    assert [h.node_id for h in on.hits][:2] == [2, 1]  # still recalled, below the answer


def _dated_and_undated_index() -> TenantIndex:
    """The incident report says no date; two dated lines share no word with the question, one does."""
    rng = np.random.default_rng(5)
    texts = [
        "INC-231 opened: payments api is returning 502 errors",        # the answer, undated
        "The Globex contract renewal is due on January 31",            # dated, unrelated
        "Deploys to staging move to next week",                       # dated, unrelated
        "The payments api rollback finished yesterday",                # dated, shares "payments"
        "Lunch order for the team offsite",                            # neither
    ]
    idx = TenantIndex(8)
    idx.upsert_nodes([
        NodeRecord(node_id=10 + i, text=t, speaker="", kind=0, owner_key=1, scope=Scope.ORG, t0=1.0, lam=0.0,
                   last_updated=0.0, mentions=0, vector=rng.normal(size=8), session_key=i + 1, seq=0,
                   occurred_at=float(i))
        for i, t in enumerate(texts)
    ])
    return idx


def test_the_time_bonus_goes_only_to_dated_memories_that_share_a_word_with_the_question() -> None:
    """A "When…" question gave every dated memory a bonus larger than the gaps between the top hits:
    "When did the payments outage happen?" ranked unrelated dated lines above the incident report."""
    idx = _dated_and_undated_index()
    query = "When did the payments outage happen?"

    def scores(w_time: float) -> dict[int, float]:
        res = resonate(idx, query_text=query, query_tokens=None, query_vec=qvec, allowed=np.ones(idx.n, bool),
                       params=ResonateParams(k=10, w_time=w_time, depth=0), now_days=10.0)
        return {h.node_id: h.score for h in res.hits}

    qvec = np.random.default_rng(9).normal(size=8)  # every memory is a vector candidate

    with_bonus, without = scores(1.0), scores(0.0)
    assert {10, 11, 12, 13, 14} <= set(with_bonus)
    assert with_bonus[11] == pytest.approx(without[11])  # dated, no shared word: no bonus
    assert with_bonus[12] == pytest.approx(without[12])
    assert with_bonus[13] > without[13]  # dated and about the payments api
    assert with_bonus[10] == pytest.approx(without[10])  # undated


def test_a_named_day_brings_what_a_text_says_happened_that_day() -> None:
    # "Yesterday I fixed the webhook retry bug", written on 20 November, is about the 19th (its
    # resolved reference); a line merely written on the 19th came first when only occurred_at counted.
    d19, d20 = _day(2026, 11, 19), _day(2026, 11, 20)
    idx = TenantIndex(4)
    idx.upsert_nodes([
        NodeRecord(1, "Yesterday I fixed the webhook retry bug.", speaker="Ben", scope=Scope.ORG,
                   occurred_at=d20 + 0.4, day_refs=[(d19, d19)]),
        NodeRecord(2, "Lunch order is in, pizza again.", speaker="Ben", scope=Scope.ORG, occurred_at=d19 + 0.5),
        NodeRecord(3, "This week was busy with the billing audit.", speaker="Ben", scope=Scope.ORG,
                   occurred_at=d19 + 3.6, day_refs=[(d19 - 3, d19 + 3)]),  # a week: not on the 19th
        NodeRecord(4, "Standup moved to 10am.", speaker="Ann", scope=Scope.ORG, occurred_at=d20 + 0.7),
        # written before the day: what was expected of it, not what happened then
        NodeRecord(5, "Ben will fix the invoice export on November 19.", speaker="Ben", scope=Scope.ORG,
                   occurred_at=d19 - 4 + 0.5, day_refs=[(d19, d19)]),
    ])
    allowed = np.ones(idx.n, dtype=bool)
    now = _day(2026, 11, 26) + 0.5
    def dated(query: str) -> tuple[list[int], set[int]]:
        got = resonate(idx, query_text=query, allowed=allowed, params=ResonateParams(k=5), now_days=now)
        return [h.node_id for h in got.hits], {h.node_id for h in got.hits if h.explanation.channels["date"]}

    ids, of_day = dated("What did Ben fix on November 19?")
    assert ids[0] == 1, ids
    assert of_day == {1, 2}  # said to have happened then, or written then; not the week, not the plan
    # A day named without its year finds a reference to that one day too.
    assert dated("What happened on 19 November?")[1] == {1, 2}
    # Last week (16-22 November, asked on the 26th) holds every one of those days, the week's too.
    assert dated("What did we do last week?")[1] == {1, 2, 3, 4}
