"""A lifecycle move that is illegal from the asset's state is a 400 for everyone who may read the
asset; only a legal move by someone without the right is a 403. Before, the approver check ran
first, so a team admin asking draft → approved got a 403 about approvers while an org admin got
the 400."""

from __future__ import annotations

import pytest

from assets.models import Asset, AuditEvent
from teams.models import TeamMembership, TeamRole

from .helpers import create_asset, moved

pytestmark = pytest.mark.django_db


def _move(client, asset_id, to):
    return client.post(f"/api/v1/assets/{asset_id}/transition", moved(asset_id, to), format="json")


def _moves(org) -> int:
    return AuditEvent.objects.filter(org=org, action="asset.transition").count()


def test_illegal_move_is_400_for_every_reader_of_an_agents_draft(world, client_for):
    a = world["a"]
    aid = create_asset(client_for(a.key), kind="skill", title="Rotate keys")["id"]  # the agent's draft
    before = _moves(a.org)
    r = _move(client_for(a.key), aid, "approved")  # its owner, who may not approve
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"]["to"] == ["Illegal transition draft → approved."]
    for to in ("archived", "deprecated", "draft"):
        r = _move(client_for(a.key), aid, to)
        assert r.status_code == 400, (to, r.content)
        assert r.json()["error"]["fields"]["to"] == [f"Illegal transition draft → {to}."]
    assert Asset.objects.get(id=aid).status == "draft" and _moves(a.org) == before
    # someone who may not see the asset learns nothing about its state
    assert _move(client_for(a.member), aid, "approved").status_code == 404
    assert _move(client_for(a.admin), aid, "approved").status_code == 404
    assert _move(client_for(world["b"].admin), aid, "approved").status_code == 404


def test_illegal_move_is_400_for_a_team_admin_reading_a_team_draft(world, client_for):
    a = world["a"]
    TeamMembership.objects.filter(team=a.team, user=a.member).update(role=TeamRole.ADMIN)
    TeamMembership.objects.create(org=a.org, team=a.team, user=a.admin, role=TeamRole.MEMBER)
    aid = create_asset(client_for(a.admin), kind="wiki", title="Runbook", visibility="team",
                       team_id=a.team.id)["id"]
    r = _move(client_for(a.owner), aid, "archived")  # an org admin outside the team: legal or not, no read
    assert r.status_code in (400, 404)
    for who in (a.member, a.admin):
        r = _move(client_for(who), aid, "deprecated")
        assert r.status_code == 400, (who, r.content)
        assert r.json()["error"]["fields"]["to"] == ["Illegal transition draft → deprecated."]
    assert Asset.objects.get(id=aid).status == "draft"


def test_legal_move_without_the_right_is_still_403(world, client_for):
    a = world["a"]
    aid = create_asset(client_for(a.admin), kind="wiki", title="Onboarding", visibility="org")["id"]
    member = client_for(a.member)
    r = _move(member, aid, "candidate")  # legal, but the member only reads an org asset
    assert r.status_code == 403, r.content
    assert _move(member, aid, "approved").status_code == 400  # illegal: the 400 first
    assert _move(client_for(a.admin), aid, "candidate").status_code == 200
    r = _move(member, aid, "approved")  # now legal, and the member is no approver
    assert r.status_code == 403, r.content
    assert "approve" in r.json()["error"]["message"]
    assert Asset.objects.get(id=aid).status == "candidate"
