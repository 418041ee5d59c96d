"""The person who creates a team becomes its team admin. An org admin is not in a team by its role, so
the org owner who created a team through the console was left outside it: their dashboard showed
"Nodes 0" and a note that memories are shared within teams they are not in."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from assets.models import AuditEvent
from teams import services
from teams.auth import Actor
from teams.models import Agent, Role, Team, TeamMembership, TeamRole

pytestmark = pytest.mark.django_db


def test_the_console_creator_is_the_team_admin_and_sees_its_memories(world, client_for):
    a = world["a"]
    console = Client()
    console.force_login(a.owner)
    r = console.post("/console/teams/", {"name": "Platform", "description": ""})
    assert r.status_code == 302, r.content.decode()[:500]
    team = Team.objects.get(org=a.org, name="Platform")
    assert list(TeamMembership.objects.filter(team=team).values_list("user_id", "role")) == [
        (a.owner.id, TeamRole.ADMIN)]

    # an agent of the new team writes a team memory: the creator's dashboard counts it
    bot = Agent.objects.create(org=a.org, name="platform-bot", team=team, default_visibility="team")
    key = services.api_key_create(actor=None, agent=bot, name="k")[1]
    r = client_for(key).post("/api/v1/memories/weave", {"text": "Platform runs the deploy pipeline."}, format="json")
    assert r.status_code == 201, r.content
    html = console.get("/console/").content.decode()
    assert re.search(r'id="node-total">1<', html), re.findall(r'id="node-total">[^<]*', html)
    assert 'id="team-memories-hint"' not in html


def test_the_api_creator_is_listed_as_the_team_admin(world, client_for):
    a = world["a"]
    c = client_for(a.admin)
    team = c.post("/api/v1/teams", {"name": "Ops"}, format="json").json()
    members = c.get(f"/api/v1/teams/{team['id']}/members").json()["results"]
    assert [(m["user_id"], m["role"]) for m in members] == [(a.admin.id, "admin")], members
    ev = AuditEvent.objects.get(org=a.org, action="team.create", object_id=str(team["id"]))
    assert ev.detail == {"name": "Ops", "admin_user_id": a.admin.id}


def test_a_team_created_by_an_agent_actor_has_no_member(world):
    # Agents have no org role and are refused (403) before this; an actor without a person is never
    # made a member, whatever its role says.
    a = world["a"]
    team = services.team_create(actor=Actor(org=a.org, agent=a.agent, role=Role.ADMIN), name="Bots")
    assert not TeamMembership.objects.filter(team=team).exists()
