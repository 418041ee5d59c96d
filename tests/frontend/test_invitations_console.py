"""The invitee's page (/invite/<token>) and the invitations on the console's Members page."""

from __future__ import annotations

import io
import logging
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from assets.models import AuditEvent
from teams.models import Invitation, Membership, Role
from tests.teams.invites import PASSWORD, accept, invite, link_path

pytestmark = pytest.mark.django_db

User = get_user_model()
SESSION_ORG_KEY = "org_slug"  # teams.auth.SESSION_ORG_KEY


@pytest.fixture
def invited(world, client_for):
    """invited(email, role="member") -> (path of the link, invitation id), invited by alpha's admin."""

    def make(email: str, role: str = "member", by=None):
        body = invite(client_for(by or world["a"].admin), email, role)
        return link_path(body["invite_url"]), body["id"]

    return make


def _state(response) -> str:
    return response.context["state"]


# --- a new email sets a password ------------------------------------------------------------------


def test_new_email_signs_up_joins_and_is_pinned_to_the_org(world, invited):
    path, inv_id = invited("New.Person@Example.com", "admin")
    c = Client()
    r = c.get(path)
    assert r.status_code == 200 and _state(r) == "signup"
    html = r.content.decode()
    assert "ALPHA" in html and "New.Person@Example.com" in html and 'name="password"' in html

    r = c.post(path, {"password": PASSWORD, "password_again": PASSWORD})
    assert r.status_code == 302 and r.url == "/console/"
    user = User.objects.get(email="new.person@example.com")
    assert user.email == "new.person@example.com" and user.has_usable_password()
    assert Membership.objects.get(org=world["a"].org, user=user).role == Role.ADMIN
    inv = Invitation.objects.get(id=inv_id)
    assert inv.accepted_at is not None and inv.accepted_by == user
    # Logged in, in the org they joined, and the password works for the next sign-in.
    assert c.session[SESSION_ORG_KEY] == "alpha"
    assert c.get("/console/").wsgi_request.org == world["a"].org
    assert Client().login(username="new.person@example.com", password=PASSWORD)
    # The link is used up.
    assert Client().get(path).status_code == 410


@pytest.mark.parametrize("data, field", [
    ({"password": "short", "password_again": "short"}, "password"),  # Django's validators refuse it
    ({"password": PASSWORD, "password_again": PASSWORD + "x"}, "password_again"),
    ({"password": "", "password_again": ""}, "password"),
    ({"password": "password123", "password_again": "password123"}, "password"),  # a common one
    ({"password": "8675309217", "password_again": "8675309217"}, "password"),  # digits only
    ({"password": "fresh@example.com", "password_again": "fresh@example.com"}, "password"),  # the email
])
def test_bad_password_is_a_field_error_and_nothing_is_written(world, invited, data, field):
    path, inv_id = invited("fresh@example.com")
    users, members, events = User.objects.count(), Membership.objects.count(), AuditEvent.objects.count()
    r = Client().post(path, data)
    assert r.status_code == 400 and _state(r) == "signup"
    assert r.context["form"].errors[field]
    assert (User.objects.count(), Membership.objects.count(), AuditEvent.objects.count()) == (users, members, events)
    assert Invitation.objects.get(id=inv_id).status == "pending"


def test_an_email_another_account_is_named_after_signs_up_under_a_name_of_its_own(world, invited):
    # An account is named after this email (as invitations used to name them): the invitee is not
    # blocked by it; the new account takes the name the form offers, the email's local part.
    ghost = User.objects.create_user("ghost@example.com", "someone-else@example.com", "pw-ghost-123")
    path, inv_id = invited("GHOST@example.com")
    page = Client().get(path).content.decode()
    assert 'name="username"' in page and 'value="ghost"' in page
    r = Client().post(path, {"username": "ghost", "password": PASSWORD, "password_again": PASSWORD})
    assert r.status_code == 302
    new = User.objects.get(email="ghost@example.com")
    assert new.username == "ghost" and new != ghost
    assert Invitation.objects.get(id=inv_id).status == "accepted"


# --- an existing account signs in and accepts ---------------------------------------------------------


def test_existing_account_is_sent_to_sign_in_and_back(world, invited):
    b = world["b"]
    path, _ = invited("BETA-MEMBER@example.com")
    c = Client()
    r = c.get(path)
    assert r.status_code == 302 and r.url == f"/login/?next={path}"
    assert c.post(path, {"password": PASSWORD, "password_again": PASSWORD}).status_code == 302  # to login
    assert User.objects.filter(email__iexact="beta-member@example.com").count() == 1  # no second account
    r = c.post("/login/", {"username": "beta-member", "password": "pw-member-123", "next": path})
    assert r.status_code == 302 and r.url == path
    r = c.get(path)
    assert r.status_code == 200 and _state(r) == "confirm"
    html = r.content.decode()
    assert "ALPHA" in html and "Member" in html and 'value="accept"' in html and 'value="decline"' in html
    assert not Membership.objects.filter(org=world["a"].org, user=b.member).exists()

    r = c.post(path, {"op": "accept"})
    assert r.status_code == 302 and r.url == "/console/"
    assert Membership.objects.get(org=world["a"].org, user=b.member).role == Role.MEMBER
    # This session chose alpha by accepting; the user's other memberships are untouched.
    assert c.session[SESSION_ORG_KEY] == "alpha"
    assert Membership.objects.filter(org=b.org, user=b.member).exists()
    ev = AuditEvent.objects.get(org=world["a"].org, action="member.invite_accept")
    assert ev.actor_label == "user:beta-member" and ev.detail["already_member"] is False


def test_another_accounts_email_is_refused_403_and_nothing_changes(world, invited, login):
    path, inv_id = invited(world["b"].member.email)
    outsider = login(world["outsider"])
    for method, data in (("get", None), ("post", {"op": "accept"}), ("post", {"op": "decline"})):
        r = getattr(outsider, method)(path, data)
        assert r.status_code == 403, (method, data)
        assert "for another email" in r.content.decode()
    assert Invitation.objects.get(id=inv_id).status == "pending"
    assert not Membership.objects.filter(org=world["a"].org, user=world["outsider"]).exists()


def test_decline_closes_the_link_and_adds_nobody(world, invited, login):
    b = world["b"]
    path, inv_id = invited(b.member.email)
    c = login(b.member)
    r = c.post(path, {"op": "decline"})
    assert r.status_code == 200 and _state(r) == "declined"
    assert Invitation.objects.get(id=inv_id).revoked_at is not None
    assert not Membership.objects.filter(org=world["a"].org, user=b.member).exists()
    assert AuditEvent.objects.filter(org=world["a"].org, action="member.invite_decline").count() == 1
    assert c.post(path, {"op": "accept"}).status_code == 410
    assert not Membership.objects.filter(org=world["a"].org, user=b.member).exists()


def test_an_unknown_op_changes_nothing(world, invited, login):
    path, inv_id = invited(world["b"].member.email)
    r = login(world["b"].member).post(path, {"op": "join-as-owner"})
    assert r.status_code == 400 and _state(r) == "confirm"
    assert Invitation.objects.get(id=inv_id).status == "pending"


def test_accepting_as_an_existing_member_keeps_the_role_and_uses_the_link(world, invited, login):
    b = world["b"]
    path, inv_id = invited(b.member.email, "admin")
    # Became a member another way after the invitation was sent (here: directly).
    Membership.objects.create(org=world["a"].org, user=b.member, role=Role.MEMBER)
    r = login(b.member).post(path, {"op": "accept"}, follow=True)
    assert r.status_code == 200
    assert "already a member" in " ".join(str(m) for m in r.context["messages"])
    assert Membership.objects.get(org=world["a"].org, user=b.member).role == Role.MEMBER
    assert Invitation.objects.get(id=inv_id).status == "accepted"


# --- links that no longer work ---------------------------------------------------------------------


def test_unknown_expired_revoked_and_used_links(world, invited, login, client_for):
    a, b = world["a"], world["b"]
    for bad in ("/invite/not-a-token", "/invite/" + "x" * 500):
        r = Client().get(bad)
        assert r.status_code == 404 and _state(r) == "invalid"

    expired, exp_id = invited("late@example.com")
    Invitation.objects.filter(id=exp_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    revoked, rev_id = invited(b.owner.email)
    assert client_for(a.admin).delete(f"/api/v1/invitations/{rev_id}").status_code == 204
    used, _ = invited(b.member.email)
    accept(b.member, used)

    users, members = User.objects.count(), Membership.objects.count()
    for path, who, message in ((expired, None, "expired"), (revoked, b.owner, "withdrawn"),
                               (used, b.member, "already been used")):
        c = login(who)
        for r in (c.get(path), c.post(path, {"op": "accept"}),
                  Client().post(path, {"password": PASSWORD, "password_again": PASSWORD})):
            assert r.status_code == 410, (path, r.status_code)
            assert message in r.content.decode()
    assert (User.objects.count(), Membership.objects.count()) == (users, members)
    assert not Membership.objects.filter(org=a.org, user=b.owner).exists()


def test_a_pending_invitation_grants_nothing_in_the_console(world, invited, login):
    b = world["b"]
    invited(b.member.email, "admin")
    c = login(b.member)
    assert c.post("/console/org", {"org": "alpha"}).status_code == 404
    assert c.get("/console/").wsgi_request.org == b.org


# --- the Members page ------------------------------------------------------------------------------


def test_admin_invites_from_the_members_page_and_sees_the_link_once(world, login):
    a = world["a"]
    admin = login(a.admin)
    r = admin.post("/console/members/", {"email": "Colleague@example.com", "role": "admin"})
    assert r.status_code == 200
    url = r.context["invite_url"]
    assert url.startswith("http://testserver/invite/") and url in r.content.decode()
    assert [str(m) for m in r.context["messages"]] == ["Colleague@example.com invited."]
    inv = Invitation.objects.get(org=a.org, email="Colleague@example.com")
    assert inv.role == Role.ADMIN and inv.status == "pending"
    assert not User.objects.filter(email__iexact="colleague@example.com").exists()

    html = admin.get("/console/members/").content.decode()
    assert url not in html and "/invite/" not in html  # only the hash is kept: never shown again
    assert 'id="invitation-table"' in html and "Colleague@example.com" in html
    assert f'action="/console/invitations/{inv.id}/revoke"' in html

    # The link works.
    r = Client().post(link_path(url), {"password": PASSWORD, "password_again": PASSWORD})
    assert r.status_code == 302
    assert Membership.objects.get(org=a.org, user__email="colleague@example.com").role == Role.ADMIN


def test_members_page_refusals_are_form_errors_and_write_nothing(world, login):
    a = world["a"]
    before = Invitation.objects.count()
    admin = login(a.admin)
    r = admin.post("/console/members/", {"email": "ALPHA-member@example.com", "role": "member"})
    assert r.status_code == 400 and r.context["form"].errors["email"] == ["Already a member."]
    too_long = "a" * 60 + "@" + "b" * 63 + "." + "c" * 63 + "." + "d" * 63 + ".com"  # 256 characters
    r = admin.post("/console/members/", {"email": too_long, "role": "member"})
    assert r.status_code == 400 and r.context["form"].errors["email"]
    # the owner role is not among an admin's choices: a crafted post is a field error
    r = admin.post("/console/members/", {"email": "boss@example.com", "role": "owner"})
    assert r.status_code == 400 and r.context["form"].errors["role"]
    assert Invitation.objects.count() == before


def test_only_admins_see_and_manage_invitations_in_the_console(world, login, invited):
    a, b = world["a"], world["b"]
    _, mine = invited("pending@example.com")
    _, theirs = invited("pending@example.com", by=b.owner)
    member = login(a.member)
    html = member.get("/console/members/").content.decode()
    assert 'id="invitation-table"' not in html and "pending@example.com" not in html and 'id="member-add"' not in html
    assert member.post("/console/members/", {"email": "x@example.com", "role": "member"}).status_code == 403
    assert member.post(f"/console/invitations/{mine}/revoke").status_code == 403
    assert login(world["outsider"]).post(f"/console/invitations/{mine}/revoke").status_code == 403
    admin = login(a.admin)
    assert admin.post(f"/console/invitations/{theirs}/revoke").status_code == 404
    assert admin.get(f"/console/invitations/{mine}/revoke").status_code == 405
    assert Invitation.objects.filter(revoked_at__isnull=False).count() == 0
    assert f'data-invitation="{mine}"' in admin.get("/console/members/").content.decode()

    r = admin.post(f"/console/invitations/{mine}/revoke", follow=True)
    assert r.redirect_chain[-1][0] == "/console/members/"
    assert [str(m) for m in r.context["messages"]] == ["Invitation of pending@example.com revoked."]
    assert Invitation.objects.get(id=mine).revoked_at is not None
    assert Invitation.objects.get(id=theirs).revoked_at is None
    assert f'data-invitation="{mine}"' not in r.content.decode()  # no longer listed as pending


# --- the link's token stays out of the logs ---------------------------------------------------------


@pytest.fixture
def server_log():
    """What the configured log handler (settings.LOGGING's "console") writes, as text."""
    handler = next(h for h in logging.getLogger().handlers
                   if any(type(f).__name__ == "RequestIdFilter" for f in h.filters))
    stream = io.StringIO()
    old = handler.setStream(stream)
    yield stream
    handler.setStream(old)


def test_a_live_links_token_is_not_logged(world, invited, login, server_log):
    # Django logs every 4xx with its path, and a link that answers 400 or 403 still works: its
    # token in the web log would be a working invitation for whoever reads the logs.
    path, inv_id = invited("logged@example.com")
    token = path.rsplit("/", 1)[-1]
    assert Client().post(path, {"password": "short", "password_again": "short"}).status_code == 400
    assert login(world["outsider"]).get(path).status_code == 403
    assert Client(enforce_csrf_checks=True).post(path, {"password": PASSWORD,
                                                        "password_again": PASSWORD}).status_code == 403
    text = server_log.getvalue()
    assert text.count("/invite/") >= 3, text  # the lines are there, without the token
    assert token not in text, text
    assert Invitation.objects.get(id=inv_id).status == "pending"


# --- CSRF, a removed member invited back, expiry at the moment of accepting --------------------------


def test_invite_page_posts_need_the_csrf_token(world, invited):
    b = world["b"]
    new_path, new_id = invited("csrf-new@example.com")
    old_path, old_id = invited(b.member.email)
    users = User.objects.count()
    anon = Client(enforce_csrf_checks=True)
    assert anon.post(new_path, {"password": PASSWORD, "password_again": PASSWORD}).status_code == 403
    member = Client(enforce_csrf_checks=True)
    member.force_login(b.member)
    for op in ("accept", "decline"):
        assert member.post(old_path, {"op": op}).status_code == 403
    assert User.objects.count() == users
    assert {Invitation.objects.get(id=i).status for i in (new_id, old_id)} == {"pending"}
    assert not Membership.objects.filter(org=world["a"].org, user=b.member).exists()
    # With the page's token (the cookie and the field it rendered) the same post goes through.
    html = member.get(old_path).content.decode()
    token = html.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    assert member.post(old_path, {"op": "accept", "csrfmiddlewaretoken": token}).status_code == 302
    assert Membership.objects.filter(org=world["a"].org, user=b.member).exists()


def test_a_removed_member_invited_again_joins_again(world, invited, login, client_for):
    a, b = world["a"], world["b"]
    path, _ = invited(b.member.email, "admin")
    accept(b.member, path)
    c = login(b.member)
    c.post("/console/org", {"org": "alpha"})
    assert c.get("/console/").wsgi_request.org == a.org
    assert client_for(a.owner).delete(f"/api/v1/members/{b.member.id}").status_code == 204
    assert c.get("/console/").wsgi_request.org == b.org  # the stale choice is dropped
    assert client_for(b.member).get("/api/v1/org", HTTP_X_NYLON_ORG="alpha").status_code == 404

    path, inv_id = invited(b.member.email)  # back, as a plain member this time
    assert c.get(path).status_code == 200
    assert c.post(path, {"op": "accept"}).status_code == 302
    assert Membership.objects.get(org=a.org, user=b.member).role == Role.MEMBER
    assert Invitation.objects.get(id=inv_id).status == "accepted"
    assert c.get("/console/").wsgi_request.org == a.org


def test_the_compose_web_server_writes_no_access_log():
    # uvicorn's access log (its own handler, not the filter above) prints every request line, and
    # the first request of an invitation is GET /invite/<token> while the link still works.
    # (nylon_run starts uvicorn with --no-access-log too.)
    import yaml

    compose = yaml.safe_load((Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text())
    command = " ".join(compose["services"]["web"]["command"])
    assert "uvicorn " in command and "--no-access-log" in command, command


def test_the_sign_in_from_a_link_returns_only_to_this_site(world, invited):
    path, _ = invited(world["b"].member.email)
    for target, expected in ((path, path), ("https://evil.example/invite/x", "/console/"),
                             ("//evil.example/invite/x", "/console/"), ("https:/evil.example", "/console/")):
        c = Client()
        r = c.post("/login/", {"username": "beta-member", "password": "pw-member-123", "next": target})
        assert r.status_code == 302 and r.url == expected, (target, r.url)
