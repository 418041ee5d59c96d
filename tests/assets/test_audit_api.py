"""/api/v1/audit: org admins only, read-only, filterable; agents refused."""

from __future__ import annotations

import pytest

from assets.models import AuditEvent

from .helpers import create_asset

pytestmark = pytest.mark.django_db


def test_admins_read_their_org_only(world, client_for):
    a = world["a"]
    create_asset(client_for(a.member))
    for who in (a.owner, a.admin):
        r = client_for(who).get("/api/v1/audit")
        assert r.status_code == 200
        rows = r.json()["results"]
        assert rows and {x["action"] for x in rows} >= {"org.create", "asset.create"}
        assert all(AuditEvent.objects.get(id=x["id"]).org_id == a.org.id for x in rows)
    assert client_for(a.member).get("/api/v1/audit").status_code == 403
    assert client_for(a.key).get("/api/v1/audit").status_code == 403
    assert client_for(world["outsider"]).get("/api/v1/audit").status_code == 403


def test_filters(world, client_for):
    a = world["a"]
    aid = create_asset(client_for(a.member))["id"]
    client_for(a.admin).get(f"/api/v1/assets/{aid}")  # denied read
    c = client_for(a.owner)
    rows = c.get("/api/v1/audit", {"action": "asset.read", "outcome": "denied"}).json()["results"]
    assert len(rows) == 1 and rows[0]["actor_id"] == a.admin.id and rows[0]["reason"] == "visibility_private"
    rows = c.get("/api/v1/audit", {"actor": f"user:{a.member.username}"}).json()["results"]
    assert {x["action"] for x in rows} == {"asset.create"}
    assert c.get("/api/v1/audit", {"outcome": "bogus"}).status_code == 400
    assert c.get("/api/v1/audit", {"nope": "1"}).status_code == 400


def test_read_only(world, client_for):
    c = client_for(world["a"].owner)
    before = AuditEvent.objects.count()
    assert c.post("/api/v1/audit", {"action": "x"}, format="json").status_code == 405
    assert c.delete("/api/v1/audit").status_code == 405
    assert AuditEvent.objects.count() == before


def test_denials_raised_inside_services_are_audited_once(world, client_for):
    """A refusal deep in a service (its transaction rolled back) still reaches the audit log."""
    from assets.models import AuditEvent

    a = world["a"]
    before = AuditEvent.objects.filter(org=a.org, outcome="denied").count()
    r = client_for(a.member).post("/api/v1/teams", {"name": "Shadow"}, format="json")
    assert r.status_code == 403
    denied = AuditEvent.objects.filter(org=a.org, outcome="denied").order_by("-id")
    assert denied.count() == before + 1
    ev = denied.first()
    assert ev.actor_id == a.member.id and ev.action == "post.TeamListCreateApi" and ev.request_id == r["X-Request-Id"]
    assert "admin" in ev.reason
