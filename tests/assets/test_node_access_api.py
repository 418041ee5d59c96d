"""/api/v1/memories/nodes/{id} through assets.access: restricted nodes, write rules, audit."""

from __future__ import annotations

import pytest

from assets.models import AuditEvent
from memory.cache import get_cache
from memory.models import Node

from .helpers import grant, last_event, weave

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


def test_weave_accepts_restricted_and_owner_keeps_access(world, client_for):
    a = world["a"]
    nid = weave(client_for(a.member), "Acquisition target is Nimbus.", visibility="restricted")
    assert Node.objects.get(id=nid).visibility == "restricted"
    assert client_for(a.member).get(f"/api/v1/memories/nodes/{nid}").status_code == 200
    for who in (a.owner, a.admin, a.key, world["b"].owner):
        assert client_for(who).get(f"/api/v1/memories/nodes/{nid}").status_code == 404
    listed = client_for(a.owner).get("/api/v1/memories/nodes").json()["results"]
    assert nid not in [n["id"] for n in listed]


def test_read_grant_is_not_write(world, client_for):
    a = world["a"]
    nid = weave(client_for(a.member), "Restricted plan.", visibility="restricted")
    grant(client_for(a.member), "node", nid, grantee_kind="user", user_id=a.owner.id)
    assert client_for(a.owner).get(f"/api/v1/memories/nodes/{nid}").status_code == 200
    assert client_for(a.owner).delete(f"/api/v1/memories/nodes/{nid}").status_code == 403  # admins too
    ev = last_event(a.org, action="node.write")
    assert ev.outcome == "denied" and ev.reason == "acl_read_only"
    grant(client_for(a.member), "node", nid, grantee_kind="user", user_id=a.admin.id, permission="write")
    assert client_for(a.admin).delete(f"/api/v1/memories/nodes/{nid}").status_code == 204
    assert last_event(a.org, action="node.write").reason == "acl_write"


def test_resonate_sees_restricted_only_with_a_grant(world, client_for):
    a = world["a"]
    nid = weave(client_for(a.member), "The Nimbus acquisition closes in May.", visibility="restricted")
    q = {"query": "Nimbus acquisition", "reinforce": False}
    assert client_for(a.owner).post("/api/v1/memories/resonate", q, format="json").json()["hits"] == []
    assert [h["node_id"] for h in client_for(a.member).post("/api/v1/memories/resonate", q,
                                                            format="json").json()["hits"]] == [nid]
    grant(client_for(a.member), "node", nid, grantee_kind="agent", agent_id=a.agent.id)
    assert [h["node_id"] for h in client_for(a.key).post("/api/v1/memories/resonate", q,
                                                         format="json").json()["hits"]] == [nid]
    assert client_for(a.owner).post("/api/v1/memories/resonate", q, format="json").json()["hits"] == []


def test_every_read_by_id_is_audited_with_reason(world, client_for):
    a = world["a"]
    nid = weave(client_for(a.member), "Team note.", visibility="team", team_id=a.team.id)
    client_for(a.member).get(f"/api/v1/memories/nodes/{nid}")
    client_for(a.owner).get(f"/api/v1/memories/nodes/{nid}")
    client_for(a.owner).get("/api/v1/memories/nodes/999999")
    rows = list(AuditEvent.objects.filter(org=a.org, action="node.read").order_by("id")
                .values_list("actor_id", "outcome", "reason"))
    assert rows == [(a.member.id, "allowed", "owner"), (a.owner.id, "denied", "visibility_team"),
                    (a.owner.id, "denied", "not_found")]


def test_org_admin_may_delete_org_nodes_members_may_not(world, client_for):
    a = world["a"]
    nid = weave(client_for(a.key), "Org-wide note.", visibility="org")
    assert client_for(a.member).delete(f"/api/v1/memories/nodes/{nid}").status_code == 403
    assert client_for(a.admin).delete(f"/api/v1/memories/nodes/{nid}").status_code == 204


@pytest.mark.django_db(transaction=True)  # committed rows: inside a test's open transaction every probe finds its own writes
def test_a_warm_read_gets_its_grants_from_the_freshness_probe(world, client_for):
    """The served read asks the actor's grants inside the cache's probe: one statement on a warm,
    caught-up index, and a grant or a revoke (which write no node) still show on the next read."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.selectors import resonate_for
    from teams.auth import actor_for_user

    a = world["a"]
    nid = weave(client_for(a.member), "The Nimbus acquisition closes in May.", visibility="restricted")
    weave(client_for(a.member), "Lunch is at noon on Fridays.", visibility="org")
    owner = actor_for_user(a.owner, a.org)

    def found() -> bool:
        with CaptureQueriesContext(connection) as queries:
            out = resonate_for(actor=owner, query="Nimbus acquisition", query_vec=None)
        assert out.served_by == "engine"
        return nid in [h.node_id for h in out.result.hits], len(queries)

    get_cache().get(a.org.id)
    assert found() == (False, 1)
    g = grant(client_for(a.member), "node", nid, grantee_kind="user", user_id=a.owner.id)
    assert found() == (True, 1)
    assert client_for(a.member).delete(f"/api/v1/grants/{g['id']}").status_code == 204
    assert found() == (False, 1)


@pytest.mark.django_db(transaction=True)
def test_grants_read_by_the_probe_are_not_applied_to_a_newer_index(world, client_for, monkeypatch):
    """A catch-up between the probe (which read the grants) and the read lock moves the index past
    the grants' snapshot: a grant revoked and the memory rewritten meanwhile must not let the old
    grant show the new text (a review's race). Such grants are asked again."""
    from assets.models import AccessGrant
    from memory.cache import EngineCache
    from memory.selectors import resonate_for
    from teams.auth import actor_for_user

    a = world["a"]
    nid = weave(client_for(a.member), "The Nimbus acquisition closes in May.", visibility="restricted")
    grant(client_for(a.member), "node", nid, grantee_kind="user", user_id=a.owner.id)
    owner = actor_for_user(a.owner, a.org)
    get_cache().get(a.org.id)
    original = EngineCache.get_or_none_with

    def interleaved(self, org_id, also=None):
        out = original(self, org_id, also)  # the grant is there at the probe's snapshot
        AccessGrant.objects.filter(object_id=nid).delete()
        Node.objects.filter(id=nid).update(text="The Nimbus acquisition price is 41M (secret).")
        self.get(org_id)  # another request's catch-up
        return out

    monkeypatch.setattr(EngineCache, "get_or_none_with", interleaved)
    out = resonate_for(actor=owner, query="Nimbus acquisition", query_vec=None)
    assert out.served_by == "engine"
    assert nid not in [h.node_id for h in out.result.hits]
