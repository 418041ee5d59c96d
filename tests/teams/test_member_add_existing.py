"""POST /api/v1/members with an email is an invitation: refusals are 4xx with a field error and
write nothing, and the answer never tells whether an account has the email."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from teams.models import Invitation, Membership

from .invites import PASSWORD, invite, link_path

pytestmark = pytest.mark.django_db

User = get_user_model()


def test_email_taken_as_another_accounts_username_is_refused_at_signup_nothing_written(world, client_for):
    a = world["a"]
    # No account has this email, but one is named after it. Inviting it is not refused (that would
    # tell the admin an account is named so); the signup is, with nothing written.
    User.objects.create_user("ghost@example.com", "someone-else@example.com", "pw-ghost-123")
    for email in ("ghost@example.com", "GHOST@example.com"):
        body = invite(client_for(a.admin), email)
        users, members = User.objects.count(), Membership.objects.count()
        r = client_for(None).post(link_path(body["invite_url"]), {"password": PASSWORD, "password_again": PASSWORD})
        assert r.status_code == 400, r.content
        assert r.context["form"].non_field_errors()
        assert (User.objects.count(), Membership.objects.count()) == (users, members)
        assert Invitation.objects.get(id=body["id"]).status == "pending"


def test_email_longer_than_a_username_is_400_nothing_written(world, client_for):
    users, invitations = User.objects.count(), Invitation.objects.count()
    email = "x" * 140 + "@example.com"  # a valid email, longer than the 150 characters of a username
    r = client_for(world["a"].owner).post("/api/v1/members", {"email": email}, format="json")
    assert r.status_code == 400, r.content
    assert list(r.json()["error"]["fields"]) == ["email"]
    assert (User.objects.count(), Invitation.objects.count()) == (users, invitations)


def test_only_admins_invite_and_outsiders_see_nothing(world, client_for):
    User.objects.create_user("ghost@example.com", "someone-else@example.com", "pw-ghost-123")
    assert client_for(world["a"].member).post("/api/v1/members", {"email": "ghost@example.com"},
                                              format="json").status_code == 403
    assert client_for(world["outsider"]).post("/api/v1/members", {"email": "ghost@example.com"},
                                              format="json").status_code == 403
    assert not Invitation.objects.filter(email__iexact="ghost@example.com").exists()
    assert not Membership.objects.filter(user__username="ghost@example.com").exists()
