"""Review round 5 of the assets app: revoking grants of a narrowed object, ``k`` of the context,
empty chat memories on update, and the write right re-decided on the locked row."""

from __future__ import annotations

import pytest
from rest_framework.exceptions import PermissionDenied

from assets import access, services
from assets.context import build_context
from assets.models import AccessGrant, Asset, AuditEvent
from teams.auth import actor_for_user, authenticate_key
from teams.models import TeamMembership, TeamRole

from .helpers import approve, create_asset, grant, weave

pytestmark = pytest.mark.django_db


def test_owner_can_list_and_revoke_grants_after_narrowing_to_private(world, client_for):
    a = world["a"]
    c = client_for(a.member)
    asset = create_asset(c, visibility="restricted")
    g = grant(c, "asset", asset["id"], grantee_kind="user", user_id=a.admin.id)
    r = c.patch(f"/api/v1/assets/{asset['id']}", {"expected_version": 1, "visibility": "private"}, format="json")
    assert r.status_code == 200, r.content
    r = c.get("/api/v1/grants", {"object_type": "asset", "object_id": asset["id"]})
    assert r.status_code == 200 and [x["id"] for x in r.json()["results"]] == [g["id"]]
    assert c.delete(f"/api/v1/grants/{g['id']}").status_code == 204
    assert not AccessGrant.objects.filter(id=g["id"]).exists()
    assert AuditEvent.objects.filter(org=a.org, action="acl.revoke", object_id=str(asset["id"])).exists()
    # restricted again: the old grantee does not come back
    r = c.patch(f"/api/v1/assets/{asset['id']}", {"expected_version": 1, "visibility": "restricted"},
                format="json")
    assert r.status_code == 200, r.content
    assert client_for(a.admin).get(f"/api/v1/assets/{asset['id']}").status_code == 404
    # still: no new grant on a non-restricted object, and others' private objects stay hidden
    c.patch(f"/api/v1/assets/{asset['id']}", {"expected_version": 1, "visibility": "private"}, format="json")
    grant(c, "asset", asset["id"], grantee_kind="user", user_id=a.admin.id, status=400)
    assert client_for(a.admin).get("/api/v1/grants", {"object_type": "asset",
                                                       "object_id": asset["id"]}).status_code == 404


def test_context_k_is_not_cut_to_the_default_recall_budget(world, client_for):
    a = world["a"]
    c = client_for(a.member)
    for i in range(10):
        weave(c, f"Deploy note {i}: payments", visibility="team", team_id=a.team.id)
    r = client_for(a.key).post("/api/v1/context", {"query": "payments deploy", "k": 8}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert len(body["recall"]) == 8 and body["budget"]["max_recall_items"] == 8
    # an explicit budget still bounds k
    r = client_for(a.key).post("/api/v1/context", {"query": "payments deploy", "k": 8,
                                                   "budget": {"max_recall_items": 3}}, format="json")
    assert len(r.json()["recall"]) == 3
    # and the echoed budget is the limit applied: k below max_recall_items is what was asked
    r = client_for(a.key).post("/api/v1/context", {"query": "payments deploy", "k": 3,
                                                   "budget": {"max_recall_items": 8}}, format="json")
    assert len(r.json()["recall"]) == 3 and r.json()["budget"]["max_recall_items"] == 3
    # the service default (the proxy's path) honours k too
    agent_actor = authenticate_key(a.key)
    assert len(build_context(actor=agent_actor, query="payments deploy", k=8, reinforce=False).recall) == 8


def test_chat_memory_cannot_be_emptied_by_update(world, client_for):
    a = world["a"]
    c = client_for(a.member)
    nid = weave(c, "The release train leaves on Tuesdays.")
    asset = create_asset(c, kind="chat_memory", node_ids=[nid])
    r = c.patch(f"/api/v1/assets/{asset['id']}", {"expected_version": 1, "node_ids": []}, format="json")
    assert r.status_code == 400 and "node_ids" in r.json()["error"]["fields"]
    assert Asset.objects.get(id=asset["id"]).node_ids == [nid]


def test_update_re_decides_the_write_right_on_the_locked_row(world, client_for):
    a = world["a"]
    TeamMembership.objects.create(org=a.org, team=a.team, user=a.admin, role=TeamRole.ADMIN)
    c = client_for(a.member)
    asset = create_asset(c, title="Team runbook")
    r = c.post(f"/api/v1/assets/{asset['id']}/promote", {"visibility": "team", "team_id": a.team.id},
               format="json")
    assert r.status_code == 200, r.content
    approve(client_for(a.admin), asset["id"])
    admin = actor_for_user(a.admin, a.org)
    seen = access.access_asset_by_id(admin, asset["id"], for_write=True)  # the team admin may write...
    # ...but the owner narrows it to private before the admin's update takes the row lock
    r = c.patch(f"/api/v1/assets/{asset['id']}", {"expected_version": 1, "visibility": "private"}, format="json")
    assert r.status_code == 200, r.content
    with pytest.raises(PermissionDenied):
        services.asset_update(actor=admin, asset=seen, data={"body": "overwritten"}, expected_version=1)
    assert Asset.objects.get(id=asset["id"]).body == ""


def test_org_promotion_refuses_a_team_the_requester_is_not_in(world, client_for):
    from teams.models import Team

    a = world["a"]
    other = Team.objects.create(org=a.org, name="ops", slug="ops")
    c = client_for(a.member)
    asset = create_asset(c, title="Handbook")
    r = c.post(f"/api/v1/assets/{asset['id']}/promote", {"visibility": "org", "team_id": other.id}, format="json")
    assert r.status_code == 400 and "team_id" in r.json()["error"]["fields"]
    assert Asset.objects.get(id=asset["id"]).status == "draft"
    # its own team, or none, is fine
    r = c.post(f"/api/v1/assets/{asset['id']}/promote", {"visibility": "org", "team_id": a.team.id}, format="json")
    assert r.status_code == 200, r.content
