"""The console's Members page and org resolution: the same rule as the API
(teams.auth.resolve_user_org), and inviting by email never shows the account's username."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from teams.models import Invitation, Membership
from tests.teams.invites import PASSWORD, accept

pytestmark = pytest.mark.django_db

SESSION_ORG_KEY = "org_slug"  # teams.auth.SESSION_ORG_KEY, spelled out so the tests
# also run against code without it: the key the switcher writes

User = get_user_model()


def test_console_session_keeps_its_org_when_an_older_org_adds_the_user(world, login):
    a, b = world["a"], world["b"]
    victim = login(b.member)
    assert victim.get("/console/").wsgi_request.org == b.org
    assert victim.session[SESSION_ORG_KEY] == "beta"

    admin = login(a.admin)
    r = admin.post("/console/members/", {"email": "beta-member@example.com", "role": "member"})
    assert r.status_code == 200
    shown = [str(m) for m in r.context["messages"]]
    assert shown == ["beta-member@example.com invited."]  # what the admin typed, not the username
    assert "beta-member<" not in r.content.decode() and 'data-user="beta-member"' not in r.content.decode()
    assert not Membership.objects.filter(org=a.org, user=b.member).exists()  # not before accepting
    accept(b.member, r.context["invite_url"])  # in another browser session
    assert Membership.objects.filter(org=a.org, user=b.member).exists()

    assert victim.get("/console/").wsgi_request.org == b.org
    # Switching is the user's explicit choice.
    victim.post("/console/org", {"org": "alpha"})
    assert victim.get("/console/").wsgi_request.org == a.org


def test_console_invite_of_email_taken_as_a_username_signs_up_under_another_name(world, login):
    User.objects.create_user("ghost@example.com", "someone-else@example.com", "pw-ghost-123")
    users, members = User.objects.count(), Membership.objects.count()
    r = login(world["a"].owner).post("/console/members/", {"email": "ghost@example.com", "role": "member"})
    assert r.status_code == 200  # the invite tells nothing about accounts
    r = login(None).post(r.context["invite_url"].removeprefix("http://testserver"),
                         {"password": PASSWORD, "password_again": PASSWORD})
    assert r.status_code == 302  # the email is not the new account's name: no clash with the other one
    assert User.objects.get(email="ghost@example.com").username == "ghost"
    users, members = users + 1, members + 1
    assert (User.objects.count(), Membership.objects.count()) == (users, members)
    invitations = Invitation.objects.count()
    # A plain member is refused the add; an outsider has no org page at all.
    assert login(world["a"].member).post("/console/members/", {"email": "ghost@example.com",
                                                                "role": "member"}).status_code == 403
    assert login(world["outsider"]).post("/console/members/", {"email": "ghost@example.com",
                                                                "role": "member"}).status_code == 403
    assert (Membership.objects.count(), Invitation.objects.count()) == (members, invitations)


def test_console_falls_back_when_removed_from_the_chosen_org(world, login, client_for):
    a, b = world["a"], world["b"]
    Membership.objects.create(org=b.org, user=a.member, role="member")
    c = login(a.member)
    c.post("/console/org", {"org": "beta"})
    assert c.get("/console/").wsgi_request.org == b.org
    Membership.objects.filter(org=b.org, user=a.member).delete()
    assert c.get("/console/").wsgi_request.org == a.org
    assert c.session[SESSION_ORG_KEY] == "alpha"
