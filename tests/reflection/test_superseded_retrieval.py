"""A memory superseded by a conflict's resolution leaves retrieval (resonate on the engine and on
the SQL fallback, the context bundle); it stays in Postgres, listed with its validity. Keeping
both or rejecting the conflict leaves both retrievable."""

from __future__ import annotations

import pytest

from memory.cache import get_cache
from memory.selectors import resonate_for
from reflection import conflicts
from reflection.models import Conflict
from teams.auth import Actor

from .test_conflicts import two_statements

pytestmark = pytest.mark.django_db

QUERY = "Does Ana eat spicy food?"


def _hit_ids(client) -> tuple[set[int], str]:
    r = client.post("/api/v1/memories/resonate", {"query": QUERY, "k": 10}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    return {h["node_id"] for h in body["hits"]}, body["served_by"]


def _context_text(client) -> str:
    r = client.post("/api/v1/context", {"query": QUERY}, format="json")
    assert r.status_code == 200, r.content
    return str(r.json())


def _resolve(world, client_for, action: str, keep: int | None = None):
    cid = Conflict.objects.get().id
    body = {"action": action} | ({"keep": keep} if keep else {})
    r = client_for(world["a"].key).post(f"/api/v1/conflicts/{cid}/resolve", body, format="json")
    assert r.status_code == 200, r.content


def test_a_superseded_memory_is_no_longer_retrieved(world, client_for, no_llm):
    a = world["a"]
    first, second = two_statements(world, client_for)
    c = client_for(a.key)
    get_cache().drop()
    hits, served = _hit_ids(c)
    assert {first, second} <= hits and served == "engine"  # the engine's index holds both
    conflicts.detect(org_id=a.org.id, node_ids=[second])

    _resolve(world, client_for, "supersede", keep=second)
    hits, served = _hit_ids(c)  # the same cached index, caught up with the resolution
    assert served == "engine" and second in hits and first not in hits
    context = _context_text(c)
    assert "I don't eat spicy food." in context and "I eat spicy food." not in context

    actor = Actor(org=a.org, agent=a.agent)
    sql = {h.node_id for h in resonate_for(actor=actor, query=QUERY, force_sql=True).result.hits}
    assert second in sql and first not in sql

    # Still there for whoever looks it up: listed, and its governance says what replaced it.
    node = c.get(f"/api/v1/memories/nodes/{first}").json()
    assert node["silks"]["temporal"]["valid_to"] is not None
    gov = c.get(f"/api/v1/memories/nodes/{first}/governance").json()
    assert gov["validity"]["is_current"] is False and gov["validity"]["superseded_by"] == [second]


@pytest.mark.parametrize("action", ["keep_both", "reject"])
def test_keeping_both_or_rejecting_leaves_both_retrievable(world, client_for, no_llm, action):
    first, second = two_statements(world, client_for)
    conflicts.detect(org_id=world["a"].org.id, node_ids=[second])
    _resolve(world, client_for, action)
    hits, _ = _hit_ids(client_for(world["a"].key))
    assert {first, second} <= hits
