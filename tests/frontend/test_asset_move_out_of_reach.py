"""A lifecycle move from the console by an approver outside the asset's scope (an org admin not in
its team) leaves them unable to read it: they land on the assets list, told what happened, instead
of on the asset's page, which is a 404 to them now (first-user audit: "approved", then "Not found")."""

from __future__ import annotations

import pytest

from assets import services
from assets.models import Asset, AssetStatus
from memory.models import Visibility

from .conftest import actor

pytestmark = pytest.mark.django_db


def _team_candidate(world, title: str = "Deploy runbook") -> Asset:
    a = world["a"]
    member = actor(a.member, a.org)
    asset = services.asset_create(actor=member, kind="wiki", title=title, body="1. Merge to main.",
                                  visibility=Visibility.PRIVATE)
    return services.asset_promote(actor=member, asset=asset, visibility="team", team=a.team)


def _pending_edit(world) -> Asset:
    """An approved team asset whose member-made edit (version 2) awaits review."""
    a = world["a"]
    asset = services.asset_transition(actor=actor(a.admin, a.org), asset=_team_candidate(world), to="approved",
                                      expected_version=1)
    edited, versioned = services.asset_update(actor=actor(a.member, a.org), asset=asset,
                                              data={"body": "1. Merge to main.\n2. Tag."}, expected_version=1)
    assert versioned and edited.status == AssetStatus.CANDIDATE and edited.approved_version == 1
    return edited


def _move(client, asset: Asset, to: str):
    return client.post(f"/console/assets/{asset.id}/", {"op": "transition", "to": to,
                                                        "expected_version": asset.version})


def _messages(client) -> str:
    r = client.get("/console/assets/")
    assert r.status_code == 200
    return r.content.decode()


def test_approving_a_promotion_as_an_outside_admin_lands_on_the_list_with_a_confirmation(world, login):
    a = world["a"]
    asset = _team_candidate(world)
    admin = login(a.admin)
    assert admin.get(f"/console/assets/{asset.id}/").status_code == 200  # an approver reads it while it waits
    r = _move(admin, asset, "approved")
    assert r.status_code == 302 and r.url == "/console/assets/"
    assert Asset.objects.get(id=asset.id).status == AssetStatus.APPROVED
    html = _messages(admin)
    assert "Approved “Deploy runbook” (version 1); it is now served to the team&#x27;s agents bound to it." in html
    assert "You can no longer open it: it is not shared with you." in html
    assert admin.get(f"/console/assets/{asset.id}/").status_code == 404  # why the page was not the target


def test_approving_a_pending_edit_names_the_version_now_served(world, login):
    asset = _pending_edit(world)
    admin = login(world["a"].admin)
    r = _move(admin, asset, "approved")
    assert r.status_code == 302 and r.url == "/console/assets/"
    assert "Approved “Deploy runbook” (version 2)" in _messages(admin)


def test_sending_back_to_draft_as_an_outside_admin_says_what_is_still_served(world, login):
    admin = login(world["a"].admin)
    promoted = _team_candidate(world, "Promo runbook")
    r = _move(admin, promoted, "draft")
    assert r.status_code == 302 and r.url == "/console/assets/"
    html = _messages(admin)
    assert "Sent “Promo runbook” back to its owner as a draft (version 1); nothing of it is served." in html

    pending = _pending_edit(world)
    r = _move(admin, pending, "draft")
    assert r.status_code == 302 and r.url == "/console/assets/"
    assert Asset.objects.get(id=pending.id).status == AssetStatus.DRAFT
    assert ("Sent “Deploy runbook” back to its owner as a draft (version 2); the team&#x27;s agents bound to it "
            "are still served version 1.") in _messages(admin)


def test_a_mover_who_still_reads_the_asset_stays_on_its_page(world, login):
    """The team's own member deprecates the approved asset (deprecating never changes who reads it);
    an owner sending their own candidate back stays on it too."""
    a = world["a"]
    asset = services.asset_transition(actor=actor(a.admin, a.org), asset=_team_candidate(world), to="approved",
                                      expected_version=1)
    member = login(a.member)
    r = _move(member, asset, "deprecated")
    assert r.status_code == 302 and r.url == f"/console/assets/{asset.id}/"
    assert Asset.objects.get(id=asset.id).status == AssetStatus.DEPRECATED
    page = member.get(r.url)
    assert page.status_code == 200 and "The asset is now" in page.content.decode()

    candidate = _team_candidate(world, "Own candidate")
    r = _move(member, candidate, "draft")
    assert r.status_code == 302 and r.url == f"/console/assets/{candidate.id}/"
