"""A conflict's resolution and the delete of a memory in the same chain, at the same time, run one
after the other (row locks on the memories), so neither undoes the other unseen. A review found a
delete reinstating a memory that a resolution committing meanwhile had just superseded again (both
memories current, the conflict marked superseded), and a resolution could keep a memory deleted
meanwhile, leaving what it superseded retired by a deleted memory."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction
from rest_framework.exceptions import ValidationError

from memory import services as memory_services
from memory.models import Edge, Node
from reflection import conflicts
from reflection.models import Conflict
from teams.auth import Actor

from .helpers import weave
from .test_conflicts import two_statements
from .test_delete_reinstates_superseded import _supersede

pytestmark = pytest.mark.django_db(transaction=True)

THIRD = [{"speaker": "Ana", "text": "I never eat spicy food now.", "occurred_at": "2023-07-08T10:00:00Z"}]


def _held(work, holding: threading.Event, release: threading.Event, errors: list) -> threading.Thread:
    """``work`` in a transaction of its own thread, held open until ``release``."""

    def run() -> None:
        try:
            with transaction.atomic():
                work()
                holding.set()
                release.wait(10)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            errors.append(exc)
        finally:
            holding.set()
            connection.close()

    t = threading.Thread(target=run)
    t.start()
    return t


def _in_thread(work, errors: list) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    t = threading.Thread(target=run)
    t.start()
    return t


def test_a_delete_waits_for_a_resolution_that_supersedes_what_it_would_reinstate(world, client_for, no_llm):
    a = world["a"]
    c = client_for(a.key)
    actor = Actor(org=a.org, agent=a.agent)
    first, second = two_statements(world, client_for)
    third = weave(c, "s3", turns=THIRD, end=False)["node_ids"][0]
    _supersede(c, first, second, keep=second)  # second retired first
    conflict = Conflict.objects.create(org=a.org, node_a_id=first, node_b_id=third, reason="t", detector="rule")

    holding, release, errors = threading.Event(), threading.Event(), []
    resolving = _held(lambda: conflicts.resolve(actor=actor, conflict=conflict, action="supersede", keep_id=third),
                      holding, release, errors)
    assert holding.wait(10)
    deleting = _in_thread(lambda: memory_services.node_delete(actor=actor, node=Node.objects.get(pk=second)), errors)
    deleting.join(1.0)
    assert deleting.is_alive()  # waiting for the resolution's lock on the first memory
    release.set()
    resolving.join(10)
    deleting.join(10)
    assert not errors
    # The third, still a memory, superseded the first: it stays retired.
    assert Node.objects.get(pk=first).valid_to is not None
    assert Edge.objects.filter(src_id=third, dst_id=first, kind="supersedes").exists()
    assert Node.objects.get(pk=second).deleted_at is not None


def test_a_resolution_after_a_concurrent_delete_of_the_kept_memory_is_refused(world, client_for, no_llm):
    a = world["a"]
    actor = Actor(org=a.org, agent=a.agent)
    first, second = two_statements(world, client_for)
    conflict = Conflict.objects.create(org=a.org, node_a_id=first, node_b_id=second, reason="t", detector="rule")

    holding, release, errors = threading.Event(), threading.Event(), []
    deleting = _held(lambda: memory_services.node_delete(actor=actor, node=Node.objects.get(pk=second)),
                     holding, release, errors)
    assert holding.wait(10)
    refused: list = []
    resolving = _in_thread(
        lambda: conflicts.resolve(actor=actor, conflict=conflict, action="supersede", keep_id=second), refused)
    resolving.join(1.0)
    assert resolving.is_alive()  # waiting for the delete's lock on the kept memory
    release.set()
    deleting.join(10)
    resolving.join(10)
    assert not errors
    assert len(refused) == 1 and isinstance(refused[0], ValidationError)
    assert "was deleted" in str(refused[0].detail)
    assert Node.objects.get(pk=first).valid_to is None  # not retired by a deleted memory
    assert Conflict.objects.get().status == "open"
