"""A rejected edit of an approved asset (approved → member's edit → candidate → rejected) left the
asset a draft serving its approved version that only its owner could propose again: an approver's
later edits stayed drafts, and once the owner left it stayed "draft, serving vN" for good. An
approver may now approve such a draft directly (draft → approved when an approved version exists);
members and agents may not, and a draft never approved still goes through review."""

from __future__ import annotations

import pytest

from .helpers import approve, create_asset, last_event, moved
from .test_approved_edit_review import (  # noqa: F401
    APPROVED_TEXT,
    INJECTION,
    _approved_team_skill,
    _edit,
    _stable,
    fresh_cache,
)

pytestmark = pytest.mark.django_db


def _to(client, aid, to):
    return client.post(f"/api/v1/assets/{aid}/transition", moved(aid, to), format="json")


def _rejected(world, client_for):
    aid, carol, bob = _approved_team_skill(world, client_for)
    assert _edit(carol, aid, 1, INJECTION)["status"] == "candidate"
    r = _to(bob, aid, "draft")
    assert r.status_code == 200 and r.json()["status"] == "draft" and r.json()["served_version"] == 1
    return aid, carol, bob


def test_an_approver_approves_a_rejected_edits_draft_again(world, client_for):
    a = world["a"]
    aid, _carol, bob = _rejected(world, client_for)
    fixed = "Deploy with the blue-green runbook; page the on-call first; note it in #ops."
    body = _edit(bob, aid, 2, fixed)
    assert body["status"] == "draft" and body["served_version"] == 1  # an edit of a draft is not an approval
    assert APPROVED_TEXT in _stable(client_for, world)

    body = approve(bob, aid)
    assert body["status"] == "approved" and body["approved_version"] == 3 and body["served_version"] == 3
    assert body["pending_version"] is None
    stable = _stable(client_for, world)
    assert fixed in stable and INJECTION not in stable
    ev = last_event(a.org, action="asset.transition")
    assert ev.detail["from"] == "draft" and ev.detail["to"] == "approved"
    assert ev.detail["version"] == 3 and ev.detail["previously_served_version"] == 1
    # approved again, an approver's edit is approved as saved
    assert _edit(bob, aid, 3, "Deploy on Tuesdays.")["served_version"] == 4


def test_members_and_agents_cannot_approve_the_draft(world, client_for):
    a = world["a"]
    aid, carol, _bob = _rejected(world, client_for)
    assert _to(carol, aid, "approved").status_code == 403  # the owner, but not an approver of the team
    assert _to(client_for(a.key), aid, "approved").status_code == 403  # bound agent: agents never approve
    body = carol.get(f"/api/v1/assets/{aid}").json()
    assert body["status"] == "draft" and body["approved_version"] == 1
    assert APPROVED_TEXT in _stable(client_for, world) and INJECTION not in _stable(client_for, world)
    # the owner's way is unchanged: propose it again
    assert _to(carol, aid, "candidate").status_code == 200


def test_a_draft_never_approved_still_goes_through_review(world, client_for):
    admin = client_for(world["a"].admin)
    aid = create_asset(admin, visibility="org", title="New")["id"]
    r = _to(admin, aid, "approved")
    assert r.status_code == 400 and "Illegal transition draft" in r.content.decode()
