"""People who joined by invitation before invitees chose a name are named by their email address. Agents are not handed addresses
(the members API gives them none): not in recall lines either, which go into prompts, nor in an
asset's version authors."""

from __future__ import annotations

import pytest

from teams.models import TeamMembership, TeamRole
from tests.teams.invites import legacy_member

from .helpers import create_asset, moved, weave

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]


def test_an_invited_persons_address_is_not_in_an_agents_recall_or_versions(world, client_for):
    a = world["a"]
    dana = legacy_member(a.org, "dana@example.com")
    TeamMembership.objects.create(org=a.org, team=a.team, user=dana, role=TeamRole.ADMIN)
    d = client_for(dana)
    first = weave(d, "The Falcon launch is on May 10th.", visibility="org", session="falcon")  # no speaker given
    agent = client_for(a.key)
    body = agent.post("/api/v1/context", {"query": "When is the Falcon launch?", "reinforce": False},
                      format="json").json()
    assert body["recall"] and body["recall"][0]["speaker"] == "dana"
    assert "dana@example.com" not in body["dynamic"] and "· dana]" in body["dynamic"]

    aid = create_asset(d, kind="skill", title="Launches", body="Launch on Tuesdays.", visibility="team",
                       team_id=a.team.id)["id"]
    assert d.post(f"/api/v1/assets/{aid}/transition", {"to": "candidate"}, format="json").status_code == 200
    r = d.post(f"/api/v1/assets/{aid}/transition", moved(aid, "approved", note="checked with ops"), format="json")
    assert r.status_code == 200, r.content
    r = d.post(f"/api/v1/agents/{a.agent.id}/bindings", {"asset_id": aid, "mode": "full"}, format="json")
    assert r.status_code == 201, r.content
    versions = agent.get(f"/api/v1/assets/{aid}/versions")
    assert versions.status_code == 200 and versions.json()["results"][0]["author_label"] == "user:dana"
    assert agent.get(f"/api/v1/assets/{aid}/versions/1").json()["author_label"] == "user:dana"
    assert agent.get(f"/api/v1/assets/{aid}").json()["last_move_note"]["by"] == "user:dana"
    # who resolved a conflict
    from reflection.models import Conflict

    other = weave(d, "The Falcon launch is on May 17th.", visibility="org", session="falcon-2")
    conflict = Conflict.objects.create(org=a.org, node_a_id=first, node_b_id=other, reason="rescheduled",
                                       detector="rule")
    assert d.post(f"/api/v1/conflicts/{conflict.id}/resolve", {"action": "keep_both"}, format="json").status_code == 200
    [shown] = [c for c in agent.get("/api/v1/conflicts?status=kept_both").json()["results"] if c["id"] == conflict.id]
    assert shown["resolved_by"] == "user:dana"
    # people see who it was
    assert d.get(f"/api/v1/assets/{aid}/versions").json()["results"][0]["author_label"] == "user:dana@example.com"
