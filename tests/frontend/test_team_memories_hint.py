"""An org owner in no team saw a few memories of an org holding many, with no sign of the rest (team
memories are read by the team's members only, admins included: docs/permissions.md). The dashboard
and the memory browser now say how many are out of reach, to org admins and owners only; the rule
itself is unchanged (they still cannot read them)."""

from __future__ import annotations

import html

import pytest

from teams.models import TeamMembership

from .conftest import actor, weave

pytestmark = pytest.mark.django_db

HINT = "more memories are shared within teams you are not in"


def _page(login, user, url) -> str:
    r = login(user).get(url)
    assert r.status_code == 200
    return html.unescape(r.content.decode())


def test_owner_outside_the_teams_is_told_how_many(world, login, mem):
    a = world["a"]
    member = actor(a.member, a.org)
    weave(member, "Core team: the release train leaves on Thursdays.", visibility="team", team=a.team)
    for url in ("/console/", "/console/memories/"):
        body = _page(login, a.owner, url)
        assert f"2 {HINT}" in body, url
        assert "release train" not in body  # a count, not the memories
    assert f"2 {HINT}" in _page(login, a.admin, "/console/")
    # a plain member is told nothing about other teams; one in the team has nothing out of reach
    outsider = world["outsider"]
    from teams.models import Membership

    Membership.objects.create(org=a.org, user=outsider, role="member")
    assert HINT not in _page(login, outsider, "/console/")
    assert HINT not in _page(login, a.member, "/console/") and "memory is shared within" not in \
        _page(login, a.member, "/console/")
    # once in the team, nothing is out of reach
    TeamMembership.objects.create(org=a.org, team=a.team, user=a.owner)
    body = _page(login, a.owner, "/console/")
    assert HINT not in body and "release train" not in body  # (the dashboard lists no texts)
    assert "release train" in _page(login, a.owner, "/console/memories/")
