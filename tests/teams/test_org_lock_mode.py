"""The org row lock that serialises an org's invitations and role changes must not stall the org's
memory writes: a write inserts rows that reference the org, which takes a KEY SHARE lock on it, and
FOR UPDATE conflicts with that where FOR NO KEY UPDATE does not."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction

from memory import services as memory_services
from teams import services
from teams.auth import actor_for_agent
from teams.models import Membership, Scope

pytestmark = pytest.mark.django_db(transaction=True)


def _in_thread(fn) -> threading.Thread:
    def run() -> None:
        try:
            fn()
        finally:
            connections.close_all()

    t = threading.Thread(target=run)
    t.start()
    return t


def test_a_memory_write_goes_on_while_a_role_change_holds_the_org_lock(world):
    a = world["a"]
    held, release = threading.Event(), threading.Event()
    written: list[int] = []

    def role_change_in_progress() -> None:
        with transaction.atomic():
            services._lock_membership(Membership.objects.get(org=a.org, user=a.member))
            held.set()
            release.wait(30)

    def write() -> None:
        actor = actor_for_agent(a.agent, scopes=frozenset({Scope.READ, Scope.WRITE}))
        res = memory_services.weave_session(actor=actor, turns=[memory_services.TurnIn(text="Ana booked the venue.")],
                                            session_key="during-role-change")
        written.extend(res.node_ids)

    locker, writer = _in_thread(role_change_in_progress), None
    try:
        assert held.wait(20)
        writer = _in_thread(write)
        writer.join(10)
        assert not writer.is_alive(), "the write waited on the org lock of a role change"
        assert len(written) == 1
    finally:
        release.set()
        locker.join(30)
        if writer is not None:
            writer.join(30)
