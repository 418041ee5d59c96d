from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_owner_member_and_agent_see_their_org(world, client_for):
    a = world["a"]
    for who in (a.owner, a.admin, a.member, a.key):
        r = client_for(who).get("/api/v1/org")
        assert r.status_code == 200, r.content
        assert r.json()["slug"] == "alpha"
    assert client_for(a.key).get("/api/v1/org").json()["actor"]["kind"] == "agent"


def test_outsider_and_anonymous_get_nothing(world, client_for):
    assert client_for(world["outsider"]).get("/api/v1/org").status_code == 403
    r = client_for(None).get("/api/v1/org")
    assert r.status_code == 401
    assert "alpha" not in r.content.decode()


def test_org_header_selects_only_orgs_you_belong_to(world, client_for):
    c = client_for(world["a"].owner)
    assert c.get("/api/v1/org", HTTP_X_NYLON_ORG="alpha").status_code == 200
    r = c.get("/api/v1/org", HTTP_X_NYLON_ORG="beta")
    assert r.status_code == 404
    assert "BETA" not in r.content.decode()


def test_rename_needs_admin(world, client_for):
    a = world["a"]
    assert client_for(a.member).patch("/api/v1/org", {"name": "X"}, format="json").status_code == 403
    assert client_for(a.key).patch("/api/v1/org", {"name": "X"}, format="json").status_code == 403
    r = client_for(a.admin).patch("/api/v1/org", {"name": "Alpha Inc"}, format="json")
    assert r.status_code == 200 and r.json()["name"] == "Alpha Inc"


def test_unknown_fields_are_rejected(world, client_for):
    r = client_for(world["a"].owner).patch("/api/v1/org", {"name": "X", "nmae": "typo"}, format="json")
    assert r.status_code == 400
    assert r.json()["error"]["fields"] == {"nmae": ["Unknown field."]}
