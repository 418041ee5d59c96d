from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.utils import timezone

from memory import nearest
from memory.models import Node

pytestmark = pytest.mark.django_db

DIM = 384


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _store(world_org, vectors: np.ndarray) -> list[int]:
    now = timezone.now()
    made = Node.objects.bulk_create([
        Node(org=world_org.org, owner_agent=world_org.agent, text=f"n{i}", occurred_at=now,
             tension_updated_at=now, embedding=v, embedded=True) for i, v in enumerate(vectors)])
    return [n.id for n in made]


def _nearest(org, agent, q: np.ndarray, k: int) -> list[tuple[int, float]]:
    vec = nearest.vector_literal(q)
    with connection.cursor() as cur:
        cur.execute(nearest.nearest_sql(where="m.org_id = %(org)s AND m.owner_agent_id = %(owner)s",
                                        query="%(vec)s::vector", limit="%(k)s"),
                    {"org": org.id, "owner": agent.id, "vec": vec, "k": k})
        return cur.fetchall()


@pytest.mark.parametrize("force_hnsw", [False, True])
def test_matches_brute_force_among_a_crowd_of_other_tenants(world, force_hnsw):
    """The owner's nearest rows, exactly, whatever plan Postgres picks, with another org's vectors
    clustered right around every query."""
    rng = np.random.default_rng(3)
    mine = _unit(rng.normal(size=(150, DIM)))
    ids = np.array(_store(world["a"], mine))
    queries = _unit(rng.normal(size=(12, DIM)))
    crowd = _unit(np.repeat(queries, 40, axis=0) + rng.normal(scale=0.02, size=(12 * 40, DIM)))
    _store(world["b"], crowd)
    if force_hnsw:
        connection.cursor().execute("SET LOCAL enable_sort = off")
    for q in queries:
        got = _nearest(world["a"].org, world["a"].agent, q, 5)
        sims = mine @ q
        want = ids[np.argsort(-sims, kind="stable")[:5]]
        assert [i for i, _ in got] == want.tolist()
        assert np.allclose([s for _, s in got], np.sort(sims)[::-1][:5], atol=1e-5)


def test_beyond_the_recent_window_the_index_still_answers(world, monkeypatch):
    """Rows older than the exact window are found through the HNSW index."""
    rng = np.random.default_rng(5)
    mine = _unit(rng.normal(size=(60, DIM)))
    ids = _store(world["a"], mine)
    monkeypatch.setattr(nearest, "RECENT_WINDOW", 10)  # the 50 oldest are outside it
    got = _nearest(world["a"].org, world["a"].agent, mine[0], 3)
    assert got[0][0] == ids[0] and got[0][1] == pytest.approx(1.0, abs=1e-5)
    assert len(got) == 3


def test_other_owners_and_orgs_are_never_returned(world):
    rng = np.random.default_rng(9)
    _store(world["b"], _unit(rng.normal(size=(20, DIM))))
    assert _nearest(world["a"].org, world["a"].agent, _unit(rng.normal(size=(1, DIM)))[0], 5) == []
