"""Deleting the memory a conflict's resolution kept hands the superseded one its place back.
"I don't eat spicy food." superseded "I eat spicy food."; deleting the correction then left no
answer at all: the old statement stayed retired (``valid_to`` set) by a decision about a memory
that no longer exists. Now it is current again, on the warm engine cache and the SQL fallback,
audited (``memory.reinstate``) and published; unless another memory that still exists superseded it
too, or the deleted memory was itself no longer current. A fact drawn from it comes back with it."""

from __future__ import annotations

import pytest
from django.test import Client

from assets.models import AuditEvent
from memory.models import MemorySession, Node
from memory.selectors import resonate_for
from reflection import conflicts, services
from reflection.models import Conflict
from teams.auth import Actor

from .helpers import weave
from .test_conflicts import two_statements

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

QUERY = "Does Ana eat spicy food?"


def _hits(client) -> set[int]:
    r = client.post("/api/v1/memories/resonate", {"query": QUERY, "k": 10, "reinforce": False}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["served_by"] == "engine"
    return {h["node_id"] for h in r.json()["hits"]}


def _supersede(client, older: int, newer: int, keep: int) -> None:
    """A conflict between the two, resolved by keeping ``keep`` (through the API)."""
    a, b = sorted((older, newer))
    c = Conflict.objects.create(org=Node.objects.get(pk=a).org, node_a_id=a, node_b_id=b, reason="test",
                                detector="rule")
    r = client.post(f"/api/v1/conflicts/{c.id}/resolve", {"action": "supersede", "keep": keep}, format="json")
    assert r.status_code == 200, r.content


def _current(node_id: int) -> bool:
    return Node.objects.get(pk=node_id).valid_to is None


def _third(client, text: str) -> int:
    """A third statement of Ana's, a month after the second."""
    return weave(client, "s3", turns=[{"speaker": "Ana", "text": text, "occurred_at": "2023-07-08T10:00:00Z"}],
                 end=False)["node_ids"][0]


def test_deleting_the_kept_memory_makes_the_superseded_one_current_again(world, client_for, no_llm):
    a = world["a"]
    c = client_for(a.key)
    first, second = two_statements(world, client_for)
    assert conflicts.detect(org_id=a.org.id, node_ids=[second]) == 1
    conflict = Conflict.objects.get()
    r = c.post(f"/api/v1/conflicts/{conflict.id}/resolve", {"action": "supersede", "keep": second}, format="json")
    assert r.status_code == 200, r.content
    hits = _hits(c)  # the engine's index, warm from here on
    assert second in hits and first not in hits

    r = c.delete(f"/api/v1/memories/nodes/{second}")
    assert r.status_code == 204

    assert _current(first)
    assert first in _hits(c) and second not in _hits(c)  # the warm cache caught up
    actor = Actor(org=a.org, agent=a.agent)
    sql = {h.node_id for h in resonate_for(actor=actor, query=QUERY, force_sql=True).result.hits}
    assert first in sql and second not in sql
    gov = c.get(f"/api/v1/memories/nodes/{first}/governance").json()
    assert gov["validity"]["is_current"] is True
    delete = AuditEvent.objects.get(action="memory.delete", object_id=str(second))
    assert delete.detail == {"reinstated": [first]}
    back = AuditEvent.objects.get(action="memory.reinstate")
    assert (back.object_id, back.reason, back.detail) == (str(first), "superseder_deleted", {"superseded_by": second})
    assert back.actor_label == delete.actor_label and back.request_id == delete.request_id
    # The conflict stays as it was decided: history, not a queue item about a deleted memory.
    assert Conflict.objects.get().status == "superseded"


def test_a_fact_superseded_with_its_turn_comes_back_with_it(world, client_for, no_llm):
    a = world["a"]
    c = client_for(a.key)
    first, second = two_statements(world, client_for)
    leaf = Node.objects.get(pk=first)
    services.abstract_session(session_id=MemorySession.objects.get(org=leaf.org, key=leaf.session_key).id)
    fact = Node.objects.get(kind="fact", source_node_ids=[first]).id
    _supersede(c, first, second, keep=second)
    assert not _current(fact)  # superseded with its only source

    assert c.delete(f"/api/v1/memories/nodes/{second}").status_code == 204
    assert _current(first) and _current(fact)
    assert {first, fact} <= _hits(c)
    assert sorted(AuditEvent.objects.get(action="memory.delete", object_id=str(second)).detail["reinstated"]) == sorted(
        [first, fact])


def test_another_current_superseder_keeps_it_retired(world, client_for, no_llm):
    c = client_for(world["a"].key)
    first, second = two_statements(world, client_for)
    third = _third(c, "I never eat spicy food now.")
    _supersede(c, first, second, keep=second)
    _supersede(c, first, third, keep=third)  # a second decision against the same memory

    assert c.delete(f"/api/v1/memories/nodes/{second}").status_code == 204
    assert not _current(first)  # the third still holds it retired
    assert not AuditEvent.objects.filter(action="memory.reinstate").exists()
    assert "reinstated" not in (AuditEvent.objects.get(action="memory.delete", object_id=str(second)).detail or {})

    assert c.delete(f"/api/v1/memories/nodes/{third}").status_code == 204
    assert _current(first)  # no memory left that replaced it


def test_deleting_a_memory_that_was_itself_replaced_reinstates_nothing(world, client_for, no_llm):
    c = client_for(world["a"].key)
    first, second = two_statements(world, client_for)
    third = _third(c, "Spicy food is fine again for me.")
    _supersede(c, first, second, keep=second)
    _supersede(c, second, third, keep=third)  # the correction was corrected in turn

    assert c.delete(f"/api/v1/memories/nodes/{second}").status_code == 204
    assert not _current(first) and _current(third)  # the chain goes on through the third
    assert not AuditEvent.objects.filter(action="memory.reinstate").exists()

    # Deleting the third: the second is deleted, so what it had replaced is the latest left.
    assert c.delete(f"/api/v1/memories/nodes/{third}").status_code == 204
    assert _current(first)
    assert AuditEvent.objects.get(action="memory.reinstate").detail == {"superseded_by": third}


def test_the_console_says_what_came_back(world, client_for, no_llm):
    a = world["a"]
    first, second = two_statements(world, client_for, key=a.owner)  # the owner's own memories
    _supersede(client_for(a.owner), first, second, keep=second)
    browser = Client()
    browser.force_login(a.owner)
    r = browser.post(f"/console/memories/{second}/delete", follow=True)
    assert r.status_code == 200
    assert f"Memory #{first}, which it had superseded, is current again." in r.content.decode()
    assert _current(first)


def test_a_fact_deleted_with_its_turn_hands_back_the_fact_it_had_superseded(world, client_for, no_llm):
    c = client_for(world["a"].key)
    first, second = two_statements(world, client_for)
    facts = []
    for leaf_id in (first, second):
        leaf = Node.objects.get(pk=leaf_id)
        services.abstract_session(session_id=MemorySession.objects.get(org=leaf.org, key=leaf.session_key).id)
        facts.append(Node.objects.get(kind="fact", source_node_ids=[leaf_id]).id)
    _supersede(c, facts[0], facts[1], keep=facts[1])  # a decision between the two facts only

    assert c.delete(f"/api/v1/memories/nodes/{second}").status_code == 204
    assert Node.objects.get(pk=facts[1]).deleted_at is not None  # drawn only from the deleted turn
    assert _current(facts[0])
    delete = AuditEvent.objects.get(action="memory.delete", object_id=str(second))
    assert delete.detail == {"derived_deleted": [facts[1]], "reinstated": [facts[0]]}


def test_the_console_counts_what_came_back_that_the_user_cannot_read(world, client_for, no_llm):
    a = world["a"]
    agent = client_for(a.key)
    mine = weave(agent, "s1", turns=[{"speaker": "Ana", "text": "I eat spicy food.",
                                      "occurred_at": "2023-05-08T10:00:00Z"}], end=False)["node_ids"][0]
    theirs = weave(client_for(a.member), "s2", end=False, visibility="org", turns=[
        {"speaker": "Ana", "text": "I don't eat spicy food.", "occurred_at": "2023-06-08T10:00:00Z"}])["node_ids"][0]
    _supersede(agent, mine, theirs, keep=theirs)  # the agent may change its own memory
    assert client_for(a.member).get(f"/api/v1/memories/nodes/{mine}").status_code == 404  # private to the agent

    browser = Client()
    browser.force_login(a.member)
    page = browser.post(f"/console/memories/{theirs}/delete", follow=True).content.decode()
    assert "1 memory it had superseded, which you cannot read, is current again." in page
    assert f"#{mine}" not in page
    assert _current(mine)
