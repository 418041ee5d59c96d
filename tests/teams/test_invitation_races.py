"""Invitations under concurrency, with real transactions in two threads (two connections): the
second request waits for the first one's lock and then sees what it committed."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import close_old_connections, connection, transaction

from teams import services
from teams.auth import actor_for_user
from teams.models import Invitation, Membership

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
