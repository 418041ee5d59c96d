from __future__ import annotations

import pytest

from teams.models import Membership

from .invites import sign_up

pytestmark = pytest.mark.django_db


def test_list_members_of_own_org(world, client_for):
    r = client_for(world["a"].member).get("/api/v1/members")
    assert r.status_code == 200
    names = {m["username"] for m in r.json()["results"]}
    assert names == {"alpha-owner", "alpha-admin", "alpha-member"}
    assert all(m["email"] for m in r.json()["results"])  # people see each other's addresses


def test_agents_list_members_without_their_email(world, client_for):
    # An agent's key sits in prompts and tool configs: a leaked key or an injected prompt would read
    # every member's address.
    a = world["a"]
    c = client_for(a.key)
    r = c.get("/api/v1/members")
    assert r.status_code == 200
    rows = r.json()["results"]
    assert {m["username"] for m in rows} == {"alpha-owner", "alpha-admin", "alpha-member"}
    assert [m["email"] for m in rows] == [None] * 3
    one = c.get(f"/api/v1/members/{a.member.id}")
    assert one.status_code == 200 and one.json()["email"] is None and one.json()["username"] == "alpha-member"


def test_agents_do_not_get_an_invited_members_email_as_username(world, client_for):
    # Accounts made by accepting an invitation were named by their email address.
    from .invites import legacy_member

    a = world["a"]
    dana = legacy_member(a.org, "dana@example.com")
    client_for(a.admin).post(f"/api/v1/teams/{a.team.id}/members", {"user_id": dana.id}, format="json")
    agent = client_for(a.key)
    for path in ("/api/v1/members", f"/api/v1/teams/{a.team.id}/members"):
        body = agent.get(path).content.decode()
        assert "dana@example.com" not in body and f"user:{dana.id}" in body, path
    assert agent.get(f"/api/v1/members/{dana.id}").json()["username"] == f"user:{dana.id}"
    # people still see it
    assert "dana@example.com" in client_for(a.member).get("/api/v1/members").content.decode()


def test_admin_adds_member_but_not_owner(world, client_for):
    a = world["a"]
    c = client_for(a.admin)
    r = c.post("/api/v1/members", {"email": "new@example.com", "role": "member"}, format="json")
    assert r.status_code == 201
    sign_up(r.json()["invite_url"])  # a member once the invitee accepts
    assert Membership.objects.get(org=a.org, user__email="new@example.com").role == "member"
    assert c.post("/api/v1/members", {"email": "boss@example.com", "role": "owner"}, format="json").status_code == 403
    assert c.post("/api/v1/members", {"email": "new@example.com"}, format="json").status_code == 400
    assert client_for(a.member).post("/api/v1/members", {"email": "x@example.com"}, format="json").status_code == 403


def test_role_changes_and_last_owner_protection(world, client_for):
    a = world["a"]
    c = client_for(a.owner)
    assert c.patch(f"/api/v1/members/{a.member.id}", {"role": "admin"}, format="json").status_code == 200
    assert Membership.objects.get(org=a.org, user=a.member).role == "admin"
    r = c.patch(f"/api/v1/members/{a.owner.id}", {"role": "member"}, format="json")
    assert r.status_code == 400  # the only owner cannot step down
    assert client_for(a.admin).patch(f"/api/v1/members/{a.owner.id}", {"role": "member"},
                                     format="json").status_code == 403


def test_other_org_members_are_404(world, client_for):
    b_owner = world["b"].owner.id
    for who in (world["a"].owner, world["a"].key):
        c = client_for(who)
        assert c.get(f"/api/v1/members/{b_owner}").status_code == 404
        assert c.patch(f"/api/v1/members/{b_owner}", {"role": "member"}, format="json").status_code == 404
        assert c.delete(f"/api/v1/members/{b_owner}").status_code == 404
    assert Membership.objects.filter(org=world["b"].org, user_id=b_owner).exists()


def test_remove_member(world, client_for):
    a = world["a"]
    assert client_for(a.admin).delete(f"/api/v1/members/{a.member.id}").status_code == 204
    assert client_for(a.member).get("/api/v1/org").status_code == 403
