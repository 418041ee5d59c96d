"""Binding an asset that has no approved version gave a 201 like any other and the agent then
received nothing, with nothing said: the binding's answer and the console's binding panel now say
whether the agent is served, which version, and why not."""

from __future__ import annotations

import pytest
from django.test import Client

from .helpers import approve, create_asset

pytestmark = pytest.mark.django_db


def _bind(client, agent_id, asset_id, mode="full"):
    r = client.post(f"/api/v1/agents/{agent_id}/bindings", {"asset_id": asset_id, "mode": mode}, format="json")
    assert r.status_code in (200, 201), r.content
    return r.json()


def test_binding_a_draft_says_it_is_not_served(world, client_for):
    a = world["a"]
    admin = client_for(a.admin)
    draft = create_asset(admin, kind="persona", visibility="org", title="Voice", body="Be terse.")
    b = _bind(admin, a.agent.id, draft["id"])
    assert b["served"] is False and b["served_version"] is None
    assert "Only approved versions are served" in b["note"] and "draft" in b["note"]
    listed = admin.get(f"/api/v1/agents/{a.agent.id}/bindings").json()["results"]
    assert listed[0]["served"] is False and listed[0]["note"] == b["note"]
    assert "Be terse." not in client_for(a.key).get("/api/v1/context").json()["stable"]  # what the note says

    admin.post(f"/api/v1/assets/{draft['id']}/transition", {"to": "candidate"}, format="json")
    approve(admin, draft["id"])
    b = admin.get(f"/api/v1/agents/{a.agent.id}/bindings").json()["results"][0]
    assert b["served"] is True and b["served_version"] == 1 and b["note"] == ""
    assert "Be terse." in client_for(a.key).get("/api/v1/context").json()["stable"]


def test_deprecated_binding_note(world, client_for):
    a = world["a"]
    admin = client_for(a.admin)
    aid = create_asset(admin, visibility="org", title="Old")["id"]
    admin.post(f"/api/v1/assets/{aid}/transition", {"to": "candidate"}, format="json")
    approve(admin, aid)
    admin.post(f"/api/v1/assets/{aid}/transition", {"to": "deprecated"}, format="json")
    b = _bind(admin, a.agent.id, aid)
    assert b["served"] is False and b["note"] == "This asset is deprecated: the agent receives nothing from it."


def test_console_binding_panel_says_a_draft_is_not_served(world):
    a = world["a"]
    web = Client()
    web.force_login(a.admin)
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_login(a.admin)
    aid = create_asset(api, visibility="org", title="Draft voice")["id"]
    page = web.get(f"/console/assets/{aid}/").content.decode()
    assert 'id="binding-not-served"' in page and "Only approved versions are served" in page
    r = web.post(f"/console/assets/{aid}/", {"op": "bind", "agent": a.agent.id, "mode": "full", "priority": 100},
                 follow=True)
    page = r.content.decode()
    assert r.status_code == 200 and "Bound to alpha-bot." in page
    assert 'class="warning"' in page and "has no approved version" in page
