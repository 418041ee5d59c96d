"""Two teams' "we" are two groups: the platform team's "We run Node 18" and the web team's "We
upgraded to Node 20" state two teams' tools, not one fact changed. The version rule reads two
statements that name no subject as one subject; the team each was written to tells them apart."""

from __future__ import annotations

import pytest

from reflection import conflicts, heuristics
from reflection.models import Conflict
from teams.models import Team

from .test_conflicts_shared import agent_key, say

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_teams(world):
    a = world["a"]
    web = Team.objects.create(org=a.org, name="alpha web", slug="web")
    return {"core": agent_key(a.org, "platform-bot", a.team), "web": agent_key(a.org, "web-bot", web),
            "web_team": web}


def test_two_teams_we_statements_are_not_one_changed_version(world, client_for, two_teams, no_llm):
    a = world["a"]
    old = say(client_for, two_teams["core"], "We run Node 18.", "platform-bot", "p1",
              visibility="team", team_id=a.team.id)
    # an org-wide note the web team wrote to its team: the core team reads it beside its own
    new = say(client_for, two_teams["web"], "We upgraded to Node 20.", "web-bot", "w1",
              visibility="org", team_id=two_teams["web_team"].id)
    assert old != new
    assert conflicts.detect(org_id=a.org.id, node_ids=[new]) == 0
    assert not Conflict.objects.exists()


def test_one_teams_we_statements_still_conflict(world, client_for, two_teams, no_llm):
    a = world["a"]
    team = {"visibility": "team", "team_id": a.team.id}
    old = say(client_for, two_teams["core"], "We run Node 18.", "platform-bot", "p1", **team)
    new = say(client_for, a.member, "We upgraded to Node 20.", "Dana", "m1", **team)
    assert conflicts.detect(org_id=a.org.id, node_ids=[new]) == 1
    c = Conflict.objects.get()
    assert (c.node_a_id, c.node_b_id) == (old, new) and "18" in c.reason and "20" in c.reason


def test_an_org_note_without_a_team_is_still_compared(world, client_for, two_teams, no_llm):
    """An org note written to no team has no team to tell its "we" by: compared as before."""
    a = world["a"]
    old = say(client_for, two_teams["core"], "We run Node 18.", "platform-bot", "p1",
              visibility="team", team_id=a.team.id)
    new = say(client_for, a.admin, "We upgraded to Node 20.", "Ola", "o1", visibility="org")
    assert conflicts.detect(org_id=a.org.id, node_ids=[new]) == 1
    assert Conflict.objects.filter(node_a_id=old, node_b_id=new).exists()


def test_a_named_subject_across_teams_is_still_one_subject(world, client_for, two_teams, no_llm):
    """Only two "we" statements are two groups': a statement of a named thing is about that thing."""
    a = world["a"]
    old = say(client_for, two_teams["core"], "Production runs Postgres 15.", "platform-bot", "p1",
              visibility="team", team_id=a.team.id)
    new = say(client_for, two_teams["web"], "We migrated production to Postgres 16.", "web-bot", "w1",
              visibility="org", team_id=two_teams["web_team"].id)
    assert conflicts.detect(org_id=a.org.id, node_ids=[new]) == 1
    assert Conflict.objects.filter(node_a_id=old, node_b_id=new).exists()


@pytest.mark.parametrize(("text", "plural"), [
    ("We run Node 18.", True), ("Our builds use Node 20", True), ("we're on Node 20 now", True),
    ("Let us know", True), ("Traffic from the US doubled", False), ("I run Node 18", False),
    ('The vendor said "we ship Fridays"', False),
])
def test_first_person_plural(text, plural):
    assert heuristics.first_person_plural(text) is plural
