"""Deleting a team settles what named it, in one transaction (teams.services.team_delete).

Before: the team's agents kept default_visibility "team" with no team, so each of their writes that
named no visibility was a 400 (MCP and the proxy's write-back failing in the background), and the
team's memories became "team" with no team: readable by their owner alone, with no way back."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from assets import services as asset_services
from assets.models import AccessGrant, Asset, AuditEvent
from memory.models import Node
from teams import services
from teams.auth import actor_for_user
from teams.models import Agent, Membership, Role, Team, TeamMembership

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]


@pytest.fixture
def temp(world, client_for):
    """The audit's steps: team Temp with member erin, agent temp-bot in it; temp-bot weaves."""
    a = world["a"]
    owner = client_for(a.owner)
    erin = get_user_model().objects.create_user("erin", "erin@example.com", "pw-erin-123")
    Membership.objects.create(org=a.org, user=erin, role=Role.MEMBER)
    team = owner.post("/api/v1/teams", {"name": "Temp"}, format="json").json()
    assert owner.post(f"/api/v1/teams/{team['id']}/members", {"user_id": erin.id}, format="json").status_code == 201
    bot = owner.post("/api/v1/agents", {"name": "temp-bot", "team_id": team["id"]}, format="json").json()
    assert bot["default_visibility"] == "team"
    key = services.api_key_create(actor=None, agent=Agent.objects.get(id=bot["id"]), name="k")[1]
    r = client_for(key).post("/api/v1/memories/weave", {"text": "The Temp runbook lives in the wiki."},
                             format="json")
    assert r.status_code == 201, r.content
    node_id = r.json()["node_ids"][0]
    assert Node.objects.get(id=node_id).visibility == "team"
    # erin's own team asset, shared with Temp.
    asset = asset_services.asset_create(actor=actor_for_user(erin, a.org), kind="wiki", title="Temp oncall",
                                        visibility="private", body="page")
    Asset.objects.filter(id=asset.id).update(visibility="team", team_id=team["id"], status="approved")
    return {"team": team, "erin": erin, "bot": bot, "key": key, "node": node_id, "asset": asset.id}


def _orphans() -> int:
    return (Node.objects.filter(visibility="team", team__isnull=True).count()
            + Asset.objects.filter(visibility="team", team__isnull=True).count())


def test_refused_while_it_holds_shared_memories_and_nothing_changes(world, client_for, temp):
    a = world["a"]
    r = client_for(a.owner).delete(f"/api/v1/teams/{temp['team']['id']}")
    assert r.status_code == 409, r.content
    err = r.json()["error"]
    assert err["code"] == "team_not_empty"
    assert "1 memory and 1 asset" in err["message"] and err["counts"] == {"memories": 1, "assets": 1}
    assert "memories=move" in err["fields"]["memories"][0] and "memories=private" in err["fields"]["memories"][0]
    assert Team.objects.filter(id=temp["team"]["id"]).exists()
    assert Agent.objects.get(id=temp["bot"]["id"]).default_visibility == "team"
    assert Node.objects.get(id=temp["node"]).team_id == temp["team"]["id"]
    assert not AuditEvent.objects.filter(org=a.org, action="team.delete").exists()


def test_private_narrows_everything_and_the_agent_keeps_writing(world, client_for, temp):
    a = world["a"]
    r = client_for(a.owner).delete(f"/api/v1/teams/{temp['team']['id']}?memories=private")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["memories"] == "private" and body["to_team"] is None
    assert body["nodes"] == {"shared": 1, "other": 0} and body["assets"] == {"shared": 1, "other": 0}
    assert body["agents"] == [{"id": temp["bot"]["id"], "name": "temp-bot", "default_visibility": "private",
                               "previous_default_visibility": "team"}]
    assert not Team.objects.filter(id=temp["team"]["id"]).exists()
    node = Node.objects.get(id=temp["node"])
    assert (node.visibility, node.team_id) == ("private", None)
    asset = Asset.objects.get(id=temp["asset"])
    assert (asset.visibility, asset.team_id) == ("private", None)
    assert _orphans() == 0
    # The agent's writes that name no visibility still work (before: 400 "Team visibility needs a team").
    bot = client_for(temp["key"])
    r = bot.post("/api/v1/memories/weave", {"text": "After the team went."}, format="json")
    assert r.status_code == 201, r.content
    assert Node.objects.get(id=r.json()["node_ids"][0]).visibility == "private"
    assert bot.get(f"/api/v1/memories/nodes/{temp['node']}").status_code == 200  # its writer still reads it
    assert client_for(a.owner).get(f"/api/v1/memories/nodes/{temp['node']}").status_code == 404
    ev = AuditEvent.objects.get(org=a.org, action="team.delete")
    assert ev.detail["memories"] == "private" and ev.detail["nodes"]["shared"] == 1
    assert ev.detail["agents"][0]["name"] == "temp-bot"


def test_move_hands_them_to_another_team(world, client_for, temp):
    a = world["a"]
    owner = client_for(a.owner)
    # An org-visible memory written for Temp (its label gave Temp's admins write rights) moves too.
    erin = actor_for_user(temp["erin"], a.org)
    from memory import services as memory_services

    org_node = memory_services.weave_session(
        actor=erin, turns=[memory_services.TurnIn(text="Temp's public note.")], visibility="org",
        team=Team.objects.get(id=temp["team"]["id"])).node_ids[0]
    r = owner.delete(f"/api/v1/teams/{temp['team']['id']}?memories=move&to_team_id={a.team.id}")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["to_team"] == {"id": a.team.id, "name": a.team.name}
    assert body["nodes"] == {"shared": 1, "other": 1}
    assert (Node.objects.get(id=temp["node"]).visibility, Node.objects.get(id=temp["node"]).team_id) == \
        ("team", a.team.id)
    assert Node.objects.get(id=org_node).team_id == a.team.id
    assert Asset.objects.get(id=temp["asset"]).team_id == a.team.id
    # The core team's member reads the moved memory now; erin, who was in Temp only, does not.
    assert client_for(a.member).get(f"/api/v1/memories/nodes/{temp['node']}").status_code == 200
    assert client_for(temp["erin"]).get(f"/api/v1/memories/nodes/{temp['node']}").status_code == 404
    # The agent left with the team; it is not moved into core (that would widen what it reads).
    bot = Agent.objects.get(id=temp["bot"]["id"])
    assert (bot.team_id, bot.default_visibility) == (None, "private")
    assert _orphans() == 0


def test_choice_is_validated(world, client_for, temp):
    a, b = world["a"], world["b"]
    owner = client_for(a.owner)
    url = f"/api/v1/teams/{temp['team']['id']}"
    cases = [
        ("?memories=move", "to_team_id"),
        (f"?memories=move&to_team_id={temp['team']['id']}", "to_team_id"),
        (f"?memories=move&to_team_id={b.team.id}", "to_team_id"),  # another org's team
        (f"?memories=private&to_team_id={a.team.id}", "to_team_id"),
        ("?memories=drop", "memories"),
        ("?memory=private", "memory"),
    ]
    for query, field in cases:
        r = owner.delete(url + query)
        assert r.status_code == 400, (query, r.content)
        assert field in r.json()["error"]["fields"], (query, r.json())
    assert Team.objects.filter(id=temp["team"]["id"]).exists()


def test_an_empty_team_goes_without_a_choice_and_its_grants_go_with_it(world, client_for):
    a = world["a"]
    owner = client_for(a.owner)
    team = owner.post("/api/v1/teams", {"name": "Empty"}, format="json").json()
    node = Node.objects.create(org=a.org, owner_user=a.owner, visibility="restricted", text="x",
                               occurred_at="2026-01-01T00:00:00Z", tension_updated_at="2026-01-01T00:00:00Z")
    AccessGrant.objects.create(org=a.org, object_type="node", object_id=node.id, grantee_kind="team_role",
                               grantee_team_id=team["id"], grantee_team_role="member", permission="read")
    TeamMembership.objects.create(org=a.org, team_id=team["id"], user=a.member)
    r = owner.delete(f"/api/v1/teams/{team['id']}")
    assert r.status_code == 200, r.content
    assert r.json()["grants_removed"] == 1 and r.json()["agents"] == []
    assert not AccessGrant.objects.filter(object_id=node.id).exists()


def test_the_schema_documents_the_choice_and_the_answer():
    from drf_spectacular.generators import SchemaGenerator

    op = SchemaGenerator().get_schema(request=None, public=True)["paths"]["/api/v1/teams/{team_id}"]["delete"]
    assert {p["name"] for p in op["parameters"] if p["in"] == "query"} == {"memories", "to_team_id"}
    assert {"200", "400", "409"} <= set(op["responses"])
