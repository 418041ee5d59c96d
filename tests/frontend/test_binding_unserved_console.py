"""The console's bindings panel says when a bound agent receives nothing because the asset's
visibility no longer includes it, as the binding's API answer does (served: false)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.assets.helpers import grant
from tests.assets.test_approved_edit_review import _approved_team_skill, fresh_cache  # noqa: F401

pytestmark = pytest.mark.django_db


def test_the_bindings_panel_names_an_agent_the_asset_no_longer_reaches(world, client_for):
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    console = Client()
    console.force_login(get_user_model().objects.get(username="alpha-bob"))

    def panel() -> str:
        html = console.get(f"/console/assets/{aid}/").content.decode()
        return html.split('data-binding-id="')[1].split("</tr>")[0]

    assert "not-served" not in panel()
    r = carol.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "visibility": "restricted"}, format="json")
    assert r.status_code == 200, r.content
    bob_user = get_user_model().objects.get(username="alpha-bob")
    grant(carol, "asset", aid, grantee_kind="user", user_id=bob_user.id)  # bob reads it, the agent not
    row = panel()
    assert 'class="muted not-served"' in row and "no longer includes the agent" in row
    grant(carol, "asset", aid, grantee_kind="agent", agent_id=a.agent.id)
    assert "not-served" not in panel()
