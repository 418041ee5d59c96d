"""GET /api/v1/memories/nodes/{id}/governance: the five questions, never naming hidden nodes."""

from __future__ import annotations

import pytest

from memory.models import Edge, MemorySession, Node
from reflection.models import Conflict
from reflection.services import abstract_session

pytestmark = pytest.mark.django_db


def _weave(client, turns, session="s1", **extra):
    body = {"session_key": session, "turns": [{"speaker": s, "text": t} for s, t in turns], "end_session": True,
            **extra}
    r = client.post("/api/v1/memories/weave-session", body, format="json")
    assert r.status_code == 201, r.content
    return r.json()["node_ids"]


def test_lineage_conflicts_validity_and_rights(world, client_for, settings):
    settings.NYLON_LLM_URL = ""  # heuristic abstraction
    a = world["a"]
    c = client_for(a.key)
    leaves = _weave(c, [("Ana", "I moved the billing service to Postgres last week."),
                        ("Ben", "Nice, I will update the runbook tomorrow.")])
    session = MemorySession.objects.get(org=a.org, key="s1")
    abstract_session(session_id=session.id)
    facts = list(Node.objects.filter(org=a.org, kind="fact"))
    assert facts, "the heuristic abstraction writes facts for an ended session"
    fact = next(f for f in facts if leaves[0] in f.source_node_ids)
    newer = _weave(c, [("Ana", "I moved the billing service to MySQL.")], session="s2")[0]
    Conflict.objects.create(org=a.org, node_a_id=leaves[0], node_b_id=newer, reason="different place",
                            detector="rule")
    Edge.objects.create(org=a.org, src_id=newer, dst_id=leaves[0], kind="supersedes", weight=0.5)

    body = c.get(f"/api/v1/memories/nodes/{leaves[0]}/governance").json()
    assert body["provenance"]["session_key"] == "s1" and body["provenance"]["source_agent_id"] == a.agent.id
    assert fact.id in {d["id"] for d in body["lineage"]["derived"]}
    assert [x["other_node_id"] for x in body["conflicts"]] == [newer]
    assert body["validity"]["superseded_by"] == [newer]
    assert body["change_rights"]["you_may_change"] is True and "owner" in body["change_rights"]["who"]
    assert body["dependencies"]["embedded"] is True and body["dependencies"]["embedder"]["status"] == "ok"

    fact_view = c.get(f"/api/v1/memories/nodes/{fact.id}/governance").json()
    assert leaves[0] in {s["id"] for s in fact_view["lineage"]["sources"]}


def test_hidden_nodes_are_never_named_and_other_orgs_get_404(world, client_for):
    a = world["a"]
    private = _weave(client_for(a.key), [("Ana", "Private: the vendor discount is 40 percent.")])[0]
    shared = _weave(client_for(a.owner), [("Ana", "Vendor contract renews in June.")], session="o",
                    visibility="org")[0]
    Node.objects.filter(id=shared).update(source_node_ids=[private])
    body = client_for(a.member).get(f"/api/v1/memories/nodes/{shared}/governance").json()
    assert body["lineage"]["sources"] == []  # the private source exists but is not the member's to see
    assert body["change_rights"]["you_may_change"] is False
    assert client_for(a.member).get(f"/api/v1/memories/nodes/{private}/governance").status_code == 404
    assert client_for(world["b"].owner).get(f"/api/v1/memories/nodes/{shared}/governance").status_code == 404
