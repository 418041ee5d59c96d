"""Deactivating an agent revokes its keys for good, and the API answer says so (first-user audit: only
the console's confirm dialog did; a re-activated agent's old key then answered 401 with no word why)."""

from __future__ import annotations

import pytest

from teams import services
from teams.models import Scope

pytestmark = pytest.mark.django_db


def test_patch_deactivation_counts_the_keys_it_revoked(world, client_for):
    a = world["a"]
    services.api_key_create(actor=None, agent=a.agent, name="second", scopes=[Scope.READ])
    admin = client_for(a.admin)
    r = admin.patch(f"/api/v1/agents/{a.agent.id}", {"is_active": False}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["is_active"] is False and r.json()["keys_revoked"] == 2 and r.json()["live_keys"] == 0
    r = admin.patch(f"/api/v1/agents/{a.agent.id}", {"is_active": True}, format="json")
    assert r.status_code == 200
    # re-activated, but with no key: the answer says none authenticates
    assert r.json()["is_active"] is True and r.json()["keys_revoked"] == 0 and r.json()["live_keys"] == 0
    assert client_for(a.key).get("/api/v1/ping").status_code == 401


def test_patch_of_other_fields_revokes_nothing(world, client_for):
    a = world["a"]
    r = client_for(a.admin).patch(f"/api/v1/agents/{a.agent.id}", {"description": "d"}, format="json")
    assert r.status_code == 200 and r.json()["keys_revoked"] == 0 and r.json()["live_keys"] == 1


def test_delete_counts_the_keys_it_revoked(world, client_for):
    a = world["a"]
    admin = client_for(a.admin)
    r = admin.delete(f"/api/v1/agents/{a.agent.id}")
    assert r.status_code == 200, r.content
    assert r.json()["is_active"] is False and r.json()["keys_revoked"] == 1 and r.json()["live_keys"] == 0
    again = admin.delete(f"/api/v1/agents/{a.agent.id}")
    assert again.status_code == 200 and again.json()["keys_revoked"] == 0


def test_openapi_describes_the_revocation(world, client_for):
    schema = client_for(world["a"].admin).get("/api/schema/", {"format": "json"}).json()
    op = schema["paths"]["/api/v1/agents/{agent_id}"]
    for method in ("patch", "delete"):
        ref = op[method]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        component = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
        assert "keys_revoked" in component["properties"] and "keys_revoked" in component["required"]
        assert "for good" in component["properties"]["keys_revoked"]["description"]
        text = op[method].get("description", "")
        assert "revoked for good" in text or "revokes every live API key" in text, (method, text)
