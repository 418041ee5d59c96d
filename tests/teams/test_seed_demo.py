"""The login ``make run`` prints owns the demo organisation and nothing else. It was a Django
superuser: Django's /admin/ listed every organisation's accounts and changed their passwords."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from teams.models import Membership, Role

pytestmark = pytest.mark.django_db


def test_the_demo_login_owns_the_demo_org_and_is_no_superuser(world):
    out = io.StringIO()
    call_command("seed_demo", org="demo-x", username="demo-owner", password="a-long-enough-password-42", stdout=out)
    assert "console login : demo-owner" in out.getvalue()
    user = get_user_model().objects.get(username="demo-owner")
    assert not user.is_superuser and not user.is_staff
    assert Membership.objects.get(user=user, org__slug="demo-x").role == Role.OWNER

    c = Client()
    assert c.post("/login/", {"username": "demo-owner", "password": "a-long-enough-password-42"}).status_code == 302
    assert c.get("/console/").status_code == 200
    other = world["b"].owner
    r = c.get(f"/admin/auth/user/{other.pk}/password/")
    assert r.status_code == 302 and "/admin/login/" in r.url  # not the admin site's user
    assert c.get("/admin/auth/user/").status_code == 302


def test_the_demo_agents_first_memories_are_seen_by_the_demo_login(client_for):
    """The key make run prints is a new agent's, whose writes defaulted to private: a first user's
    memories written with it were missing from the console the printed login opens."""
    from teams.auth import actor_for_user
    from teams.models import Agent, ApiKey

    out = io.StringIO()
    call_command("seed_demo", org="demo-y", username="demo-owner-y", password="a-long-enough-password-42", stdout=out)
    key = out.getvalue().split("agent API key : ")[1].split()[0]
    assert "org-wide" in out.getvalue()
    agent = Agent.objects.get(org__slug="demo-y", name="demo-agent")
    assert agent.default_visibility == "org" and ApiKey.objects.filter(agent=agent).count() == 1
    r = client_for(key).post("/api/v1/memories/weave", {"text": "The demo deploy runs on Fridays."}, format="json")
    assert r.status_code == 201, r.content
    from memory.selectors import visible_nodes

    owner = get_user_model().objects.get(username="demo-owner-y")
    assert visible_nodes(actor=actor_for_user(owner, agent.org)).filter(id=r.json()["node_ids"][0]).exists()


def test_a_later_run_sets_the_password_given_and_otherwise_says_how(world):
    """The random password is printed once, by the first run; on a later run NYLON_ADMIN_PASSWORD
    (``--password``) was ignored ("keeping its data"), so a lost login could not be recovered as the
    README says."""
    call_command("seed_demo", org="demo-z", username="demo-owner-z", password="the-first-password-42",
                 stdout=io.StringIO())
    out = io.StringIO()
    call_command("seed_demo", org="demo-z", username="demo-owner-z", password="", stdout=out)
    assert "changepassword demo-owner-z" in out.getvalue() and "NYLON_ADMIN_PASSWORD" in out.getvalue()
    c = Client()
    assert c.post("/login/", {"username": "demo-owner-z", "password": "the-first-password-42"}).status_code == 302

    call_command("seed_demo", org="demo-z", username="demo-owner-z", password="a-new-password-42", stdout=io.StringIO())
    assert Client().post("/login/", {"username": "demo-owner-z", "password": "a-new-password-42"}).status_code == 302
    assert Client().post("/login/", {"username": "demo-owner-z", "password": "the-first-password-42"}).status_code == 200
    # a name that is no member of the demo org is left alone
    outsider = world["outsider"]
    before = get_user_model().objects.get(pk=outsider.pk).password
    call_command("seed_demo", org="demo-z", username=outsider.username, password="another-password-42",
                 stdout=io.StringIO())
    assert get_user_model().objects.get(pk=outsider.pk).password == before
