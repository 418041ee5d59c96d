"""The Members page offers only what the service accepts (teams.services._check_role_change): an org
admin who is not an owner saw a role select with "Owner" on every row and role and Remove controls
on the owner's row; each, once confirmed, answered a full "Not allowed" page (first-user audit)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


def _row(html: str, username: str) -> str:
    return re.search(rf'<tr data-user="{username}">.*?</tr>', html, re.S).group(0)


def test_an_admin_is_offered_no_owner_role_and_no_control_over_an_owner(world, login):
    a = world["a"]
    html = login(a.admin).get("/console/members/").content.decode()
    owner_row, member_row = _row(html, a.owner.username), _row(html, a.member.username)
    assert "<select" not in owner_row and "Remove" not in owner_row and "Owner" in owner_row
    assert "<select" in member_row and "Remove" in member_row
    assert 'value="owner"' not in member_row and 'value="admin"' in member_row
    invite = re.search(r'<form method="post" class="card form" id="member-add">.*?</form>', html, re.S).group(0)
    assert 'value="owner"' not in invite and 'value="admin"' in invite
    # and what is not offered is still refused when posted
    r = login(a.admin).post("/console/members/", {"email": "x@example.com", "role": "owner"})
    assert r.status_code == 400


def test_an_owner_is_offered_every_role_and_every_row(world, login):
    a = world["a"]
    html = login(a.owner).get("/console/members/").content.decode()
    admin_row = _row(html, a.admin.username)
    assert 'value="owner"' in admin_row and "Remove" in admin_row
    invite = re.search(r'<form method="post" class="card form" id="member-add">.*?</form>', html, re.S).group(0)
    assert 'value="owner"' in invite


def test_a_member_is_offered_no_control(world, login):
    a = world["a"]
    html = login(a.member).get("/console/members/").content.decode()
    assert "<select" not in _row(html, a.admin.username) and "Remove" not in html
