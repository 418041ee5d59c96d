"""Edge rows the API never writes but an import can (any float weight, any kind string) must not
break the org's cache: a catch-up that raises fails every query of the org until the row is fixed."""

from __future__ import annotations

import numpy as np
import pytest

from memory.cache import EngineCache
from memory.models import Edge, Node

pytestmark = pytest.mark.django_db


def _weave(client, n):
    turns = [{"text": f"Note {i}: the build server rotates logs every {i} hours."} for i in range(n)]
    r = client.post("/api/v1/memories/weave-session", {"session_key": "s", "turns": turns}, format="json")
    assert r.status_code == 201


@pytest.mark.parametrize("weight", [float("nan"), -1.0, float("inf"), 1e300])
@pytest.mark.parametrize("incremental", [False, True])
def test_odd_edge_weight_does_not_break_the_build_or_catch_up(world, client_for, weight, incremental):
    a = world["a"]
    _weave(client_for(a.key), 3)
    cache = EngineCache()
    if incremental:
        cache.get(a.org.id)
    ids = list(Node.objects.filter(org_id=a.org.id).order_by("id").values_list("id", flat=True))
    Edge.objects.create(org_id=a.org.id, src_id=ids[0], dst_id=ids[-1], kind="explicit", weight=weight)
    index = cache.get(a.org.id)
    assert index.n == 3
    w = index.graph.edges()[2]
    assert np.all(np.isfinite(w)) and w.min() >= 0


def test_unknown_edge_kind_does_not_break_the_build(world, client_for):
    a = world["a"]
    _weave(client_for(a.key), 2)
    ids = list(Node.objects.filter(org_id=a.org.id).order_by("id").values_list("id", flat=True))
    Edge.objects.create(org_id=a.org.id, src_id=ids[0], dst_id=ids[1], kind="imported_kind", weight=0.9)
    index = EngineCache().get(a.org.id)
    assert index.n == 2 and index.graph.n_edges >= 1
