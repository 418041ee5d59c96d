"""GET /assets?awaiting_approval=true: the approval queue through the API. An org owner outside the
team saw "1 asset awaits your approval" in the console, but /assets and ?status=candidate listed
nothing (a private candidate is not in the readable list; its approver reads it by id only)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from teams.models import Membership, Role, TeamMembership, TeamRole

from .helpers import approve, create_asset

pytestmark = pytest.mark.django_db

URL = "/api/v1/assets"


def _queue(client, **params) -> list[int]:
    r = client.get(URL, {"awaiting_approval": "true", **params})
    assert r.status_code == 200, r.content
    return [x["id"] for x in r.json()["results"]]


def test_the_approvers_find_the_candidates_they_may_approve(world, client_for):
    a = world["a"]
    m = client_for(a.member)
    team_aid = create_asset(m, title="Oncall")["id"]
    assert m.post(f"{URL}/{team_aid}/promote", {"visibility": "team", "team_id": a.team.id},
                  format="json").status_code == 200
    org_aid = create_asset(m, title="Org handbook")["id"]
    m.post(f"{URL}/{org_aid}/promote", {"visibility": "org"}, format="json")
    draft = create_asset(m, title="Still a draft")["id"]

    owner = client_for(a.owner)
    assert team_aid not in [x["id"] for x in owner.get(URL, {"status": "candidate"}).json()["results"]]
    assert _queue(owner) == [org_aid, team_aid]  # newest first; never the draft
    assert draft not in _queue(owner)
    assert _queue(owner, kind="wiki") == [org_aid, team_aid] and _queue(owner, kind="skill") == []
    # a team admin of the target team: the team's promotion, not the org-wide one (an org admin's)
    lead = get_user_model().objects.create_user("alpha-lead", "lead@example.com", "pw-lead-123")
    Membership.objects.create(org=a.org, user=lead, role=Role.MEMBER)
    TeamMembership.objects.create(org=a.org, team=a.team, user=lead, role=TeamRole.ADMIN)
    assert _queue(client_for(lead)) == [team_aid]
    assert _queue(m) == []  # the author is no approver of its own promotion into the team
    # nobody else's queue holds them: agents, plain members of another org
    assert _queue(client_for(a.key)) == []
    assert _queue(client_for(world["b"].owner)) == []
    # once approved it leaves the queue
    approve(owner, team_aid)
    assert _queue(owner) == [org_aid]


def test_the_flag_is_validated(world, client_for):
    r = client_for(world["a"].owner).get(URL, {"awaiting_approval": "maybe"})
    assert r.status_code == 400 and "awaiting_approval" in r.json()["error"]["fields"]
