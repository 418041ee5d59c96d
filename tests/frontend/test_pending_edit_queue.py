"""An approved shared asset edited by someone who may not approve it waits for review: its edit must
reach the approvers' "Awaiting your approval" queue, not only the asset list filtered on status."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from frontend import selectors
from teams.auth import Actor
from teams.models import Role
from tests.assets.helpers import moved
from tests.assets.test_approved_edit_review import _approved_team_skill, _edit

pytestmark = pytest.mark.django_db


def _user_actor(user, org, *, role=Role.MEMBER, team_admin_ids=frozenset(), team_ids=frozenset()) -> Actor:
    return Actor(org=org, user=user, role=role, team_ids=frozenset(team_ids), team_admin_ids=frozenset(team_admin_ids))


def test_a_pending_edit_is_in_the_approvers_queue(world, client_for):
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    bob_user = get_user_model().objects.get(username="alpha-bob")
    team_admin = _user_actor(bob_user, a.org, team_admin_ids={a.team.id}, team_ids={a.team.id})
    org_admin = _user_actor(a.admin, a.org, role=Role.ADMIN)
    member = _user_actor(a.member, a.org, team_ids={a.team.id})
    assert aid not in [x.id for x in selectors.assets_awaiting_approval(actor=team_admin)]  # approved: nothing owed

    _edit(carol, aid, 1, "Deploy on Tuesdays only.")
    assert aid in [x.id for x in selectors.assets_awaiting_approval(actor=team_admin)]
    assert aid in [x.id for x in selectors.assets_awaiting_approval(actor=org_admin)]
    assert selectors.assets_awaiting_approval(actor=member) == []  # not an approver
    other_team_admin = _user_actor(bob_user, a.org, team_admin_ids={a.team.id + 10_000})
    assert aid not in [x.id for x in selectors.assets_awaiting_approval(actor=other_team_admin)]


def test_an_org_admin_outside_the_team_can_open_and_approve_a_pending_edit(world, client_for):
    # The queue listed it to her, but the asset (team visibility, a team she is not in) was a 404 to
    # open and to approve; a promotion to the same team was readable by its approver all along.
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    _edit(carol, aid, 1, "Deploy on Tuesdays only.")
    admin = client_for(a.admin)
    assert aid in [x.id for x in selectors.assets_awaiting_approval(actor=_user_actor(a.admin, a.org, role=Role.ADMIN))]
    r = admin.get(f"/api/v1/assets/{aid}")
    assert r.status_code == 200 and r.json()["body"] == "Deploy on Tuesdays only."
    r = admin.post(f"/api/v1/assets/{aid}/transition", moved(aid, "approved"), format="json")
    assert r.status_code == 200 and r.json()["served_version"] == 2, r.content
    # once approved, the team asset is again the team's: she is not in it
    assert admin.get(f"/api/v1/assets/{aid}").status_code == 404


def test_the_queue_line_of_an_edit_says_which_version_awaits_and_which_is_served(world, client_for):
    from django.test import Client

    aid, carol, bob = _approved_team_skill(world, client_for)
    _edit(carol, aid, 1, "Deploy on Tuesdays only.")
    console = Client()
    console.force_login(get_user_model().objects.get(username="alpha-bob"))
    queue = console.get("/console/assets/").content.decode().split('id="awaiting-approval"')[1].split("</section>")[0]
    assert "edit: version 2 (version 1 served)" in queue and "→" not in queue


def test_the_dashboard_tells_an_approver_what_awaits(world, client_for):
    from django.test import Client

    aid, carol, bob = _approved_team_skill(world, client_for)
    console = Client()
    console.force_login(get_user_model().objects.get(username="alpha-bob"))
    assert 'id="dashboard-awaiting"' not in console.get("/console/").content.decode()
    _edit(carol, aid, 1, "Deploy on Tuesdays only.")
    html = console.get("/console/").content.decode()
    assert 'id="dashboard-awaiting"' in html and "1 asset awaits your approval." in html
    member = Client()
    member.force_login(world["a"].member)
    assert 'id="dashboard-awaiting"' not in member.get("/console/").content.decode()
