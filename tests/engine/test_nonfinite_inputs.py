"""Non-finite or out-of-range inputs the API never produces but an import can: tension parameters
(t0, lam) that are NaN/inf/negative, and a query vector of another dimension."""

from __future__ import annotations

import numpy as np
import pytest

from memory.engine import NodeRecord, ResonateParams, Scope, TenantIndex, resonate
from memory.engine.tension import DEFAULT_LAM, DEFAULT_T0, MAX_LAM, MAX_T0, sanitize_tension_params

NOW = 10.0


def _rec(i: int, text: str, **kw) -> NodeRecord:
    d = dict(node_id=i, text=text, kind=0, owner_key=1, scope=Scope.ORG, t0=1.0, lam=0.0,
             last_updated=0.0, mentions=0, vector=np.ones(4) + 0.1 * i * np.arange(4), session_key=0, seq=i)
    d.update(kw)
    return NodeRecord(**d)


def _result(idx: TenantIndex, q: str = "alpha", qvec=None, **params):
    return resonate(idx, query_text=q, query_vec=qvec, allowed=idx.visibility_mask(owner_keys=[1]),
                    params=ResonateParams(**params), now_days=NOW)


def _hits(idx: TenantIndex, q: str = "alpha", qvec=None, **params) -> list[int]:
    return [h.node_id for h in _result(idx, q, qvec, **params).hits]


def test_sanitize_tension_params() -> None:
    t0, lam = sanitize_tension_params([np.nan, np.inf, -np.inf, -1.0, 1e300, 2.5],
                                      [np.nan, np.inf, -np.inf, -1.0, 1e300, 0.3])
    assert t0.tolist() == [DEFAULT_T0, DEFAULT_T0, DEFAULT_T0, 0.0, MAX_T0, 2.5]
    assert lam.tolist() == [DEFAULT_LAM, DEFAULT_LAM, DEFAULT_LAM, 0.0, MAX_LAM, 0.3]


@pytest.mark.parametrize("kw", [
    dict(t0=float("nan")), dict(t0=float("inf")), dict(lam=float("nan")), dict(lam=float("-inf")),
    dict(lam=float("inf"), last_updated=NOW), dict(lam=float("inf"), last_updated=NOW + 1.0),
    dict(t0=1e308, lam=-1e3),
])
def test_nonfinite_tension_params_give_finite_tension(kw) -> None:
    idx = TenantIndex(4)
    idx.upsert_nodes([_rec(1, "alpha alpha alpha", **kw), _rec(2, "alpha beta gamma")])
    ten = idx.tension(np.arange(idx.n), NOW)
    assert np.all(np.isfinite(ten)) and np.all(ten >= 0)
    assert np.all(np.isfinite(idx.col("t0"))) and np.all(np.isfinite(idx.col("lam")))


@pytest.mark.parametrize("kw", [dict(t0=float("nan")), dict(lam=float("nan")),
                                dict(lam=float("inf"), last_updated=NOW)])
@pytest.mark.parametrize("final", ["rank", "blend"])
def test_nonfinite_tension_node_is_not_sunk_to_last(kw, final) -> None:
    # Node 1 is the clear best match; a NaN tension ranked it last in rank mode.
    idx = TenantIndex(4)
    idx.upsert_nodes([_rec(1, "alpha alpha alpha", **{"last_updated": NOW, **kw}), _rec(2, "alpha beta gamma delta"),
                      _rec(3, "alpha zzz yyy xxx www")])
    got = _hits(idx, qvec=np.ones(4), final=final)
    assert got[0] == 1 and sorted(got) == [1, 2, 3]


def test_ranking_unchanged_for_normal_tension_params() -> None:
    recs = [_rec(i, f"alpha {'beta ' * i}", t0=0.5 + 0.1 * i, lam=0.01 * i, last_updated=float(i)) for i in range(1, 6)]
    idx = TenantIndex(4)
    idx.upsert_nodes(recs)
    for i, r in enumerate(recs):
        assert idx.col("t0")[i] == r.t0 and idx.col("lam")[i] == r.lam


def test_blend_survives_an_infinite_score() -> None:
    # Bypass the upsert boundary: an inf tension made base = score / inf, every other node NaN or 0.
    idx = TenantIndex(4)
    idx.upsert_nodes([_rec(1, "alpha alpha alpha"), _rec(2, "alpha beta gamma delta"), _rec(3, "alpha zzz yyy")])
    idx._cols["t0"].view[1] = np.inf
    r = _result(idx, qvec=np.ones(4), final="blend")
    assert sorted(h.node_id for h in r.hits) == [1, 2, 3]
    scores = {h.node_id: h.score for h in r.hits}
    assert np.all(np.isfinite(list(scores.values())))
    assert scores[1] > 0.5 and scores[3] > 0.5  # not NaN or swamped to the cosine term alone


@pytest.mark.parametrize("final", ["rank", "blend"])
@pytest.mark.parametrize("dim", [3, 5, 768])
def test_wrong_dim_query_vector_is_lexical_only(final, dim) -> None:
    idx = TenantIndex(4)
    idx.upsert_nodes([_rec(1, "alpha alpha"), _rec(2, "beta gamma"), _rec(3, "alpha delta")])
    got = _hits(idx, qvec=np.ones(dim), final=final)
    assert got == _hits(idx, qvec=None, final=final)
    r = _result(idx, qvec=np.ones(dim), final=final)
    assert all(s.vector_rank is None for s in r.seeds)
