"""A binding's answer said "served" for an asset whose visibility no longer includes the agent
(narrowed by its owner after the binding was made), while the context served nothing of it: a
binding never widens visibility. served is now false there, with a note saying why."""

from __future__ import annotations

import pytest

from .helpers import grant
from .test_approved_edit_review import APPROVED_TEXT, _approved_team_skill, _stable, fresh_cache  # noqa: F401

pytestmark = pytest.mark.django_db


def test_binding_of_an_asset_narrowed_away_from_the_agent_says_it_is_not_served(world, client_for):
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    url = f"/api/v1/agents/{a.agent.id}/bindings"
    [b] = bob.get(url).json()["results"]
    assert b["served"] is True and b["served_version"] == 1 and b["note"] == ""

    r = carol.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "visibility": "restricted"}, format="json")
    assert r.status_code == 200, r.content
    assert APPROVED_TEXT not in _stable(client_for, world)  # what the binding's answer must say
    for listed in (bob.get(url).json()["results"], client_for(a.key).get(url).json()["results"]):
        [b] = listed
        assert b["served"] is False and b["served_version"] is None
        assert "no longer includes the agent" in b["note"] and "restricted" in b["note"]

    grant(carol, "asset", aid, grantee_kind="agent", agent_id=a.agent.id)
    [b] = bob.get(url).json()["results"]
    assert b["served"] is True and b["served_version"] == 1 and b["note"] == ""
    assert APPROVED_TEXT in _stable(client_for, world)
