"""/assets/{id}/transition and /assets/{id}/promote: the lifecycle state machine and promotion."""

from __future__ import annotations

import pytest

from assets.models import Asset, AuditEvent
from teams.models import Team, TeamMembership, TeamRole

from .helpers import approve, create_asset, last_event, moved

pytestmark = pytest.mark.django_db


def _to(client, asset_id, to, status=200):
    r = client.post(f"/api/v1/assets/{asset_id}/transition", moved(asset_id, to), format="json")
    assert r.status_code == status, r.content
    return r.json()


def test_full_lifecycle_of_a_personal_asset(world, client_for):
    c = client_for(world["a"].member)
    aid = create_asset(c)["id"]
    _to(c, aid, "approved", 400)  # draft → approved skips candidate
    _to(c, aid, "candidate")
    body = approve(c, aid)  # private target: the owner approves
    assert body["status"] == "approved" and body["approved_by_id"] == world["a"].member.id
    _to(c, aid, "draft", 400)
    _to(c, aid, "deprecated")
    _to(c, aid, "archived")
    for to in ("draft", "candidate", "approved", "deprecated"):
        _to(c, aid, to, 400)  # archived is terminal
    r = c.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "x"}, format="json")
    assert r.status_code == 400


def test_promotion_to_team_needs_a_team_admin(world, client_for):
    a = world["a"]
    m = client_for(a.member)
    aid = create_asset(m, title="Oncall")["id"]
    r = m.post(f"/api/v1/assets/{aid}/promote", {"visibility": "team", "team_id": a.team.id}, format="json")
    assert r.status_code == 200 and r.json()["status"] == "candidate" and r.json()["visibility"] == "private"
    approve(m, aid, status=403)  # the owner is not a team admin
    approve(client_for(a.key), aid, status=404)  # agents never approve (and cannot see it)
    approve(client_for(world["b"].owner), aid, status=404)
    # A team admin of the target team approves: the visibility changes and the approver is recorded.
    TeamMembership.objects.create(org=a.org, team=a.team, user=a.admin, role=TeamRole.MEMBER)
    approve(client_for(a.admin), aid)  # an org admin may approve team promotions
    asset = Asset.objects.get(id=aid)
    assert asset.visibility == "team" and asset.team_id == a.team.id and asset.approved_by_id == a.admin.id
    ev = last_event(a.org, action="asset.transition")
    assert ev.detail["approver"] == f"user:{a.admin.username}" and ev.detail["promotion"]["visibility"] == "team"


def test_team_admin_approves_team_promotion_but_not_org_promotion(world, client_for):
    a = world["a"]
    lead = a.member
    TeamMembership.objects.filter(team=a.team, user=lead).update(role=TeamRole.ADMIN)
    writer = client_for(a.key)  # the team's agent proposes
    aid = create_asset(writer, title="Agent notes", visibility="private")["id"]
    assert writer.post(f"/api/v1/assets/{aid}/promote", {"visibility": "team"},
                       format="json").status_code == 200
    assert client_for(lead).get(f"/api/v1/assets/{aid}").status_code == 200  # approvers can read candidates
    approve(client_for(lead), aid)
    assert Asset.objects.get(id=aid).visibility == "team"

    aid2 = create_asset(client_for(lead), title="Org wide")["id"]
    client_for(lead).post(f"/api/v1/assets/{aid2}/promote", {"visibility": "org"}, format="json")
    approve(client_for(lead), aid2, status=403)  # org promotion needs an org admin
    approve(client_for(a.owner), aid2)
    assert Asset.objects.get(id=aid2).visibility == "org"


def test_rejection_returns_to_draft_and_only_drafts_promote(world, client_for):
    a = world["a"]
    m = client_for(a.member)
    aid = create_asset(m)["id"]
    m.post(f"/api/v1/assets/{aid}/promote", {"visibility": "org"}, format="json")
    r = m.post(f"/api/v1/assets/{aid}/promote", {"visibility": "org"}, format="json")
    assert r.status_code == 400
    _to(client_for(a.admin), aid, "draft")  # an approver rejects
    asset = Asset.objects.get(id=aid)
    assert asset.status == "draft" and asset.promotion == {} and asset.visibility == "private"
    assert last_event(a.org, action="asset.transition").detail["rejected_promotion"]["visibility"] == "org"


def test_promotion_to_a_team_you_are_not_in_is_refused(world, client_for):
    a = world["a"]
    aid = create_asset(client_for(a.admin))["id"]
    r = client_for(a.admin).post(f"/api/v1/assets/{aid}/promote", {"visibility": "team", "team_id": a.team.id},
                                 format="json")
    assert r.status_code == 400
    r = client_for(a.member).post(f"/api/v1/assets/{aid}/promote", {"visibility": "org"}, format="json")
    assert r.status_code == 404  # not the owner's, and private


def test_transition_with_stale_version_is_409(world, client_for):
    c = client_for(world["a"].member)
    aid = create_asset(c)["id"]
    c.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "new"}, format="json")
    r = c.post(f"/api/v1/assets/{aid}/transition", {"to": "candidate", "expected_version": 1}, format="json")
    assert r.status_code == 409


def test_deleting_a_team_withdraws_the_promotions_to_it(world, client_for):
    """A member promotes to team T, the owner deletes T: the candidate goes back to draft (audited),
    so it leaves the approval queue and approving it is refused (4xx), never a foreign-key failure."""
    a = world["a"]
    m, owner = client_for(a.member), client_for(a.owner)
    aid = create_asset(m, title="Oncall")["id"]
    assert m.post(f"/api/v1/assets/{aid}/promote", {"visibility": "team", "team_id": a.team.id},
                  format="json").status_code == 200
    other = create_asset(m, title="Org note")["id"]  # a promotion naming no team is not touched
    m.post(f"/api/v1/assets/{other}/promote", {"visibility": "org"}, format="json")

    assert owner.delete(f"/api/v1/teams/{a.team.id}").status_code == 200
    asset = Asset.objects.get(id=aid)
    assert (asset.status, asset.promotion, asset.visibility, asset.team_id) == ("draft", {}, "private", None)
    ev = last_event(a.org, action="asset.transition", object_id=str(aid))
    assert ev.reason == "target_team_deleted" and ev.detail["withdrawn_promotion"]["team_id"] == a.team.id
    assert Asset.objects.get(id=other).status == "candidate"

    # No longer a candidate: the org owner no longer sees it (a private draft), its owner may not
    # approve a draft (draft → approved is illegal).
    approve(owner, aid, status=404)
    approve(m, aid, status=400)
    assert Asset.objects.get(id=aid).status == "draft"
    # The owner may promote it again, to a scope that exists.
    assert m.post(f"/api/v1/assets/{aid}/promote", {"visibility": "org"}, format="json").status_code == 200


def test_approving_a_promotion_whose_team_is_gone_is_409_and_writes_nothing(world, client_for):
    """The guard for a promotion that slipped past the withdrawal (proposed while the team was
    being deleted): approving it is refused with a clear code, the candidate left as it was."""
    a = world["a"]
    m = client_for(a.member)
    aid = create_asset(m, title="Oncall")["id"]
    m.post(f"/api/v1/assets/{aid}/promote", {"visibility": "team", "team_id": a.team.id}, format="json")
    Team.objects.filter(id=a.team.id).delete()  # the row goes without the service's withdrawal
    before = AuditEvent.objects.filter(org=a.org, action="asset.transition").count()

    r = client_for(a.owner).post(f"/api/v1/assets/{aid}/transition", moved(aid, "approved"), format="json")
    assert r.status_code == 409, r.content
    assert r.json()["error"]["code"] == "target_team_gone"
    asset = Asset.objects.get(id=aid)
    assert (asset.status, asset.visibility, asset.team_id, asset.approved_by_id) == ("candidate", "private", None,
                                                                                     None)
    assert asset.promotion["team_id"] == a.team.id
    assert AuditEvent.objects.filter(org=a.org, action="asset.transition").count() == before
    # The owner can still withdraw it, and nothing else is stuck.
    _to(m, aid, "draft")
    assert Asset.objects.get(id=aid).promotion == {}
