from __future__ import annotations

import pytest

from teams.models import Team

pytestmark = pytest.mark.django_db


def test_list_shows_only_own_org_teams(world, client_for):
    r = client_for(world["a"].member).get("/api/v1/teams")
    assert r.status_code == 200
    assert [t["slug"] for t in r.json()["results"]] == ["core"]


def test_create_needs_org_admin(world, client_for):
    a = world["a"]
    assert client_for(a.member).post("/api/v1/teams", {"name": "Ops"}, format="json").status_code == 403
    assert client_for(a.key).post("/api/v1/teams", {"name": "Ops"}, format="json").status_code == 403
    r = client_for(a.admin).post("/api/v1/teams", {"name": "Ops", "description": "on call"}, format="json")
    assert r.status_code == 201
    assert Team.objects.get(id=r.json()["id"]).org == a.org


def test_bad_input_writes_nothing(world, client_for):
    before = Team.objects.count()
    c = client_for(world["a"].owner)
    assert c.post("/api/v1/teams", {"name": ""}, format="json").status_code == 400
    r = c.post("/api/v1/teams", {"name": 12, "extra": 1}, format="json")
    assert r.status_code == 400 and "extra" in r.json()["error"]["fields"]
    r = c.post("/api/v1/teams", "not json", content_type="application/json")
    assert r.status_code == 400
    assert Team.objects.count() == before


def test_other_org_team_is_404_for_every_method(world, client_for):
    b_team = world["b"].team.id
    for who in (world["a"].owner, world["a"].key):
        c = client_for(who)
        assert c.get(f"/api/v1/teams/{b_team}").status_code == 404
        assert c.patch(f"/api/v1/teams/{b_team}", {"name": "pwn"}, format="json").status_code == 404
        assert c.delete(f"/api/v1/teams/{b_team}").status_code == 404
        assert c.get(f"/api/v1/teams/{b_team}/members").status_code == 404
    assert Team.objects.get(id=b_team).name == "beta core"


def test_team_admin_can_edit_own_team_only(world, client_for):
    from teams.models import TeamMembership, TeamRole

    a = world["a"]
    TeamMembership.objects.filter(team=a.team, user=a.member).update(role=TeamRole.ADMIN)
    c = client_for(a.member)
    assert c.patch(f"/api/v1/teams/{a.team.id}", {"description": "ours"}, format="json").status_code == 200
    other = Team.objects.create(org=a.org, name="other", slug="other")
    assert c.patch(f"/api/v1/teams/{other.id}", {"description": "x"}, format="json").status_code == 403
    assert c.delete(f"/api/v1/teams/{a.team.id}").status_code == 403  # deletion is for org admins


def test_team_members_add_and_remove(world, client_for):
    a = world["a"]
    c = client_for(a.admin)
    r = c.post(f"/api/v1/teams/{a.team.id}/members", {"user_id": a.admin.id, "role": "admin"}, format="json")
    assert r.status_code == 201
    # users of another org (or outsiders) cannot be put into a team
    r = c.post(f"/api/v1/teams/{a.team.id}/members", {"user_id": world["b"].owner.id}, format="json")
    assert r.status_code == 400
    assert c.delete(f"/api/v1/teams/{a.team.id}/members/{a.admin.id}").status_code == 204
    assert c.delete(f"/api/v1/teams/{a.team.id}/members/{a.admin.id}").status_code == 404


def test_delete_team_audited(world, client_for):
    from assets.models import AuditEvent

    a = world["a"]
    r = client_for(a.owner).delete(f"/api/v1/teams/{a.team.id}")
    assert r.status_code == 200  # the answer says what the deletion did (test_team_delete.py)
    ev = AuditEvent.objects.get(org=a.org, action="team.delete")
    assert ev.actor_id == a.owner.id and ev.request_id == r["X-Request-Id"]
