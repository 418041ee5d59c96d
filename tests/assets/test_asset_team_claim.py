from __future__ import annotations

import pytest

from assets.models import Asset
from teams.models import Team

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("visibility", ["private", "restricted"])
def test_a_creator_names_only_a_team_of_its_own(world, client_for, visibility):
    """A private asset naming another team carried that team along a later org promotion, and the
    team's admins could then edit it."""
    a = world["a"]
    other = Team.objects.create(org=a.org, name="other", slug="other")
    body = {"kind": "skill", "title": "Deploy", "body": "v1", "visibility": visibility, "team_id": other.id}
    for who in (a.member, a.key):
        r = client_for(who).post("/api/v1/assets", body, format="json")
        assert r.status_code == 400, r.content
        assert "team_id" in r.json()["error"]["fields"]
    assert not Asset.objects.filter(org=a.org).exists()
    assert client_for(a.member).post("/api/v1/assets", {**body, "team_id": a.team.id},
                                     format="json").status_code == 201
    assert client_for(a.admin).post("/api/v1/assets", body, format="json").status_code == 201
