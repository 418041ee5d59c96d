"""Recall reinforces what it recalled for the query, not what it showed for want of a match: a
first-user audit asked five times about "the Kubernetes ingress controller" in memory that holds
none, every hit came back ``matched: false`` and every one gained a mention, until the small talk
"Morning all. Quick sync on the billing service." reached tension 2.0 and outranked "We migrated the
billing service to PostgreSQL 16" for the billing question. On every recall path (REST resonate,
/context, MCP, the console) only matching hits are marked; REST resonate hits now also say when
they happened, who said them and whether they match."""

from __future__ import annotations

import pytest

from assets.mcp import tool_resonate
from memory.models import RecallMark
from teams.auth import actor_for_agent
from teams.models import Scope

from .helpers import weave

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

LINES = [("Morning all. Quick sync on the billing service.", "2026-11-24T09:00:00Z"),
         ("We migrated the billing service to PostgreSQL 16 last night.", "2026-11-24T09:01:00Z"),
         ("The invoice PDF renderer is Gotenberg.", "2026-11-24T09:02:00Z")]
MISS = "What did we decide about the Kubernetes ingress controller?"
HIT = "Which PostgreSQL version does the billing service run?"


@pytest.fixture
def ids(world, client_for):
    bob = client_for(world["a"].member)
    return [weave(bob, text, visibility="org", session="sync", speaker="bob", occurred_at=at) for text, at in LINES]


def _marked() -> list[int]:
    return sorted(RecallMark.objects.values_list("node_id", flat=True))


def test_rest_resonate_reinforces_only_matching_hits(world, client_for, ids):
    agent = client_for(world["a"].key)
    r = agent.post("/api/v1/memories/resonate", {"query": MISS, "k": 5}, format="json")
    assert r.status_code == 200, r.content
    hits = r.json()["hits"]
    assert hits and not any(h["matched"] for h in hits)
    assert _marked() == []
    r = agent.post("/api/v1/memories/resonate", {"query": HIT, "k": 5}, format="json")
    hits = {h["node_id"]: h for h in r.json()["hits"]}
    assert hits[ids[1]]["matched"] is True
    assert hits[ids[1]]["occurred_at"].startswith("2026-11-24T09:01") and hits[ids[1]]["speaker"] == "bob"
    assert _marked() == sorted(h["node_id"] for h in hits.values() if h["matched"])
    assert ids[1] in _marked() and ids[2] not in _marked()


def test_context_reinforces_only_matching_recall(world, client_for, ids):
    agent = client_for(world["a"].key)
    r = agent.post("/api/v1/context", {"query": MISS, "k": 5}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["no_match"] is True and body["recall"]
    assert _marked() == []
    r = agent.post("/api/v1/context", {"query": HIT, "k": 5}, format="json")
    matched = sorted(x["node_id"] for x in r.json()["recall"] if x["matched"])
    assert ids[1] in matched and _marked() == matched


def test_mcp_resonate_reinforces_only_matching_hits(world, ids):
    actor = actor_for_agent(world["a"].agent, scopes=frozenset({Scope.READ, Scope.WRITE}))
    out = tool_resonate(actor, query=MISS, k=5)
    assert out["no_match"] is True and out["hits"]
    assert _marked() == []
    out = tool_resonate(actor, query=HIT, k=5)
    assert _marked() == sorted(h["node_id"] for h in out["hits"] if h["matched"]) and ids[1] in _marked()


def test_reinforce_false_marks_nothing_even_when_matching(world, client_for, ids):
    agent = client_for(world["a"].key)
    r = agent.post("/api/v1/memories/resonate", {"query": HIT, "k": 5, "reinforce": False}, format="json")
    assert any(h["matched"] for h in r.json()["hits"]) and _marked() == []
