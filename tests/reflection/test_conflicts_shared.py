"""Contradictions between writers who share memory: two agents of one team, an agent and a member,
a team statement and an org one. Candidates were the nearest nodes of the same owner and the same
speaker only, so the planner's "Redis 6.2" and the coder's "Redis 7.4" in their team's memory were
never compared. A pair is only ever made of nodes some reader sees side by side, and listed only to
callers who may read both."""

from __future__ import annotations

import pytest

from reflection import conflicts
from reflection.models import Conflict
from teams import services as team_services
from teams.models import Agent, Team, TeamMembership, TeamRole

from .helpers import weave

pytestmark = pytest.mark.django_db

T0 = "2024-11-14T10:00:00Z"


def agent_key(org, name: str, team=None) -> str:
    agent = Agent.objects.create(org=org, name=name, team=team)
    return team_services.api_key_create(actor=None, agent=agent, name="test")[1]


@pytest.fixture
def crew(world):
    """planner, coder and support-bot: agents of the alpha core team (as the member is)."""
    a = world["a"]
    return {name: agent_key(a.org, name, a.team) for name in ("planner", "coder", "support-bot")}


def say(client_for, who, text: str, speaker: str, key: str, **extra) -> int:
    turns = [{"speaker": speaker, "text": text, "occurred_at": T0}]
    return weave(client_for(who), key, turns=turns, end=False, **extra)["node_ids"][0]


def listed(client_for, who) -> list[tuple[int, int]]:
    rows = client_for(who).get("/api/v1/conflicts").json()["results"]
    return [(r["node_a"]["id"], r["node_b"]["id"]) for r in rows]


def test_two_agents_of_a_team_contradicting_each_other_are_flagged(world, client_for, crew, no_llm):
    a = world["a"]
    team = {"visibility": "team", "team_id": a.team.id}
    old = say(client_for, crew["planner"], "The staging Redis cluster runs Redis 6.2.", "planner", "p1", **team)
    new = say(client_for, crew["coder"], "The staging Redis cluster runs Redis 7.4.", "coder", "c1", **team)
    assert conflicts.detect(org_id=a.org.id, node_ids=[new]) == 1
    c = Conflict.objects.get()
    assert (c.node_a_id, c.node_b_id) == (old, new) and "6.2" in c.reason and "7.4" in c.reason
    # every reader of the team's memory sees it, and may not resolve what it cannot change
    for who in (crew["planner"], crew["coder"], crew["support-bot"], a.member):
        assert listed(client_for, who) == [(old, new)]
    # readers outside the team see neither node, so not the conflict (an org admin included)
    assert listed(client_for, a.admin) == [] and listed(client_for, a.owner) == []


def test_a_stated_migration_contradicts_what_another_agent_said_runs(world, client_for, crew, no_llm):
    a = world["a"]
    old = say(client_for, crew["planner"], "Production runs Postgres 15.", "planner", "p1", visibility="org")
    new = say(client_for, crew["coder"], "We migrated production to Postgres 16.", "coder", "c1", visibility="org")
    assert conflicts.detect(org_id=a.org.id, node_ids=[new]) == 1
    c = Conflict.objects.get()
    assert {c.node_a_id, c.node_b_id} == {old, new} and "15" in c.reason and "16" in c.reason
    assert listed(client_for, a.admin) == [(old, new)]  # org memory: every member reads both


def test_a_member_and_an_agent_and_a_team_and_an_org_statement(world, client_for, crew, no_llm):
    """A user-owned node beside an agent-owned one (the owner filter must not drop NULL owners),
    and a team node beside an org node: the conflict is listed to those who read both only."""
    a = world["a"]
    team = {"visibility": "team", "team_id": a.team.id}
    mine = say(client_for, a.member, "We deploy on Fridays at 14:00 UTC after the freeze ends.", "Dana", "m1", **team)
    theirs = say(client_for, crew["coder"], "We never deploy on Fridays.", "coder", "c1", visibility="org")
    assert conflicts.detect(org_id=a.org.id, node_ids=[theirs]) == 1
    assert "negation" in Conflict.objects.get().reason
    assert listed(client_for, a.member) == [(mine, theirs)] and listed(client_for, crew["planner"]) == [(mine, theirs)]
    assert listed(client_for, a.admin) == []  # reads the org node, not the team's
    # found from either side: the same pair when the team node is the new one
    Conflict.objects.all().delete()
    assert conflicts.detect(org_id=a.org.id, node_ids=[mine]) == 1


def test_no_pair_outside_a_shared_audience(world, client_for, crew, no_llm):
    """Nothing private is set beside another writer's memory, nor a restricted node (its ACL is its
    own), nor two teams' memories that no reader shares by the node's scope."""
    a = world["a"]
    ops = Team.objects.create(org=a.org, name="alpha ops", slug="ops")
    TeamMembership.objects.create(org=a.org, team=ops, user=a.admin, role=TeamRole.MEMBER)
    ops_bot = agent_key(a.org, "ops-bot", ops)
    claim = "The staging Redis cluster runs Redis 6.2."
    deny = "The staging Redis cluster runs Redis 7.4."
    ids = [
        say(client_for, crew["planner"], claim, "planner", "p1"),  # private
        say(client_for, crew["coder"], deny, "coder", "c1", visibility="team", team_id=a.team.id),
        say(client_for, ops_bot, deny, "ops-bot", "o1", visibility="team", team_id=ops.id),
        say(client_for, a.member, claim, "Dana", "m1", visibility="restricted"),
    ]
    assert conflicts.detect(org_id=a.org.id, node_ids=ids) == 0
    # the one pair with a shared audience: two nodes of the core team
    ids.append(say(client_for, crew["support-bot"], claim, "support-bot", "s1", visibility="team", team_id=a.team.id))
    assert conflicts.detect(org_id=a.org.id, node_ids=[ids[4]]) == 1
    assert {(c.node_a_id, c.node_b_id) for c in Conflict.objects.all()} == {(ids[1], ids[4])}


def test_first_person_statements_of_different_speakers_are_not_compared(world, client_for, crew, no_llm):
    """"I" is the speaker: the planner's "I prefer ..." and the coder's "I don't prefer ..." are two
    agents' own preferences, while "we" in team chat is the team (flagged above)."""
    a = world["a"]
    team = {"visibility": "team", "team_id": a.team.id}
    say(client_for, crew["planner"], "I prefer short standups on Mondays.", "planner", "p1", **team)
    new = say(client_for, crew["coder"], "I don't prefer short standups on Mondays.", "coder", "c1", **team)
    assert conflicts.detect(org_id=a.org.id, node_ids=[new]) == 0
