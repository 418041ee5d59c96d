"""An approval covers the audience it was given for. A plain member owning an approved team asset
got unreviewed text served to the team's agents: one PATCH narrowed it to private and changed the
body (as the owner of a private asset she was its approver, so the edit was saved approved), a
second made it restricted, and a grant to the team's members made the binding eligible again. The
edit is now judged for the scope before the change, and an approval made while private lapses when
the asset becomes restricted."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from assets.models import Asset

from .helpers import last_event
from .test_approved_edit_review import APPROVED_TEXT, INJECTION, _approved_team_skill, _stable, fresh_cache  # noqa: F401

pytestmark = pytest.mark.django_db


def _patch(client, aid, **body):
    r = client.patch(f"/api/v1/assets/{aid}", body, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def _grant_team(client, aid, team_id):
    r = client.post("/api/v1/grants", {"object_type": "asset", "object_id": aid, "grantee_kind": "team_role",
                                       "team_id": team_id, "team_role": "member"}, format="json")
    assert r.status_code == 201, r.content


def test_narrowing_to_private_with_an_edit_is_not_an_approval(world, client_for):
    a = world["a"]
    aid, carol, _bob = _approved_team_skill(world, client_for)
    body = _patch(carol, aid, expected_version=1, visibility="private", body=INJECTION)
    assert body["status"] == "candidate" and body["approved_version"] == 1  # judged as the team asset it was
    _patch(carol, aid, expected_version=2, visibility="restricted")
    _grant_team(carol, aid, a.team.id)
    stable = _stable(client_for, world)
    # Made restricted by someone who may not approve it for its grantees, the asset serves nothing
    # until an approver of the restricted asset approves a version.
    assert INJECTION not in stable and APPROVED_TEXT not in stable
    assert Asset.objects.get(pk=aid).approved_version is None


def test_an_approval_made_while_private_lapses_when_the_asset_becomes_restricted(world, client_for):
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    assert _patch(carol, aid, expected_version=1, body=INJECTION)["status"] == "candidate"
    _patch(carol, aid, expected_version=2, visibility="private")
    # private: its owner is its approver, for herself
    r = carol.post(f"/api/v1/assets/{aid}/transition", {"to": "approved", "expected_version": 2}, format="json")
    assert r.status_code == 200 and r.json()["approved_version"] == 2
    body = _patch(carol, aid, expected_version=2, visibility="restricted")
    assert body["status"] == "candidate" and body["approved_version"] is None and body["served_version"] is None
    ev = last_event(a.org, action="asset.update")
    assert ev.detail["review"] == "approval_lapsed" and ev.detail["previously_served_version"] == 2
    _grant_team(carol, aid, a.team.id)
    stable = _stable(client_for, world)
    assert INJECTION not in stable
    # carol cannot approve it for the restricted audience; nothing is served until an approver does
    r = carol.post(f"/api/v1/assets/{aid}/transition", {"to": "approved", "expected_version": 2}, format="json")
    assert r.status_code == 403


def test_an_approver_keeps_the_approval_through_the_same_moves(world, client_for):
    """The org admin owns and approves its asset: narrowing private → restricted keeps it served."""
    from .helpers import approve, create_asset

    a = world["a"]
    admin = client_for(a.admin)
    aid = create_asset(admin, kind="skill", title="Ops", body=APPROVED_TEXT, visibility="org")["id"]
    assert admin.post(f"/api/v1/assets/{aid}/transition", {"to": "candidate"}, format="json").status_code == 200
    approve(admin, aid)
    _patch(admin, aid, expected_version=1, visibility="private")
    body = _patch(admin, aid, expected_version=1, visibility="restricted")
    assert body["status"] == "approved" and body["approved_version"] == 1


def test_the_service_refuses_an_approval_that_names_no_version(world, client_for):
    """Every caller names the version it approves: the API's input and the console's form did, a
    hand-made console POST without it approved whatever the owner had saved since."""
    from rest_framework.exceptions import ValidationError

    from assets import services
    from assets.models import Asset
    from teams.auth import Actor

    from .helpers import create_asset

    a = world["a"]
    admin = client_for(a.admin)
    aid = create_asset(admin, kind="skill", title="Ops", body=APPROVED_TEXT, visibility="org")["id"]
    assert admin.post(f"/api/v1/assets/{aid}/transition", {"to": "candidate"}, format="json").status_code == 200
    with pytest.raises(ValidationError) as exc:
        services.asset_transition(actor=Actor(org=a.org, user=a.admin, role="admin"),
                                  asset=Asset.objects.get(pk=aid), to="approved")
    assert "expected_version" in exc.value.detail
    assert Asset.objects.get(pk=aid).status == "candidate"


def test_a_version_only_its_owner_approved_never_reaches_agents(world, client_for):
    """v1 approved for the team; carol's v2 approved by herself while private; the approval lapses
    when she makes it restricted; bob approves her v3. The agent reads v3 and v1, never v2."""
    from .helpers import approve, grant

    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    assert _patch(carol, aid, expected_version=1, body=INJECTION)["status"] == "candidate"
    _patch(carol, aid, expected_version=2, visibility="private")
    r = carol.post(f"/api/v1/assets/{aid}/transition", {"to": "approved", "expected_version": 2}, format="json")
    assert r.status_code == 200
    _patch(carol, aid, expected_version=2, visibility="restricted")
    _grant_team(carol, aid, a.team.id)
    grant(carol, "asset", aid, grantee_kind="user", user_id=get_user_model().objects.get(username="alpha-bob").id,
          permission="write")
    _patch(carol, aid, expected_version=2, body="Deploy blue-green; page on-call; note it in #ops.")
    approve(bob, aid)
    bot = client_for(a.key)
    rows = bot.get(f"/api/v1/assets/{aid}/versions").json()["results"]
    assert [v["version"] for v in rows] == [3, 1] and INJECTION not in str(rows)
    assert bot.get(f"/api/v1/assets/{aid}/versions/2").status_code == 404


def test_an_agent_is_not_told_of_a_rejected_edit_by_the_move_note(world, client_for):
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    _patch(carol, aid, expected_version=1, body=INJECTION)
    r = bob.post(f"/api/v1/assets/{aid}/transition", {"to": "draft", "note": f"v2 says: {INJECTION}"}, format="json")
    assert r.status_code == 200
    got = client_for(a.key).get(f"/api/v1/assets/{aid}").json()
    assert got["version"] == 1 and got["last_move_note"] == {} and INJECTION not in str(got)
    assert carol.get(f"/api/v1/assets/{aid}").json()["last_move_note"]["note"].startswith("v2 says")
