"""An invitee chooses a name at sign-up. Accounts made from invitations were named by their email
address, which teammates and agents then saw (recall lines, version authors, member lists); the
name is now chosen (filled in from the email's local part), may not be an address, and the account
signs in with its name or its email."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from teams.models import Membership

from .invites import PASSWORD, invite, link_path

pytestmark = pytest.mark.django_db

User = get_user_model()


def _post(url: str, **fields):
    return Client().post(link_path(url), {"password": PASSWORD, "password_again": PASSWORD, **fields})


def test_the_form_offers_the_emails_local_part_and_the_chosen_name_is_kept(world, client_for):
    a = world["a"]
    url = invite(client_for(a.admin), "Dana.Lee@example.com")["invite_url"]
    page = Client().get(link_path(url)).content.decode()
    assert 'value="dana.lee"' in page and "Your name" in page
    r = _post(url, username="Dana")
    assert r.status_code == 302, r.content
    dana = User.objects.get(email="dana.lee@example.com")
    assert dana.username == "Dana"
    assert Membership.objects.filter(org=a.org, user=dana).exists()


def test_a_blank_name_is_derived_and_made_unique(world, client_for):
    a = world["a"]
    User.objects.create_user("sam", "sam@elsewhere.org", "pw-sam-12345")
    r = _post(invite(client_for(a.admin), "sam@example.com")["invite_url"], username="")
    assert r.status_code == 302, r.content
    assert User.objects.get(email="sam@example.com").username == "sam-2"


@pytest.mark.parametrize("name, message", [
    ("dana@example.com", "not an email address"),
    ("dana lee", "Enter a valid username"),
    ("ALPHA-MEMBER", "taken"),  # another account's name, in other case
])
def test_a_refused_name_is_a_field_error_and_nothing_is_written(world, client_for, name, message):
    a = world["a"]
    body = invite(client_for(a.admin), "dana@example.com")
    users, members = User.objects.count(), Membership.objects.count()
    r = _post(body["invite_url"], username=name)
    assert r.status_code == 400
    assert message in " ".join(r.context["form"].errors["username"])
    assert (User.objects.count(), Membership.objects.count()) == (users, members)


def test_the_account_signs_in_with_its_name_or_its_email(world, client_for):
    _post(invite(client_for(world["a"].admin), "dana@example.com")["invite_url"], username="dana")
    for login in ("dana", "dana@example.com", "DANA@example.com"):
        c = Client()
        r = c.post("/login/", {"username": login, "password": PASSWORD})
        assert r.status_code == 302, (login, r.content[:300])
        assert c.get("/console/").status_code == 200
    assert Client().post("/login/", {"username": "dana@example.com", "password": "wrong-password-1"}).status_code == 200


def test_an_email_two_accounts_share_signs_in_by_name_only(world):
    User.objects.create_user("one", "shared@example.com", PASSWORD)
    User.objects.create_user("two", "shared@example.com", PASSWORD)
    assert Client().post("/login/", {"username": "shared@example.com", "password": PASSWORD}).status_code == 200
    assert Client().post("/login/", {"username": "two", "password": PASSWORD}).status_code == 302


def test_agents_see_the_chosen_name(world, client_for):
    """The name reaches agents where a person's name is shown: the members list and recall lines."""
    a = world["a"]
    _post(invite(client_for(a.admin), "dana@example.com")["invite_url"], username="dana")
    rows = client_for(a.key).get("/api/v1/members").json()["results"]
    assert "dana" in [r["username"] for r in rows]
