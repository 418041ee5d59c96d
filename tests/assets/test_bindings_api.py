"""/api/v1/agents/{id}/bindings: which assets an agent receives, and how."""

from __future__ import annotations

import pytest

from assets.models import AgentBinding

from .helpers import approve, create_asset, grant, last_event

pytestmark = pytest.mark.django_db


def test_admin_binds_org_asset_agent_then_reads_it(world, client_for):
    a = world["a"]
    asset = create_asset(client_for(a.admin), visibility="org", kind="persona", title="Voice")
    # approved: an agent is given only an asset's approved version (a draft is a 404 to it)
    client_for(a.admin).post(f"/api/v1/assets/{asset['id']}/transition", {"to": "candidate"}, format="json")
    approve(client_for(a.admin), asset["id"])
    url = f"/api/v1/agents/{a.agent.id}/bindings"
    assert client_for(a.key).get(f"/api/v1/assets/{asset['id']}").status_code == 404
    r = client_for(a.admin).post(url, {"asset_id": asset["id"], "mode": "full", "priority": 5}, format="json")
    assert r.status_code == 201 and r.json()["mode"] == "full" and r.json()["priority"] == 5
    assert client_for(a.key).get(f"/api/v1/assets/{asset['id']}").status_code == 200
    assert [b["asset_id"] for b in client_for(a.key).get(url).json()["results"]] == [asset["id"]]
    assert last_event(a.org, action="binding.set").detail["mode"] == "full"
    # re-binding updates in place: a 200, not a 201 (nothing was created)
    r = client_for(a.admin).post(url, {"asset_id": asset["id"], "mode": "index"}, format="json")
    assert r.status_code == 200 and AgentBinding.objects.get().mode == "index"
    assert last_event(a.org, action="binding.set").detail["created"] is False
    bid = r.json()["id"]
    assert client_for(a.member).delete(f"{url}/{bid}").status_code == 403
    assert client_for(a.admin).delete(f"{url}/{bid}").status_code == 204
    assert client_for(a.key).get(f"/api/v1/assets/{asset['id']}").status_code == 404


def test_members_agents_and_other_orgs_cannot_bind(world, client_for):
    a = world["a"]
    asset = create_asset(client_for(a.admin), visibility="org")
    url = f"/api/v1/agents/{a.agent.id}/bindings"
    assert client_for(a.member).post(url, {"asset_id": asset["id"]}, format="json").status_code == 403
    assert client_for(a.key).post(url, {"asset_id": asset["id"]}, format="json").status_code == 403
    assert client_for(a.member).get(url).status_code == 403
    assert client_for(world["b"].owner).post(url, {"asset_id": asset["id"]}, format="json").status_code == 404
    assert client_for(world["outsider"]).get(url).status_code == 403
    # an asset of another org is "no such asset"
    b_asset = create_asset(client_for(world["b"].admin), visibility="org")
    r = client_for(a.admin).post(url, {"asset_id": b_asset["id"]}, format="json")
    assert r.status_code == 400
    assert AgentBinding.objects.count() == 0


def test_bindings_never_widen_visibility(world, client_for):
    a = world["a"]
    url = f"/api/v1/agents/{a.agent.id}/bindings"
    private = create_asset(client_for(a.admin), title="Mine")
    assert client_for(a.admin).post(url, {"asset_id": private["id"]}, format="json").status_code == 400
    from teams.models import Team

    other = Team.objects.create(org=a.org, name="ops", slug="ops")
    from teams.models import TeamMembership, TeamRole

    TeamMembership.objects.create(org=a.org, team=other, user=a.admin, role=TeamRole.ADMIN)
    team_asset = create_asset(client_for(a.admin), visibility="team", team_id=other.id)
    assert client_for(a.admin).post(url, {"asset_id": team_asset["id"]}, format="json").status_code == 400
    restricted = create_asset(client_for(a.admin), visibility="restricted")
    assert client_for(a.admin).post(url, {"asset_id": restricted["id"]}, format="json").status_code == 400
    grant(client_for(a.admin), "asset", restricted["id"], grantee_kind="agent", agent_id=a.agent.id)
    assert client_for(a.admin).post(url, {"asset_id": restricted["id"]}, format="json").status_code == 201
    assert client_for(a.key).get(f"/api/v1/assets/{restricted['id']}").status_code == 404  # a draft: not served
    client_for(a.admin).post(f"/api/v1/assets/{restricted['id']}/transition", {"to": "candidate"}, format="json")
    approve(client_for(a.admin), restricted["id"])
    assert client_for(a.key).get(f"/api/v1/assets/{restricted['id']}").status_code == 200


def test_schema_documents_both_binding_answers(world, client_for):
    schema = client_for(world["a"].admin).get("/api/schema/", {"format": "json"}).json()
    responses = schema["paths"]["/api/v1/agents/{agent_id}/bindings"]["post"]["responses"]
    assert {"200", "201"} <= set(responses)
    assert "served" in schema["components"]["schemas"]["BindingOutput"]["properties"]
