"""Member invitations through the API: POST /api/v1/members invites (nobody is a member before
accepting), GET /api/v1/invitations and DELETE /api/v1/invitations/{id} are for org admins."""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from assets.models import AuditEvent
from teams.auth import hash_secret
from teams.models import Invitation, Membership, Role

from .invites import accept, invite, link_path, refuse_smtp, sign_up

pytestmark = pytest.mark.django_db

User = get_user_model()
CREATED_FIELDS = {"id", "email", "role", "status", "created_at", "expires_at", "invite_url", "emailed"}


def _token(url: str) -> str:
    return link_path(url).rstrip("/").rsplit("/", 1)[-1]


def test_invite_makes_nobody_a_member_until_accepted(world, client_for):
    a, b = world["a"], world["b"]
    body = invite(client_for(a.admin), "Beta-Member@example.com", "admin")
    assert set(body) == CREATED_FIELDS
    assert body["email"] == "Beta-Member@example.com" and body["role"] == "admin" and body["status"] == "pending"
    assert body["invite_url"].startswith("http://testserver/invite/")
    # Not the account's username: that would tell the admin who owns the address.
    assert "username" not in body and "beta-member" not in body.values()
    assert not Membership.objects.filter(org=a.org, user=b.member).exists()

    # A pending invitation grants nothing: the invited org does not exist for the invitee yet.
    invitee = client_for(b.member)
    assert invitee.get("/api/v1/org", HTTP_X_NYLON_ORG="alpha").status_code == 404
    assert invitee.get("/api/v1/members", HTTP_X_NYLON_ORG="alpha").status_code == 404

    accept(b.member, body["invite_url"])
    assert Membership.objects.get(org=a.org, user=b.member).role == Role.ADMIN
    r = invitee.get("/api/v1/org", HTTP_X_NYLON_ORG="alpha")
    assert r.status_code == 200 and r.json()["actor"]["role"] == "admin"


def test_the_answer_does_not_tell_whether_an_account_exists(world, client_for):
    c = client_for(world["a"].owner)
    users = User.objects.count()
    known = invite(c, world["outsider"].email)
    unknown = invite(c, "nobody-yet@example.com")
    assert set(known) == set(unknown) == CREATED_FIELDS
    assert known["status"] == unknown["status"] == "pending"
    assert User.objects.count() == users  # no account is made before the invitee sets a password


def test_role_rules_on_invite(world, client_for):
    a = world["a"]
    before = Invitation.objects.count()
    # Only owners grant the owner role; members, agents and outsiders invite nobody.
    assert client_for(a.admin).post("/api/v1/members", {"email": "boss@example.com", "role": "owner"},
                                    format="json").status_code == 403
    for who in (a.member, a.key, world["outsider"]):
        r = client_for(who).post("/api/v1/members", {"email": "x@example.com"}, format="json")
        assert r.status_code == 403, r.content
    r = client_for(a.admin).post("/api/v1/members", {"email": "x@example.com", "role": "emperor"}, format="json")
    assert r.status_code == 400 and list(r.json()["error"]["fields"]) == ["role"]
    assert Invitation.objects.count() == before
    assert invite(client_for(a.owner), "boss@example.com", "owner")["role"] == "owner"


def test_already_a_member_is_400_on_email_in_any_case(world, client_for):
    a = world["a"]
    before = Invitation.objects.count()
    for email in ("alpha-member@example.com", "ALPHA-Member@Example.com"):
        r = client_for(a.admin).post("/api/v1/members", {"email": email}, format="json")
        assert r.status_code == 400
        assert r.json()["error"]["fields"] == {"email": ["Already a member."]}
    assert Invitation.objects.count() == before


def test_reinvite_revokes_the_old_link_and_issues_a_new_one(world, client_for):
    a, b = world["a"], world["b"]
    c = client_for(a.admin)
    first = invite(c, "new@example.com")
    second = invite(c, "NEW@example.com", "admin")  # a resend, in another case, with another role
    assert first["invite_url"] != second["invite_url"]
    old, new = Invitation.objects.get(id=first["id"]), Invitation.objects.get(id=second["id"])
    assert old.revoked_at is not None and new.revoked_at is None
    assert Invitation.objects.filter(org=a.org, email__iexact="new@example.com", revoked_at__isnull=True).count() == 1
    # Another org's invitation of the same email is its own.
    other = invite(client_for(b.owner), "new@example.com")
    assert Invitation.objects.get(id=other["id"]).revoked_at is None

    anon = client_for(None)
    assert anon.get(link_path(first["invite_url"])).status_code == 410
    sign_up(second["invite_url"])
    assert Membership.objects.get(org=a.org, user__email="new@example.com").role == Role.ADMIN
    # Now a member: inviting again is refused.
    r = c.post("/api/v1/members", {"email": "new@example.com"}, format="json")
    assert r.status_code == 400 and r.json()["error"]["fields"] == {"email": ["Already a member."]}


def test_list_shows_the_orgs_pending_invitations_to_admins_only(world, client_for):
    a, b = world["a"], world["b"]
    c = client_for(a.admin)
    pending = invite(c, "p1@example.com")
    invite(c, "p2@example.com")
    revoked = invite(c, "gone@example.com")
    assert c.delete(f"/api/v1/invitations/{revoked['id']}").status_code == 204
    expired = invite(c, "late@example.com")
    Invitation.objects.filter(id=expired["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    used = invite(c, world["outsider"].email)
    accept(world["outsider"], used["invite_url"])
    invite(client_for(b.owner), "beta-only@example.com")

    for who in (a.admin, a.owner):
        r = client_for(who).get("/api/v1/invitations")
        assert r.status_code == 200
        rows = r.json()["results"]
        assert [row["email"] for row in rows] == ["p2@example.com", "p1@example.com"]
        assert set(rows[0]) == CREATED_FIELDS - {"invite_url", "emailed"}  # the link is never shown again
        assert {row["status"] for row in rows} == {"pending"}
    r = c.get("/api/v1/invitations", {"limit": 1})
    assert len(r.json()["results"]) == 1 and r.json()["next"]
    r2 = c.get(r.json()["next"].replace("http://testserver", ""))
    assert [row["id"] for row in r2.json()["results"]] == [pending["id"]]

    for who in (a.member, a.key, world["outsider"]):
        assert client_for(who).get("/api/v1/invitations").status_code == 403


def test_revoke_by_role_and_across_orgs(world, client_for):
    a, b = world["a"], world["b"]
    mine = invite(client_for(a.admin), "r@example.com")
    theirs = invite(client_for(b.owner), "r@example.com")
    for who in (a.member, a.key):
        assert client_for(who).delete(f"/api/v1/invitations/{mine['id']}").status_code == 403
    assert client_for(world["outsider"]).delete(f"/api/v1/invitations/{mine['id']}").status_code == 403
    # Another org's invitation does not exist for alpha, whoever asks.
    for who in (a.owner, a.admin, a.member, a.key):
        assert client_for(who).delete(f"/api/v1/invitations/{theirs['id']}").status_code == 404
    assert client_for(a.owner).delete("/api/v1/invitations/999999999").status_code == 404
    assert Invitation.objects.filter(revoked_at__isnull=False).count() == 0

    c = client_for(a.admin)
    assert c.delete(f"/api/v1/invitations/{mine['id']}").status_code == 204
    assert c.delete(f"/api/v1/invitations/{mine['id']}").status_code == 204  # again: no change
    assert AuditEvent.objects.filter(org=a.org, action="member.invite_revoke").count() == 1
    assert client_for(None).post(link_path(mine["invite_url"]), {"op": "accept"}).status_code == 410
    assert Invitation.objects.get(id=theirs["id"]).revoked_at is None


def test_an_accepted_invitation_cannot_be_revoked(world, client_for):
    a = world["a"]
    body = invite(client_for(a.admin), world["outsider"].email)
    accept(world["outsider"], body["invite_url"])
    r = client_for(a.admin).delete(f"/api/v1/invitations/{body['id']}")
    assert r.status_code == 400 and list(r.json()["error"]["fields"]) == ["invitation"]
    assert Membership.objects.filter(org=a.org, user=world["outsider"]).exists()


def test_only_the_hash_of_the_token_is_stored(world, client_for):
    a = world["a"]
    body = invite(client_for(a.admin), "hash@example.com")
    token = _token(body["invite_url"])
    assert len(token) >= 40
    row = Invitation.objects.filter(id=body["id"]).values().get()
    assert row["token_hash"] == hashlib.sha256(token.encode()).hexdigest()
    assert not any(token in str(v) for v in row.values())
    for ev in AuditEvent.objects.filter(org=a.org, action="member.invite"):
        assert token not in str(ev.detail) and token not in ev.object_id
    assert Invitation.objects.get(id=body["id"]).status == "pending"


def test_invite_is_audited(world, client_for):
    a = world["a"]
    body = invite(client_for(a.admin), "Audit@Example.com", "admin")
    ev = AuditEvent.objects.get(org=a.org, action="member.invite")
    assert ev.object_id == str(body["id"]) and ev.actor_label == "user:alpha-admin"
    assert ev.detail["email"] == "audit@example.com" and ev.detail["role"] == "admin"


def test_email_is_sent_after_commit_when_mail_is_configured(world, client_for, settings, mailoutbox,
                                                            django_capture_on_commit_callbacks):
    settings.NYLON_EMAIL_HOST = "smtp.example.com"  # the test runner's locmem backend receives it
    settings.NYLON_PUBLIC_URL = "https://nylon.example.com"  # required with mail (settings)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        body = invite(client_for(world["a"].admin), "mailme@example.com", "admin")
    assert mailoutbox == []  # not before the invitation is committed
    for callback in callbacks:
        callback()
    (mail,) = mailoutbox
    assert mail.to == ["mailme@example.com"]
    assert "ALPHA" in mail.subject and "Admin" in mail.body
    # The link is only in the email: an admin holding it could sign up as that address.
    assert body["invite_url"] is None and body["emailed"] is True
    (link,) = re.findall(r"https://nylon\.example\.com/invite/\S+", mail.body)
    assert Invitation.objects.get(id=body["id"]).token_hash == hash_secret(_token(link))


def test_no_email_when_mail_is_not_configured(world, client_for, settings, mailoutbox,
                                              django_capture_on_commit_callbacks):
    settings.NYLON_EMAIL_HOST = ""
    with django_capture_on_commit_callbacks(execute=True):
        invite(client_for(world["a"].admin), "quiet@example.com")
    assert mailoutbox == []


@pytest.mark.django_db(transaction=True)  # the mail is sent on a real commit, before the answer
def test_a_failed_send_is_a_503_and_leaves_no_invitation_nobody_holds_a_link_to(world, client_for, settings,
                                                                                caplog):
    """With mail the admin never sees the link: a lost email must not be answered "emailed"."""
    refuse_smtp(settings)
    c = client_for(world["a"].admin)
    with caplog.at_level(logging.WARNING, logger="nylon.invitations"):
        r = c.post("/api/v1/members", {"email": "unlucky@example.com"}, format="json")
    assert r.status_code == 503, r.content
    assert r.json()["error"]["code"] == "unavailable" and "could not be sent" in r.json()["error"]["message"]
    assert "/invite/" not in r.content.decode()
    assert any("email not sent" in rec.getMessage() for rec in caplog.records)
    assert Invitation.objects.get(email="unlucky@example.com").status == "revoked"
    assert c.get("/api/v1/invitations").json()["results"] == []
    # Once mail works again, inviting again works.
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    r = c.post("/api/v1/members", {"email": "unlucky@example.com"}, format="json")
    assert r.status_code == 201 and r.json()["emailed"] is True


@pytest.mark.django_db(transaction=True)
def test_the_console_says_when_the_invitation_email_failed(world, settings):
    refuse_smtp(settings)
    admin = Client()
    admin.force_login(world["a"].admin)
    r = admin.post("/console/members/", {"email": "unlucky@example.com", "role": "member"})
    assert r.status_code == 503
    assert "could not be sent" in r.content.decode() and 'id="invite-emailed"' not in r.content.decode()
    assert Invitation.objects.get(email="unlucky@example.com").status == "revoked"


def test_ttl_comes_from_the_setting(world, client_for, settings):
    settings.NYLON_INVITE_TTL_DAYS = 2
    before = timezone.now()
    body = invite(client_for(world["a"].admin), "ttl@example.com")
    expires = Invitation.objects.get(id=body["id"]).expires_at
    assert before + timedelta(days=2) <= expires <= timezone.now() + timedelta(days=2)


def test_invitations_are_in_the_openapi_schema(client_for, world):
    r = client_for(world["a"].owner).get("/api/schema/?format=json")
    paths = r.json()["paths"]
    assert set(paths["/api/v1/invitations"]) == {"get"}
    assert set(paths["/api/v1/invitations/{invitation_id}"]) == {"delete"}
    created = paths["/api/v1/members"]["post"]["responses"]["201"]["content"]["application/json"]["schema"]
    assert created["$ref"].endswith("/InvitationCreatedOutput")


def test_an_inviters_pending_invitations_end_with_their_right_to_grant_them(world, client_for):
    # An invitation carries its inviter's authority: an admin who is demoted or removed must not
    # keep a way back in (an invitation of a second address of theirs, as admin) nor hand out
    # roles they can no longer grant.
    a = world["a"]
    owner = client_for(a.owner)
    assert owner.patch(f"/api/v1/members/{a.admin.id}", {"role": "owner"}, format="json").status_code == 200
    by_admin = client_for(a.admin)
    as_owner = invite(by_admin, "second-owner@example.com", "owner")
    as_admin = invite(by_admin, "alt-admin@example.com", "admin")
    as_member = invite(by_admin, "colleague@example.com")
    others = invite(owner, "untouched@example.com", "owner")  # another inviter's

    def status(body):
        return Invitation.objects.get(id=body["id"]).status

    # owner -> admin: may no longer grant the owner role.
    assert owner.patch(f"/api/v1/members/{a.admin.id}", {"role": "admin"}, format="json").status_code == 200
    assert [status(b) for b in (as_owner, as_admin, as_member, others)] == ["revoked", "pending", "pending", "pending"]
    ev = AuditEvent.objects.filter(org=a.org, action="member.role").latest("id")
    assert ev.detail["revoked_invitations"] == [as_owner["id"]]
    assert client_for(None).get(link_path(as_owner["invite_url"])).status_code == 410

    # admin -> member: invites nobody any more.
    assert owner.patch(f"/api/v1/members/{a.admin.id}", {"role": "member"}, format="json").status_code == 200
    assert [status(b) for b in (as_admin, as_member, others)] == ["revoked", "revoked", "pending"]

    # Removed: whatever they issued as an admin again is revoked too.
    assert owner.patch(f"/api/v1/members/{a.admin.id}", {"role": "admin"}, format="json").status_code == 200
    again = invite(by_admin, "alt-admin@example.com", "admin")
    assert owner.delete(f"/api/v1/members/{a.admin.id}").status_code == 204
    assert status(again) == "revoked" and status(others) == "pending"
    ev = AuditEvent.objects.filter(org=a.org, action="member.remove").latest("id")
    assert ev.detail["revoked_invitations"] == [again["id"]]
    assert not Membership.objects.filter(org=a.org, user__email__iexact="alt-admin@example.com").exists()


def test_invitations_per_org_and_hour_are_capped(world, client_for, settings):
    # Each invitation may send an email from the operator's address: an admin (or a stolen admin
    # session, in the console, where no API throttle applies) must not turn Nylon into a mailer.
    settings.NYLON_INVITES_PER_HOUR = 3
    a, b = world["a"], world["b"]
    c = client_for(a.admin)
    first = invite(c, "one@example.com")
    invite(c, "two@example.com")
    invite(c, "ONE@example.com")  # a resend counts: it is another email
    invitations, events = Invitation.objects.count(), AuditEvent.objects.filter(action="member.invite").count()
    r = c.post("/api/v1/members", {"email": "four@example.com"}, format="json")
    assert r.status_code == 429, r.content
    assert r.json()["error"]["code"] == "throttled" and 3000 <= int(r["Retry-After"]) <= 3600
    assert (Invitation.objects.count(), AuditEvent.objects.filter(action="member.invite").count()) == (
        invitations, events)
    # The console is bounded by the same count: a form error, nothing written.
    admin = Client()
    admin.force_login(a.owner)
    r = admin.post("/console/members/", {"email": "four@example.com", "role": "member"})
    assert r.status_code == 429 and "invitations" in " ".join(r.context["form"].non_field_errors())
    assert Invitation.objects.count() == invitations
    # Another org has its own count; and an hour later this one may invite again.
    invite(client_for(b.owner), "four@example.com")
    Invitation.objects.filter(id=first["id"]).update(created_at=timezone.now() - timedelta(minutes=61))
    invite(c, "four@example.com")


def test_an_invitation_that_expires_before_the_accept_locks_it_is_closed(world, client_for):
    from teams import services

    a, b = world["a"], world["b"]
    body = invite(client_for(a.admin), b.member.email)
    shown = Invitation.objects.get(id=body["id"])  # as the page loaded it: pending
    Invitation.objects.filter(id=body["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert shown.status == "pending"
    events = AuditEvent.objects.count()
    for call in (lambda: services.invitation_accept(invitation=shown, user=b.member),
                 lambda: services.invitation_signup(invitation=shown, password="a-long-enough-password-42"),
                 lambda: services.invitation_decline(invitation=shown, user=b.member)):
        with pytest.raises(services.InvitationClosed) as exc:
            call()
        assert exc.value.status == "expired"
    assert not Membership.objects.filter(org=a.org, user=b.member).exists()
    assert AuditEvent.objects.count() == events
    assert Invitation.objects.get(id=body["id"]).accepted_at is None


def test_only_owners_end_an_owner_invitation(world, client_for):
    """Granting the owner role is an owner's call, and so is revoking or replacing an invitation
    to it: an admin could otherwise block an owner's choice of a co-owner."""
    a = world["a"]
    owner, admin = client_for(a.owner), client_for(a.admin)
    inv = invite(owner, "co-owner@example.com", "owner")
    r = admin.delete(f"/api/v1/invitations/{inv['id']}")
    assert r.status_code == 403, r.content
    r = admin.post("/api/v1/members", {"email": "co-owner@example.com", "role": "member"}, format="json")
    assert r.status_code == 403, r.content
    assert Invitation.objects.get(id=inv["id"]).status == "pending"  # untouched by either
    assert Invitation.objects.filter(email="co-owner@example.com").count() == 1
    # Other invitations stay the admins' to end; the owner may end this one.
    mine = invite(admin, "plain@example.com", "member")
    assert admin.delete(f"/api/v1/invitations/{mine['id']}").status_code == 204
    assert owner.delete(f"/api/v1/invitations/{inv['id']}").status_code == 204
