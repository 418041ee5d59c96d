"""Rows an import can write but the API never does: NaN/inf tension parameters must reach the
engine as finite, in-range values; a query vector of another dimension is lexical only and is
reported as a degraded embedder."""

from __future__ import annotations

import numpy as np
import pytest

from memory.cache import EngineCache, now_days
from memory.models import Node

pytestmark = pytest.mark.django_db


def _weave(client, texts):
    turns = [{"text": t} for t in texts]
    r = client.post("/api/v1/memories/weave-session", {"session_key": "s", "turns": turns}, format="json")
    assert r.status_code == 201


@pytest.mark.parametrize("field,value", [("t0", float("nan")), ("t0", float("inf")), ("t0", -5.0),
                                         ("lam", float("nan")), ("lam", float("inf")), ("lam", -1.0)])
@pytest.mark.parametrize("incremental", [False, True])
def test_nonfinite_tension_row_reaches_the_engine_finite(world, client_for, field, value, incremental):
    a = world["a"]
    _weave(client_for(a.key), ["The build server rotates logs hourly.", "Staging deploys run nightly."])
    cache = EngineCache()
    if incremental:
        cache.get(a.org.id)
    node = Node.objects.filter(org_id=a.org.id).order_by("id").first()
    Node.objects.filter(id=node.id).update(**{field: value})
    index = cache.get(a.org.id)
    assert index.n == 2
    assert np.all(np.isfinite(index.col("t0"))) and np.all(np.isfinite(index.col("lam")))
    assert index.col("t0").min() >= 0 and index.col("lam").min() >= 0
    ten = index.tension(np.arange(index.n), now_days())
    assert np.all(np.isfinite(ten))


@pytest.mark.parametrize("force_sql", [False, True])
def test_wrong_dim_query_vector_is_lexical_and_degraded(world, client_for, force_sql):
    from memory.selectors import resonate_for
    from teams.auth import actor_for_agent

    a = world["a"]
    _weave(client_for(a.key), ["The build server rotates logs hourly.", "Staging deploys run nightly."])
    actor = actor_for_agent(a.agent, scopes=frozenset({"read", "write"}))
    ref = resonate_for(actor=actor, query="build server logs", force_sql=force_sql)
    out = resonate_for(actor=actor, query="build server logs", query_vec=np.ones(7, np.float32),
                       force_sql=force_sql)
    assert out.vector_used is False
    assert out.result.hits and out.result.hits[0].node_id == ref.result.hits[0].node_id
