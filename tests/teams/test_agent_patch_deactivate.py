"""Deactivating an agent by PATCH revokes its keys, as DELETE does."""

from __future__ import annotations

import pytest

from assets.models import AuditEvent
from teams.models import ApiKey

pytestmark = pytest.mark.django_db


def test_patch_deactivation_revokes_keys_so_reactivation_does_not_revive_them(world, client_for):
    a = world["a"]
    admin = client_for(a.admin)
    assert client_for(a.key).get("/api/v1/ping").status_code == 200
    r = admin.patch(f"/api/v1/agents/{a.agent.id}", {"is_active": False}, format="json")
    assert r.status_code == 200 and r.json()["is_active"] is False
    assert not ApiKey.objects.filter(agent=a.agent, revoked_at__isnull=True).exists()
    r = admin.patch(f"/api/v1/agents/{a.agent.id}", {"is_active": True}, format="json")
    assert r.status_code == 200 and r.json()["is_active"] is True
    # The old key stays dead; the reactivated agent needs a new one.
    assert client_for(a.key).get("/api/v1/ping").status_code == 401
    entry = AuditEvent.objects.filter(org=a.org, action="agent.update").order_by("id").first()
    assert entry.detail["is_active"] is False and len(entry.detail["revoked_keys"]) == 1


def test_patch_of_other_fields_leaves_keys_alone(world, client_for):
    a = world["a"]
    r = client_for(a.admin).patch(f"/api/v1/agents/{a.agent.id}", {"description": "d"}, format="json")
    assert r.status_code == 200
    assert client_for(a.key).get("/api/v1/ping").status_code == 200
