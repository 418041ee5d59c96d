"""POST /api/v1/members with an email is an invitation: refusals are 4xx with a field error and
write nothing, and the answer never tells whether an account has the email."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from teams.models import Invitation, Membership

from .invites import PASSWORD, invite, link_path

pytestmark = pytest.mark.django_db

User = get_user_model()


def test_an_email_another_account_is_named_after_does_not_block_the_signup(world, client_for):
    """Accounts made from invitations were named by their email, so an email that another account
    was named after could not sign up. New accounts choose a name; the email is only the email."""
    a = world["a"]
    ghost = User.objects.create_user("ghost@example.com", "someone-else@example.com", "pw-ghost-123")
    body = invite(client_for(a.admin), "GHOST@example.com")
    r = client_for(None).post(link_path(body["invite_url"]), {"password": PASSWORD, "password_again": PASSWORD})
    assert r.status_code == 302, r.content
    new = User.objects.get(email="ghost@example.com")
    assert new.username == "ghost" and new.pk != ghost.pk
    assert Membership.objects.filter(org=a.org, user=new).exists()
    assert not Membership.objects.filter(org=a.org, user=ghost).exists()


def test_email_longer_than_an_account_can_hold_is_400_nothing_written(world, client_for):
    users, invitations = User.objects.count(), Invitation.objects.count()
    email = "a" * 60 + "@" + "b" * 63 + "." + "c" * 63 + "." + "d" * 63 + ".com"  # 256 characters, valid
    r = client_for(world["a"].owner).post("/api/v1/members", {"email": email}, format="json")
    assert r.status_code == 400, r.content
    assert list(r.json()["error"]["fields"]) == ["email"]
    assert (User.objects.count(), Invitation.objects.count()) == (users, invitations)
    # 152 characters no longer is: the email is not the account's name
    assert client_for(world["a"].owner).post("/api/v1/members", {"email": "x" * 140 + "@example.com"},
                                             format="json").status_code == 201


def test_only_admins_invite_and_outsiders_see_nothing(world, client_for):
    User.objects.create_user("ghost@example.com", "someone-else@example.com", "pw-ghost-123")
    assert client_for(world["a"].member).post("/api/v1/members", {"email": "ghost@example.com"},
                                              format="json").status_code == 403
    assert client_for(world["outsider"]).post("/api/v1/members", {"email": "ghost@example.com"},
                                              format="json").status_code == 403
    assert not Invitation.objects.filter(email__iexact="ghost@example.com").exists()
    assert not Membership.objects.filter(user__username="ghost@example.com").exists()
