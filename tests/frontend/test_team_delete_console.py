"""The console's team deletion: the page says what the team holds and asks what becomes of it; the
confirmation names the counts; the answer says what was done (teams.services.team_delete)."""

from __future__ import annotations

import html

import pytest

from memory.models import Node, Visibility
from teams.auth import actor_for_agent
from teams.models import Agent, Team

from .conftest import weave

pytestmark = pytest.mark.django_db


@pytest.fixture
def temp(world):
    a = world["a"]
    team = Team.objects.create(org=a.org, name="Temp", slug="temp")
    bot = Agent.objects.create(org=a.org, name="temp-bot", team=team, default_visibility="team")
    node = weave(actor_for_agent(bot, scopes=frozenset({"read", "write"})), "Temp runbook lives in the wiki.",
                 visibility=Visibility.TEAM)[0]
    assert Node.objects.get(id=node).team_id == team.id
    return {"team": team, "bot": bot, "node": node}


def test_the_page_names_the_counts_and_the_choices(world, login, temp):
    r = login(world["a"].owner).get(f"/console/teams/{temp['team'].id}/")
    body = html.unescape(r.content.decode())
    assert "1 memory and 0 assets are shared with this team" in body
    assert 'name="memories" value="move"' in body and 'name="memories" value="private"' in body
    # The confirmation says what will happen, with the counts and the agent.
    assert "1 memory and 0 assets shared with it become private to their writers" in body
    assert "1 memory and 0 assets shared with it move to team %(team)s" in body
    assert "Delete team Temp? Its agent temp-bot leaves it" in body


def test_deleting_without_a_choice_is_refused_on_the_page(world, login, temp):
    r = login(world["a"].owner).post(f"/console/teams/{temp['team'].id}/", {"op": "delete"})
    assert r.status_code == 409
    body = html.unescape(r.content.decode())
    assert "1 memory and 0 assets are still shared with this team: choose below whether they move" in body
    assert "memories=private" not in body  # the API's parameter, not the page's words
    # the page asks for a choice before it submits (the confirmation would otherwise come first)
    assert 'name="memories" value="private" required' in body
    assert Team.objects.filter(id=temp["team"].id).exists()


def test_private_then_the_message_says_what_was_done(world, login, temp):
    c = login(world["a"].owner)
    r = c.post(f"/console/teams/{temp['team'].id}/", {"op": "delete", "memories": "private"}, follow=True)
    assert r.status_code == 200
    body = html.unescape(r.content.decode())
    assert "Team “Temp” deleted. 1 memory and 0 assets made private to their writers." in body
    assert "temp-bot (its writes that name no visibility are now private)" in body
    assert not Team.objects.filter(id=temp["team"].id).exists()
    assert (Node.objects.get(id=temp["node"]).visibility, Agent.objects.get(id=temp["bot"].id).default_visibility) \
        == ("private", "private")


def test_move_to_another_team(world, login, temp):
    a = world["a"]
    r = login(a.owner).post(f"/console/teams/{temp['team'].id}/",
                            {"op": "delete", "memories": "move", "to_team": a.team.id}, follow=True)
    assert "moved to team alpha core" in html.unescape(r.content.decode())
    assert Node.objects.get(id=temp["node"]).team_id == a.team.id
    # another org's team is no target
    other = Team.objects.create(org=a.org, name="Other", slug="other")
    r = login(a.owner).post(f"/console/teams/{other.id}/",
                            {"op": "delete", "memories": "move", "to_team": world["b"].team.id})
    assert r.status_code == 400 and Team.objects.filter(id=other.id).exists()
