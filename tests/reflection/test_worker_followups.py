"""Writes committed while the broker is down, with the real worker: the write is acknowledged, its
follow-ups are not lost (the conflict check waits as a ``memory.Followup`` row, the ended session
as PENDING), and once the broker is back the sweeps run each exactly once.

The outage is this process's: its Celery producer is pointed at a port nothing listens on (as
test_outages.py points the cache at one), so the shared Redis and the suite's worker stay up."""

from __future__ import annotations

import socket
import time
from contextlib import contextmanager

import pytest

from memory import services as memory_services
from memory.models import Edge, Followup, MemorySession, Node
from reflection import hooks, services
from reflection.models import Conflict

from .helpers import TURNS, weave
from .test_worker_background import no_llm, poll

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

SAY = [{"speaker": "Ana", "text": "I eat spicy food.", "occurred_at": "2023-05-08T10:00:00Z"}]
DENY = [{"speaker": "Ana", "text": "I don't eat spicy food.", "occurred_at": "2023-06-08T10:00:00Z"}]


def _reset_producers(app) -> None:
    # Celery caches its connection and producer pools; forget them (as Celery does after a fork) so the
    # next send dials the current URL. Not closed: kombu registers pools per URL and would hand the
    # closed one back when the live URL returns.
    app._pool = None
    app.amqp._producer_pool = None


@contextmanager
def broker_down():
    from nylon_project.celery import app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"redis://127.0.0.1:{s.getsockname()[1]}/0"
    live = app.conf.broker_url
    app.conf.broker_url = dead
    _reset_producers(app)
    try:
        yield
    finally:
        app.conf.broker_url = live
        _reset_producers(app)


def test_a_conflict_check_lost_to_a_broker_outage_runs_once_after_the_sweep(world, client_for, caplog,
                                                                              celery_worker_process):
    org = world["a"].org
    no_llm(org)
    c = client_for(world["a"].key)
    first = weave(c, "s1", turns=SAY, end=False)["node_ids"][0]
    assert poll(lambda: not Followup.objects.exists(), 60), "the check of a normal write never cleared"
    failures = sum(hooks.enqueue_failures.values())

    with broker_down():
        started = time.monotonic()
        second = weave(c, "s2", turns=DENY, end=False)["node_ids"][0]  # acknowledged (201)
        assert time.monotonic() - started < 10
    owed = Followup.objects.get()
    assert owed.node_ids == [second] and owed.attempts == 0
    assert sum(hooks.enqueue_failures.values()) == failures + 1  # the failure is counted and logged
    assert "could not enqueue reflection.detect_conflicts" in caplog.text
    assert c.get("/api/v1/background/status").json()["followups"]["pending"] == 1
    time.sleep(3)
    assert not Conflict.objects.exists()  # nothing reached the worker

    assert memory_services.enqueue_pending_followups(grace_secs=120) == 0  # in grace: not re-sent
    assert memory_services.enqueue_pending_followups(grace_secs=0) == 1
    assert poll(lambda: not Followup.objects.exists(), 60), "the re-sent check never ran"
    assert memory_services.enqueue_pending_followups(grace_secs=0) == 0  # done: nothing to re-send
    time.sleep(2)
    assert list(Conflict.objects.values_list("node_a_id", "node_b_id")) == [(first, second)]
    assert Edge.objects.filter(kind="contradicts").count() == 1


def test_a_session_ended_while_the_broker_is_down_is_abstracted_once_with_its_checks(world, client_for,
                                                                                     celery_worker_process):
    org = world["a"].org
    no_llm(org)
    c = client_for(world["a"].key)
    with broker_down():
        weave(c, "w1")  # four leaves, ends the session: abstraction and conflict check both lost
    s = MemorySession.objects.get(org=org, key="w1")
    assert s.abstraction_status == "pending" and Followup.objects.count() == 1
    time.sleep(2)
    assert not Node.objects.filter(kind="fact").exists()

    assert s.id in services.tick()["abstract"]  # the reflection beat re-finds the session
    assert memory_services.enqueue_pending_followups(grace_secs=0) == 1
    # The facts' own conflict check is recorded and sent by the worker, and cleared too.
    done = poll(lambda: (MemorySession.objects.get(pk=s.pk).abstraction_status == "done"
                         and not Followup.objects.exists()), 90)
    assert done, list(Followup.objects.values_list("node_ids", "attempts"))
    services.tick()
    assert memory_services.enqueue_pending_followups(grace_secs=0) == 0
    time.sleep(2)
    assert Node.objects.filter(org=org, kind="fact").count() == 3 == len(TURNS) - 1
    assert not Followup.objects.exists()
