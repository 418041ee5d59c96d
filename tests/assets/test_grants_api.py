"""/api/v1/grants: ACLs of restricted nodes and assets; admins may grant themselves (audited)."""

from __future__ import annotations

import pytest

from assets.models import AccessGrant, AuditEvent

from .helpers import create_asset, grant, last_event, weave

pytestmark = pytest.mark.django_db


def test_restricted_is_strict_for_admins_until_they_grant_themselves(world, client_for):
    a = world["a"]
    nid = weave(client_for(a.member), "Salary bands for 2025.", visibility="restricted")
    for who in (a.owner, a.admin, a.key):
        assert client_for(who).get(f"/api/v1/memories/nodes/{nid}").status_code == 404
    g = grant(client_for(a.admin), "node", nid, grantee_kind="user", user_id=a.admin.id)
    ev = last_event(a.org, action="acl.grant")
    assert ev.actor_id == a.admin.id and ev.detail["self_grant"] is True and ev.reason == "org_admin"
    assert client_for(a.admin).get(f"/api/v1/memories/nodes/{nid}").status_code == 200
    assert client_for(a.owner).get(f"/api/v1/memories/nodes/{nid}").status_code == 404  # still strict
    assert g["granted_by_id"] == a.admin.id


def test_members_cannot_manage_acls_of_others(world, client_for):
    a = world["a"]
    nid = weave(client_for(a.admin), "Board minutes draft.", visibility="restricted")
    grant(client_for(a.member), "node", nid, grantee_kind="user", user_id=a.member.id, status=404)
    grant(client_for(a.key), "node", nid, grantee_kind="agent", agent_id=a.agent.id, status=404)
    grant(client_for(world["b"].owner), "node", nid, grantee_kind="user", user_id=world["b"].owner.id,
          status=404)
    assert AccessGrant.objects.count() == 0
    denied = AuditEvent.objects.filter(org=a.org, action="node_acl.write", outcome="denied")
    assert denied.count() == 2  # the member and the agent; the other org's attempt is not in this org


def test_private_objects_have_no_acl_even_for_admins(world, client_for):
    a = world["a"]
    nid = weave(client_for(a.member), "My diary.", visibility="private")
    grant(client_for(a.owner), "node", nid, grantee_kind="user", user_id=a.owner.id, status=404)
    org_nid = weave(client_for(a.member), "Lunch at noon.", visibility="org")
    grant(client_for(a.member), "node", org_nid, grantee_kind="user", user_id=a.admin.id, status=400)


def test_grant_kinds_team_role_and_agent_and_revoke(world, client_for):
    a = world["a"]
    owner = client_for(a.admin)
    asset = create_asset(owner, visibility="restricted", title="Incident")
    grant(owner, "asset", asset["id"], grantee_kind="user", user_id=world["b"].member.id, status=400)
    g = grant(owner, "asset", asset["id"], grantee_kind="team_role", team_id=a.team.id, team_role="member")
    assert client_for(a.member).get(f"/api/v1/assets/{asset['id']}").status_code == 200
    r = client_for(a.admin).get("/api/v1/grants", {"object_type": "asset", "object_id": asset["id"]})
    assert r.status_code == 200 and [x["id"] for x in r.json()["results"]] == [g["id"]]
    assert client_for(a.member).get("/api/v1/grants", {"object_type": "asset",
                                                        "object_id": asset["id"]}).status_code == 403
    assert client_for(a.member).delete(f"/api/v1/grants/{g['id']}").status_code == 403
    assert client_for(a.admin).delete(f"/api/v1/grants/{g['id']}").status_code == 204
    assert client_for(a.member).get(f"/api/v1/assets/{asset['id']}").status_code == 404
    assert last_event(a.org, action="acl.revoke").detail["grant_id"] == g["id"]
    grant(owner, "asset", asset["id"], grantee_kind="team_role", team_id=a.team.id, team_role="admin")
    assert client_for(a.member).get(f"/api/v1/assets/{asset['id']}").status_code == 404  # not a team admin


def test_duplicate_grant_is_400(world, client_for):
    a = world["a"]
    nid = weave(client_for(a.member), "Secret.", visibility="restricted")
    grant(client_for(a.member), "node", nid, grantee_kind="user", user_id=a.owner.id)
    grant(client_for(a.member), "node", nid, grantee_kind="user", user_id=a.owner.id, status=400)


def test_granted_node_ids_is_grants_for(world, client_for):
    """The engine's hand-written grant lookup returns exactly the node grants of ``grants_for``, for
    every kind of grantee (user, agent, team role member/admin), and nothing of another org."""
    from django.contrib.auth import get_user_model

    from assets.access import granted_node_ids, grants_for
    from teams.auth import actor_for_agent, actor_for_user
    from teams.models import Scope, TeamMembership, TeamRole

    a, b = world["a"], world["b"]
    lead = get_user_model().objects.create_user("alpha-lead", "lead@example.com", "pw-lead-123")
    from teams.models import Membership, Role

    Membership.objects.create(org=a.org, user=lead, role=Role.MEMBER)
    TeamMembership.objects.create(org=a.org, team=a.team, user=lead, role=TeamRole.ADMIN)
    owner = client_for(a.owner)
    nids = [weave(owner, f"Restricted note {i}.", visibility="restricted") for i in range(5)]
    grant(owner, "node", nids[0], grantee_kind="user", user_id=a.member.id)
    grant(owner, "node", nids[1], grantee_kind="agent", agent_id=a.agent.id)
    grant(owner, "node", nids[2], grantee_kind="team_role", team_id=a.team.id, team_role="member")
    grant(owner, "node", nids[3], grantee_kind="team_role", team_id=a.team.id, team_role="admin")
    grant(owner, "node", nids[4], grantee_kind="user", user_id=a.admin.id)
    asset = create_asset(owner, visibility="restricted")
    grant(owner, "asset", asset["id"], grantee_kind="user", user_id=a.member.id)  # not a node grant
    other = weave(client_for(b.owner), "Beta's restricted note.", visibility="restricted")
    grant(client_for(b.owner), "node", other, grantee_kind="user", user_id=b.member.id)

    actors = {
        "member": actor_for_user(a.member, a.org),
        "team admin": actor_for_user(lead, a.org),
        "org admin": actor_for_user(a.admin, a.org),
        "owner": actor_for_user(a.owner, a.org),
        "agent": actor_for_agent(a.agent, scopes=frozenset({Scope.READ})),
    }
    expected = {"member": {nids[0], nids[2]}, "team admin": {nids[2], nids[3]}, "org admin": {nids[4]},
                "owner": set(), "agent": {nids[1], nids[2]}}
    for name, actor in actors.items():
        got = granted_node_ids(actor)
        assert sorted(got) == sorted(grants_for(actor, "node").values_list("object_id", flat=True)), name
        assert set(got) == expected[name], name
