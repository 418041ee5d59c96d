"""POST /api/v1/members with an email: refusals are 4xx with a field error and write nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from teams.models import Membership

pytestmark = pytest.mark.django_db

User = get_user_model()


def test_email_taken_as_another_accounts_username_is_400_nothing_written(world, client_for):
    a = world["a"]
    # No account has this email, but one is named after it.
    User.objects.create_user("ghost@example.com", "someone-else@example.com", "pw-ghost-123")
    users, members = User.objects.count(), Membership.objects.count()
    for email in ("ghost@example.com", "GHOST@example.com"):
        r = client_for(a.admin).post("/api/v1/members", {"email": email}, format="json")
        assert r.status_code == 400, r.content
        assert list(r.json()["error"]["fields"]) == ["email"]
    assert (User.objects.count(), Membership.objects.count()) == (users, members)


def test_email_longer_than_a_username_is_400_nothing_written(world, client_for):
    users = User.objects.count()
    email = "x" * 140 + "@example.com"  # a valid email, longer than the 150 characters of a username
    r = client_for(world["a"].owner).post("/api/v1/members", {"email": email}, format="json")
    assert r.status_code == 400, r.content
    assert User.objects.count() == users


def test_only_admins_add_and_outsiders_see_nothing(world, client_for):
    User.objects.create_user("ghost@example.com", "someone-else@example.com", "pw-ghost-123")
    assert client_for(world["a"].member).post("/api/v1/members", {"email": "ghost@example.com"},
                                              format="json").status_code == 403
    assert client_for(world["outsider"]).post("/api/v1/members", {"email": "ghost@example.com"},
                                              format="json").status_code == 403
    assert not Membership.objects.filter(user__username="ghost@example.com").exists()
