"""Without an LLM a fact restates one turn; recalled beside that turn it only took a recall slot
(a re-audit's recall: five copies of one sprint line, a fact beside each decision)."""

from __future__ import annotations

import pytest

from memory.models import Node, NodeKind, SourceKind
from reflection.services import abstract_session

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]


def test_a_heuristic_fact_is_not_recalled_beside_its_own_turn(world, client_for):
    a = world["a"]
    c = client_for(a.key)
    r = c.post("/api/v1/memories/weave-session", {"session_key": "s1", "visibility": "org", "turns": [
        {"speaker": "planner", "text": "We decided to move the feature flags to LaunchDarkly."},
        {"speaker": "coder", "text": "Sounds good."},
    ]}, format="json")
    leaf = r.json()["node_ids"][0]
    from memory.models import MemorySession

    abstract_session(session_id=MemorySession.objects.get(org=a.org, key="s1").id)
    fact = Node.objects.get(org=a.org, kind=NodeKind.FACT)
    assert fact.source_kind == SourceKind.HEURISTIC and fact.source_node_ids == [leaf]

    q = {"query": "Where do the feature flags live now?", "k": 5}
    hits = [h["node_id"] for h in c.post("/api/v1/memories/resonate", q, format="json").json()["hits"]]
    assert leaf in hits and fact.id in hits  # the engine recalls both
    body = c.post("/api/v1/context", q, format="json").json()
    recalled = [x["node_id"] for x in body["recall"]]
    assert leaf in recalled and fact.id not in recalled
    assert f"[memory {fact.id}]" not in body["dynamic"]

    # without its turn beside it (the turn out of the reader's sight), the fact is recalled. Not by
    # deleting the turn: that deletes the fact drawn only from it (memory.services.node_delete).
    from teams.models import Agent
    from teams.services import api_key_create

    Node.objects.filter(id=leaf).update(visibility="private")  # the writing agent's own
    _, other_key = api_key_create(actor=None, agent=Agent.objects.create(org=a.org, name="other-bot"), name="t")
    r = client_for(other_key).post("/api/v1/context", q, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    recalled = [x["node_id"] for x in body["recall"]]
    assert fact.id in recalled and leaf not in recalled


def test_a_fact_whose_turn_moves_up_into_the_recall_is_left_out_too(world, client_for):
    # Two decisions, each with its fact: with k=3 the first pass sees fact, turn, fact in the top 3,
    # and the second turn only moves up once the first fact is left out.
    from memory.models import MemorySession

    a = world["a"]
    c = client_for(a.key)
    c.post("/api/v1/memories/weave-session", {"session_key": "s2", "visibility": "org", "turns": [
        {"speaker": "ana", "text": "We decided to move the feature flags to LaunchDarkly."},
        {"speaker": "ben", "text": "I will migrate the checkout feature flags by Friday."},
    ]}, format="json")
    abstract_session(session_id=MemorySession.objects.get(org=a.org, key="s2").id)
    facts = set(Node.objects.filter(org=a.org, kind=NodeKind.FACT).values_list("id", flat=True))
    assert len(facts) == 2
    body = c.post("/api/v1/context", {"query": "Where do the feature flags live?", "k": 3}, format="json").json()
    recalled = [x["node_id"] for x in body["recall"]]
    leaves = set(Node.objects.filter(org=a.org, kind=NodeKind.LEAF).values_list("id", flat=True))
    assert leaves <= set(recalled) and not facts & set(recalled), recalled
