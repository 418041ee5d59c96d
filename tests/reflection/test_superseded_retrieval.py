"""A memory superseded by a conflict's resolution leaves retrieval (resonate on the engine and on
the SQL fallback, the context bundle); it stays in Postgres, listed with its validity. Keeping
both or rejecting the conflict leaves both retrievable."""

from __future__ import annotations

import pytest

from assets.models import AuditEvent
from memory.cache import get_cache
from memory.models import Edge, MemorySession, Node
from memory.selectors import resonate_for
from reflection import conflicts, services
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


def _fact_of(world, client_for, leaf_id: int) -> int:
    """The session of ``leaf_id`` abstracted (heuristics, no LLM): the fact drawn from that leaf."""
    leaf = Node.objects.get(pk=leaf_id)
    services.abstract_session(session_id=MemorySession.objects.get(org=leaf.org, key=leaf.session_key).id)
    return Node.objects.get(kind="fact", source_node_ids=[leaf_id]).id


def test_a_fact_drawn_only_from_the_superseded_memory_goes_with_it(world, client_for, no_llm):
    a = world["a"]
    first, second = two_statements(world, client_for)
    fact = _fact_of(world, client_for, first)
    assert Node.objects.get(pk=fact).text == "Ana eats spicy food."
    assert fact in _hit_ids(client_for(a.key))[0]
    conflicts.detect(org_id=a.org.id, node_ids=[second])

    _resolve(world, client_for, "supersede", keep=second)
    assert Node.objects.get(pk=fact).valid_to is not None
    assert Edge.objects.filter(src_id=second, dst_id=fact, kind="supersedes").exists()
    hits, _ = _hit_ids(client_for(a.key))
    assert fact not in hits and first not in hits and second in hits
    ev = AuditEvent.objects.get(action="conflict.resolve")
    assert ev.detail["also_superseded"] == [fact]
    gov = client_for(a.key).get(f"/api/v1/memories/nodes/{fact}/governance").json()
    assert gov["validity"]["is_current"] is False and gov["validity"]["superseded_by"] == [second]


def test_a_fact_another_current_memory_supports_stays(world, client_for, no_llm):
    a = world["a"]
    first, second = two_statements(world, client_for)
    fact = _fact_of(world, client_for, first)
    other = client_for(a.key).post("/api/v1/memories/weave", {"text": "Ana orders the spiciest curry.",
                                                              "speaker": "Ana"}, format="json").json()
    # as an LLM fact drawn from two turns would be
    Node.objects.filter(pk=fact).update(source_node_ids=[first, other["node_ids"][0]])
    conflicts.detect(org_id=a.org.id, node_ids=[second])
    _resolve(world, client_for, "supersede", keep=second)
    assert Node.objects.get(pk=fact).valid_to is None
    assert "also_superseded" not in AuditEvent.objects.get(action="conflict.resolve").detail
