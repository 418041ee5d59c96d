from __future__ import annotations

import pytest

from memory.models import Node
from teams.models import Team

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("visibility", ["private", "org", "restricted", "team"])
def test_a_writer_names_only_a_team_of_its_own_whatever_the_visibility(world, client_for, visibility):
    """A node's team gives that team's admins write rights over it, so naming another team on an
    org (or private) memory handed it to strangers; it was checked only for team visibility."""
    a = world["a"]
    other = Team.objects.create(org=a.org, name="other", slug="other")
    body = {"text": "The release train leaves on Thursdays.", "visibility": visibility, "team_id": other.id}
    for who in (a.member, a.key):  # a member of 'core' only; the agent of 'core'
        r = client_for(who).post("/api/v1/memories/weave", body, format="json")
        assert r.status_code == 400, r.content
        assert "team_id" in r.json()["error"]["fields"]
    assert not Node.objects.filter(org=a.org).exists()
    # its own team, and the org admin any team, are still fine
    assert client_for(a.member).post("/api/v1/memories/weave", {**body, "team_id": a.team.id},
                                     format="json").status_code == 201
    assert client_for(a.admin).post("/api/v1/memories/weave", body, format="json").status_code == 201
