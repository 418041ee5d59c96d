"""Inviting an email that has an open invitation issues a new link and ends the earlier one; the
Members page says so. Before, the admin only saw "x invited." and could still pass on a dead link."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from teams.models import Invitation
from tests.teams.invites import link_path

pytestmark = pytest.mark.django_db


def _messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_reinvite_says_the_earlier_link_no_longer_works(world, login):
    admin = login(world["a"].admin)
    first = admin.post("/console/members/", {"email": "colleague@example.com", "role": "member"})
    assert first.status_code == 200 and _messages(first) == ["colleague@example.com invited."]
    old_url = first.context["invite_url"]

    # Another case of the same address is the same invitee.
    again = admin.post("/console/members/", {"email": "Colleague@example.com", "role": "member"})
    assert again.status_code == 200
    [message] = _messages(again)
    assert "no longer works" in message and message.startswith("Colleague@example.com invited again")
    assert "no longer works" in again.content.decode()
    # What the message claims holds: the earlier link is dead, the new one is not.
    assert again.context["invite_url"] != old_url
    assert Client().get(link_path(old_url)).context["state"] != "signup"
    assert Client().get(link_path(again.context["invite_url"])).context["state"] == "signup"


def test_first_invite_and_invite_after_a_revoked_or_expired_one_say_nothing_of_an_earlier_link(world, login):
    a = world["a"]
    admin = login(a.admin)
    r = admin.post("/console/members/", {"email": "one@example.com", "role": "member"})
    assert _messages(r) == ["one@example.com invited."]
    # An earlier link that already did not work is not news.
    Invitation.objects.filter(org=a.org, email="one@example.com").update(revoked_at=timezone.now())
    r = admin.post("/console/members/", {"email": "one@example.com", "role": "member"})
    assert _messages(r) == ["one@example.com invited."]
    Invitation.objects.filter(org=a.org, email="one@example.com", revoked_at__isnull=True).update(
        expires_at=timezone.now() - timedelta(minutes=1))
    r = admin.post("/console/members/", {"email": "one@example.com", "role": "member"})
    assert _messages(r) == ["one@example.com invited."]


def test_an_open_invitation_in_another_org_is_not_an_earlier_link_here(world, login):
    login(world["b"].admin).post("/console/members/", {"email": "shared@example.com", "role": "member"})
    r = login(world["a"].admin).post("/console/members/", {"email": "shared@example.com", "role": "member"})
    assert _messages(r) == ["shared@example.com invited."]
