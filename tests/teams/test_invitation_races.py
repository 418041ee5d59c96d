"""Invitations under concurrency, with real transactions in two threads (two connections): the
second request waits for the first one's lock and then sees what it committed."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import close_old_connections, connection, transaction

from teams import services
from teams.auth import actor_for_user
from teams.models import Invitation, Membership, Organization

pytestmark = pytest.mark.django_db(transaction=True)

HOLD_SECS = 0.5


def _run_second_while_first_holds(first, second):
    """Runs ``first`` in a thread inside a transaction that stays open HOLD_SECS after it returns,
    and ``second`` (in this thread) meanwhile. Returns what each returned or raised."""
    done, results = threading.Event(), {}

    def hold():
        try:
            with transaction.atomic():
                results["first"] = first()
                done.set()
                time.sleep(HOLD_SECS)  # the second call starts now and must wait for this commit
        except Exception as exc:  # reported to the test, not lost in the thread
            results["first"] = exc
            done.set()
        finally:
            connection.close()

    t = threading.Thread(target=hold)
    t.start()
    assert done.wait(30)
    started = time.monotonic()
    try:
        results["second"] = second()
    except Exception as exc:
        results["second"] = exc
    waited = time.monotonic() - started
    t.join(30)
    close_old_connections()
    return results["first"], results["second"], waited


def test_two_accepts_of_one_link_make_one_membership(world):
    a, b = world["a"], world["b"]
    invitation, _ = services.member_invite(actor=actor_for_user(a.admin, a.org), email=b.member.email,
                                           role="member", base_url="http://testserver")
    first, second, waited = _run_second_while_first_holds(
        lambda: services.invitation_accept(invitation=invitation, user=b.member),
        lambda: services.invitation_accept(invitation=invitation, user=b.member),
    )
    assert first == (Membership.objects.get(org=a.org, user=b.member), True)
    assert isinstance(second, services.InvitationClosed) and second.status == "accepted"
    assert waited >= HOLD_SECS * 0.8  # it waited for the first one's lock
    assert Membership.objects.filter(org=a.org, user=b.member).count() == 1


def test_two_invites_of_one_email_leave_one_open_link(world):
    a = world["a"]
    actor = actor_for_user(a.admin, a.org)

    def invite():
        return services.member_invite(actor=actor, email="Same@example.com", role="member",
                                      base_url="http://testserver")

    first, second, waited = _run_second_while_first_holds(invite, invite)
    assert not isinstance(first, Exception) and not isinstance(second, Exception), (first, second)
    assert waited >= HOLD_SECS * 0.8
    open_ = Invitation.objects.filter(org=a.org, email__iexact="same@example.com", revoked_at__isnull=True)
    assert list(open_.values_list("id", flat=True)) == [second[0].id]
    assert Invitation.objects.get(id=first[0].id).revoked_at is not None


def _waiting_on_a_lock() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")
        return cur.fetchone()[0]


def _while_reinviting(world, other):
    """Runs ``other(invitation)`` in a thread while this thread re-invites the invitation's email
    (which revokes it), with the re-invite's first step (the org row lock) taken before ``other``
    starts: the interleaving in which the two meet at the invitation row. Returns what each
    returned or raised."""
    a, b = world["a"], world["b"]
    actor = actor_for_user(a.admin, a.org)
    invitation, _ = services.member_invite(actor=actor, email=b.member.email, role="member",
                                           base_url="http://testserver")
    results = {}

    def run():
        try:
            results["other"] = other(invitation)
        except Exception as exc:
            results["other"] = exc
        finally:
            connection.close()

    t = threading.Thread(target=run)
    try:
        with transaction.atomic():
            Organization.objects.select_for_update().get(pk=a.org.pk)  # member_invite's first step
            t.start()
            deadline = time.monotonic() + 10
            while not _waiting_on_a_lock() and time.monotonic() < deadline:
                time.sleep(0.02)
            results["invite"] = services.member_invite(actor=actor, email=b.member.email.upper(), role="admin",
                                                       base_url="http://testserver")
    except Exception as exc:
        results["invite"] = exc
    t.join(30)
    close_old_connections()
    return invitation, results


@pytest.mark.parametrize("op", ["revoke", "accept", "decline"])
def test_a_reinvite_meeting_a_revoke_accept_or_decline_does_not_deadlock(world, op):
    a, b = world["a"], world["b"]
    calls = {
        "revoke": lambda inv: services.invitation_revoke(actor=actor_for_user(a.owner, a.org), invitation=inv),
        "accept": lambda inv: services.invitation_accept(invitation=inv, user=b.member),
        "decline": lambda inv: services.invitation_decline(invitation=inv, user=b.member),
    }
    invitation, results = _while_reinviting(world, calls[op])
    assert not isinstance(results["invite"], Exception), results
    # The re-invite went first (it held the org): the old link was revoked, and the other call
    # found it closed (or, for a revoke, already revoked: no change).
    if op == "revoke":
        assert not isinstance(results["other"], Exception), results
    else:
        assert isinstance(results["other"], services.InvitationClosed), results
    assert Invitation.objects.get(id=invitation.id).status == "revoked"
    assert Invitation.objects.get(id=results["invite"][0].id).status == "pending"
    assert not Membership.objects.filter(org=a.org, user=b.member).exists()


def test_two_sign_ups_as_one_name_in_two_cases_make_one_account(world):
    """Names are unique regardless of case, by a check the case-sensitive index does not back: two
    sign-ups at once as "Ana" and "ana" both passed it. The second now waits and is refused."""
    from django.contrib.auth import get_user_model
    from rest_framework.exceptions import ValidationError

    a, b = world["a"], world["b"]  # two orgs: one org's sign-ups already wait for each other (its row lock)
    first_inv, _ = services.member_invite(actor=actor_for_user(a.admin, a.org), email="ana.one@example.com",
                                          role="member", base_url="http://testserver")
    second_inv, _ = services.member_invite(actor=actor_for_user(b.owner, b.org), email="ana.two@example.com",
                                           role="member", base_url="http://testserver")
    password = "a-long-enough-password-42"
    first, second, waited = _run_second_while_first_holds(
        lambda: services.invitation_signup(invitation=first_inv, password=password, username="Ana"),
        lambda: services.invitation_signup(invitation=second_inv, password=password, username="ana"),
    )
    assert not isinstance(first, Exception), first
    assert isinstance(second, ValidationError) and "taken" in str(second.detail["username"])
    assert waited >= HOLD_SECS * 0.8
    assert get_user_model().objects.filter(username__iexact="ana").count() == 1
