from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from assets.models import AuditEvent
from memory.models import Edge, Node
from reflection import conflicts
from reflection.models import Conflict
from tests.assets.helpers import grant

from .helpers import weave

pytestmark = pytest.mark.django_db

SAY = [{"speaker": "Ana", "text": "I eat spicy food.", "occurred_at": "2023-05-08T10:00:00Z"}]
DENY = [{"speaker": "Ana", "text": "I don't eat spicy food.", "occurred_at": "2023-06-08T10:00:00Z"}]


def two_statements(world, client_for, key=None, **extra):
    c = client_for(key or world["a"].key)
    first = weave(c, "s1", turns=SAY, end=False, **extra)["node_ids"][0]
    second = weave(c, "s2", turns=DENY, end=False, **extra)["node_ids"][0]
    return first, second


def test_rule_detects_a_negation_flip(world, client_for, no_llm):
    first, second = two_statements(world, client_for)
    assert conflicts.detect(org_id=world["a"].org.id, node_ids=[second]) == 1
    c = Conflict.objects.get()
    assert (c.node_a_id, c.node_b_id) == (first, second) and c.detector == "rule" and c.status == "open"
    assert "negation" in c.reason
    assert Edge.objects.filter(src_id=first, dst_id=second, kind="contradicts").exists()
    assert conflicts.detect(org_id=world["a"].org.id, node_ids=[second, first]) == 0  # idempotent


def test_unrelated_or_other_owner_statements_are_not_conflicts(world, client_for, no_llm):
    weave(client_for(world["a"].key), "s1", turns=SAY, end=False)
    other = weave(client_for(world["a"].owner), "s2", turns=DENY, end=False)["node_ids"][0]  # another owner
    same = weave(client_for(world["a"].key), "s3", end=False, turns=[
        {"speaker": "Ana", "text": "I like long walks by the river.", "occurred_at": "2023-05-08T10:00:00Z"}])
    assert conflicts.detect(org_id=world["a"].org.id, node_ids=[other, *same["node_ids"]]) == 0


def test_llm_judge(world, client_for, llm):
    first, second = two_statements(world, client_for)
    assert conflicts.detect(org_id=world["a"].org.id, node_ids=[second]) == 1
    c = Conflict.objects.get()
    assert c.detector == "llm" and c.reason
    if llm.scripted:
        assert llm.server.requests[-1]["task"] == "conflict"


def test_llm_outage_falls_back_to_rules(world, client_for, llm):
    server = llm.need_script()
    first, second = two_statements(world, client_for)
    server.default = 503
    assert conflicts.detect(org_id=world["a"].org.id, node_ids=[second]) == 1
    assert Conflict.objects.get().detector == "rule"


def test_list_is_org_scoped_and_visibility_filtered(world, client_for, no_llm):
    first, second = two_statements(world, client_for)  # private to the agent
    conflicts.detect(org_id=world["a"].org.id, node_ids=[second])
    body = client_for(world["a"].key).get("/api/v1/conflicts").json()
    assert [r["node_a"]["id"] for r in body["results"]] == [first]
    assert client_for(world["a"].admin).get("/api/v1/conflicts").json()["results"] == []  # private nodes
    assert client_for(world["b"].key).get("/api/v1/conflicts").json()["results"] == []
    assert client_for(world["a"].key).get("/api/v1/conflicts?status=superseded").json()["results"] == []
    assert client_for(world["a"].key).get("/api/v1/conflicts?status=nope").status_code == 400


def test_resolve_supersede_keeps_everything(world, client_for, no_llm):
    first, second = two_statements(world, client_for)
    conflicts.detect(org_id=world["a"].org.id, node_ids=[second])
    cid = Conflict.objects.get().id
    c = client_for(world["a"].key)
    url = f"/api/v1/conflicts/{cid}/resolve"
    assert c.post(url, {"action": "supersede"}, format="json").status_code == 400  # keep needed
    assert c.post(url, {"action": "supersede", "keep": 999999}, format="json").status_code == 400
    assert c.post(url, {"action": "supersede", "keep": second, "x": 1}, format="json").status_code == 400
    assert client_for(world["b"].key).post(url, {"action": "reject"}, format="json").status_code == 404
    r = c.post(url, {"action": "supersede", "keep": second}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["status"] == "superseded" and r.json()["kept_node_id"] == second
    assert r.json()["resolved_by"] == f"agent:{world['a'].agent.name}"
    old = Node.objects.get(id=first)
    assert old.valid_to is not None and old.deleted_at is None and Node.objects.get(id=second).valid_to is None
    assert Edge.objects.filter(src_id=second, dst_id=first, kind="supersedes").exists()
    assert AuditEvent.objects.filter(action="conflict.resolve", object_id=str(cid)).count() == 1
    again = c.post(url, {"action": "keep_both"}, format="json")  # already resolved: a state, a 409
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict_already_resolved"
    assert "already resolved (superseded)" in again.json()["error"]["message"]
    assert AuditEvent.objects.filter(action="conflict.resolve", object_id=str(cid)).count() == 1


@pytest.mark.parametrize("action,status", [("keep_both", "kept_both"), ("reject", "rejected")])
def test_resolve_keep_both_and_reject(world, client_for, no_llm, action, status):
    first, second = two_statements(world, client_for)
    conflicts.detect(org_id=world["a"].org.id, node_ids=[second])
    cid = Conflict.objects.get().id
    url = f"/api/v1/conflicts/{cid}/resolve"
    # a memory named to keep belongs to superseding only: refused, not silently dropped
    r = client_for(world["a"].key).post(url, {"action": action, "keep": second}, format="json")
    assert r.status_code == 400 and r.json()["error"]["fields"] == {"keep": ["Only with action=supersede."]}
    assert Conflict.objects.get().status == "open"
    r = client_for(world["a"].key).post(url, {"action": action}, format="json")
    assert r.status_code == 200 and r.json()["status"] == status
    assert Node.objects.filter(id__in=[first, second], valid_to__isnull=True).count() == 2


def test_only_the_owner_or_an_admin_supersedes_org_memories(world, client_for, no_llm):
    first, second = two_statements(world, client_for, visibility="org")
    conflicts.detect(org_id=world["a"].org.id, node_ids=[second])
    cid = Conflict.objects.get().id
    url = f"/api/v1/conflicts/{cid}/resolve"
    assert client_for(world["a"].member).get("/api/v1/conflicts").json()["results"][0]["id"] == cid
    r = client_for(world["a"].member).post(url, {"action": "supersede", "keep": second}, format="json")
    assert r.status_code == 403
    r = client_for(world["a"].admin).post(url, {"action": "supersede", "keep": second}, format="json")
    assert r.status_code == 200


def test_candidates_are_found_when_other_tenants_crowd_the_vector_index(world, client_for, no_llm):
    """The candidate search filters by org and owner after an HNSW scan, which stopped after
    ``hnsw.ef_search`` index tuples: another org's nearer statements filled the whole scan and the
    check saw no candidate at all (the suite's many rolled-back copies of these sentences did it
    too, and left the statement's index element unreachable). memory/nearest.py ranks the owner's
    recent nodes exactly and iterates the HNSW scan past the crowd."""
    from django.utils import timezone

    from memory.embedding import get_embedder

    first, second = two_statements(world, client_for)
    b = world["b"]
    vecs = get_embedder().passages([SAY[0]["text"], DENY[0]["text"]])
    now = timezone.now()
    # Another org's statements, each nearer to the denial than the statement it contradicts
    # (cosine 0.97), spread around it (cosine ~0.94 to each other) rather than piled on one point,
    # where an HNSW graph can leave a node unreachable.
    rng = np.random.default_rng(7)
    u = rng.normal(size=(300, vecs.shape[1]))
    u -= np.outer(u @ vecs[1], vecs[1])
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    crowd = 0.97 * vecs[1] + np.sqrt(1 - 0.97**2) * u
    assert (crowd @ vecs[1]).min() > float(vecs[0] @ vecs[1])
    Node.objects.bulk_create([
        Node(org=b.org, owner_agent=b.agent, text=DENY[0]["text"], occurred_at=now,
             tension_updated_at=now, embedding=v, embedded=True)
        for v in crowd])
    with connection.cursor() as cur:
        cur.execute("SHOW hnsw.ef_search")
        assert int(cur.fetchone()[0]) < 300  # the crowd is larger than one plain scan
        # The plan a large table gets (the HNSW index for the ORDER BY, filters after it): this
        # small one would otherwise be sorted from the owner's btree index. Undone by the rollback.
        cur.execute("SET LOCAL enable_sort = off")
    assert conflicts.detect(org_id=world["a"].org.id, node_ids=[second]) == 1
    assert Conflict.objects.get().node_a_id == first


def test_a_read_only_acl_grant_does_not_let_an_org_admin_supersede(world, client_for, no_llm):
    """Superseding closes a node's validity, a write: the node write rule decides, as for the node
    API. An org admin with a read grant on a restricted memory saw both nodes and was let through
    by the old "owner or org admin" rule."""
    a = world["a"]
    first, second = two_statements(world, client_for, key=a.member, visibility="restricted")
    conflicts.detect(org_id=a.org.id, node_ids=[second])
    cid = Conflict.objects.get().id
    for nid in (first, second):  # the admin may read both, so the conflict is listed to it
        grant(client_for(a.member), "node", nid, grantee_kind="user", user_id=a.admin.id)
    assert [r["id"] for r in client_for(a.admin).get("/api/v1/conflicts").json()["results"]] == [cid]
    url = f"/api/v1/conflicts/{cid}/resolve"
    r = client_for(a.admin).post(url, {"action": "supersede", "keep": second}, format="json")
    assert r.status_code == 403, r.content
    assert r.json()["error"]["code"] == "permission_denied"
    # nothing written, and the refusal is audited with the same reason the node API gives
    assert Node.objects.get(id=first).valid_to is None
    assert Conflict.objects.get(id=cid).status == "open"
    assert not Edge.objects.filter(kind="supersedes").exists()
    ev = AuditEvent.objects.filter(org=a.org, action="node.write", object_id=str(first)).order_by("-id").first()
    assert ev is not None and ev.outcome == "denied" and ev.reason == "acl_read_only"
    # an outsider of the ACL does not even see the conflict; the owner supersedes
    assert client_for(a.owner).post(url, {"action": "supersede", "keep": second}, format="json").status_code == 404
    r = client_for(a.member).post(url, {"action": "supersede", "keep": second}, format="json")
    assert r.status_code == 200, r.content
    assert Node.objects.get(id=first).valid_to is not None


def test_a_write_grant_lets_an_org_admin_supersede(world, client_for, no_llm):
    a = world["a"]
    first, second = two_statements(world, client_for, key=a.member, visibility="restricted")
    conflicts.detect(org_id=a.org.id, node_ids=[second])
    cid = Conflict.objects.get().id
    grant(client_for(a.member), "node", first, grantee_kind="user", user_id=a.admin.id, permission="write")
    grant(client_for(a.member), "node", second, grantee_kind="user", user_id=a.admin.id)
    r = client_for(a.admin).post(f"/api/v1/conflicts/{cid}/resolve", {"action": "supersede", "keep": second},
                                 format="json")
    assert r.status_code == 200, r.content
    assert Node.objects.get(id=first).valid_to is not None


@pytest.mark.parametrize("action", ["keep_both", "reject"])
def test_keeping_both_or_rejecting_needs_write_access_to_one_of_the_memories(world, client_for, no_llm, action):
    """Keeping both or rejecting closes a conflict for good (it cannot be reopened), yet only
    supersede checked write access: any reader of the two memories — a plain member, an agent with
    no rights over them — could close someone else's conflict. Now every action needs the right to
    change at least one of the two nodes, from the API and the console alike."""
    from django.test import Client

    from teams import services as team_services
    from teams.models import Agent

    a = world["a"]
    first, second = two_statements(world, client_for, visibility="org")  # the agent's, read by everyone
    conflicts.detect(org_id=a.org.id, node_ids=[second])
    cid = Conflict.objects.get().id
    url = f"/api/v1/conflicts/{cid}/resolve"
    outsider_agent = Agent.objects.create(org=a.org, name="alpha-support-bot")  # same org, no team, no rights
    _, outsider_key = team_services.api_key_create(actor=None, agent=outsider_agent, name="test")
    for who in (a.member, outsider_key):
        assert [r["id"] for r in client_for(who).get("/api/v1/conflicts").json()["results"]] == [cid]  # it reads both
        r = client_for(who).post(url, {"action": action}, format="json")
        assert r.status_code == 403, r.content
        assert r.json()["error"]["code"] == "permission_denied"
    # the console route is the same service: refused there too
    console = Client()
    console.force_login(a.member)
    assert console.post(f"/console/conflicts/{cid}/resolve", {"action": action}).status_code == 403
    assert Conflict.objects.get(id=cid).status == "open"
    denied = AuditEvent.objects.filter(org=a.org, action="node.write", outcome="denied", object_id=str(first))
    assert denied.count() == 3
    assert client_for(world["b"].key).post(url, {"action": action}, format="json").status_code == 404
    # the owner of the memories closes it
    r = client_for(a.key).post(url, {"action": action}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["resolved_by"] == f"agent:{a.agent.name}"
    assert Node.objects.filter(id__in=[first, second], valid_to__isnull=True).count() == 2


def test_a_writer_of_one_memory_may_keep_both(world, client_for, no_llm):
    """One of the two is enough: the org admin may change the org's memories, an owner its own."""
    a = world["a"]
    mine = weave(client_for(a.member), "m1", turns=SAY, end=False, visibility="org")["node_ids"][0]
    theirs = weave(client_for(a.key), "m2", turns=DENY, end=False, visibility="org")["node_ids"][0]
    c = Conflict.objects.create(org=a.org, node_a_id=mine, node_b_id=theirs, reason="negation flip", detector="rule")
    r = client_for(a.member).post(f"/api/v1/conflicts/{c.id}/resolve", {"action": "keep_both"}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["status"] == "kept_both"


def test_facts_restating_two_conflicting_turns_are_not_a_second_conflict(world, client_for, no_llm):
    # The turns conflict; the heuristic facts abstracted from them ("… (on 14 December 2026)") said
    # the same again: a second queue entry with a garbled reason, left open once the turns' conflict
    # was resolved.
    c = client_for(world["a"].key)
    dated = weave(c, "mig-1", turns=[{"speaker": "carol", "text": "The data migration is scheduled for December 14th.",
                                      "occurred_at": "2026-12-01T09:00:00Z"}], end=True)["node_ids"][0]
    moved = weave(c, "mig-2", turns=[{"speaker": "bob", "text": "Update: the data migration moved to January 9th "
                                      "because of the freeze.", "occurred_at": "2026-12-01T10:00:00Z"}],
                  end=True)["node_ids"][0]
    org_id = world["a"].org.id
    conflicts.detect(org_id=org_id, node_ids=[dated, moved])
    from reflection import services

    from .helpers import session
    for key in ("mig-1", "mig-2"):
        services.abstract_session(session_id=session(world["a"].org, key).id)
    facts = list(Node.objects.filter(org_id=org_id, kind="fact").values_list("id", flat=True))
    assert len(facts) == 2  # the premise: each turn was abstracted into a fact
    conflicts.detect(org_id=org_id, node_ids=facts)
    stored = list(Conflict.objects.values_list("node_a_id", "node_b_id", "reason"))
    assert stored == [(dated, moved, "rescheduled: December 14th vs January 9th")]
