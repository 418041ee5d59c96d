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


def _race(first, second) -> tuple[list, list]:
    """``first`` in a transaction of its own thread, held open while ``second`` starts in another:
    ``second`` must wait for it (a row lock), then both finish. Returns each one's exceptions."""
    holding, release = threading.Event(), threading.Event()
    errors: tuple[list, list] = ([], [])

    def run_first() -> None:
        try:
            with transaction.atomic():
                first()
                holding.set()
                release.wait(10)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            errors[0].append(exc)
        finally:
            holding.set()
            connection.close()

    def run_second() -> None:
        try:
            second()
        except Exception as exc:  # noqa: BLE001
            errors[1].append(exc)
        finally:
            connection.close()

    a = threading.Thread(target=run_first)
    a.start()
    assert holding.wait(10)
    b = threading.Thread(target=run_second)
    b.start()
    b.join(1.0)
    waited = b.is_alive()
    release.set()
    a.join(10)
    b.join(10)
    assert waited  # the second waited for the first's lock
    return errors


def test_a_delete_waits_for_a_resolution_that_supersedes_what_it_would_reinstate(world, client_for, no_llm):
    a = world["a"]
    c = client_for(a.key)
    actor = Actor(org=a.org, agent=a.agent)
    first, second = two_statements(world, client_for)
    third = weave(c, "s3", turns=THIRD, end=False)["node_ids"][0]
    _supersede(c, first, second, keep=second)  # second retired first
    conflict = Conflict.objects.create(org=a.org, node_a_id=first, node_b_id=third, reason="t", detector="rule")

    errors = _race(lambda: conflicts.resolve(actor=actor, conflict=conflict, action="supersede", keep_id=third),
                   lambda: memory_services.node_delete(actor=actor, node=Node.objects.get(pk=second)))
    assert errors == ([], [])
    # The third, still a memory, superseded the first: it stays retired.
    assert Node.objects.get(pk=first).valid_to is not None
    assert Edge.objects.filter(src_id=third, dst_id=first, kind="supersedes").exists()
    assert Node.objects.get(pk=second).deleted_at is not None


def test_a_resolution_after_a_concurrent_delete_of_the_kept_memory_is_refused(world, client_for, no_llm):
    a = world["a"]
    actor = Actor(org=a.org, agent=a.agent)
    first, second = two_statements(world, client_for)
    conflict = Conflict.objects.create(org=a.org, node_a_id=first, node_b_id=second, reason="t", detector="rule")

    deleted, refused = _race(
        lambda: memory_services.node_delete(actor=actor, node=Node.objects.get(pk=second)),
        lambda: conflicts.resolve(actor=actor, conflict=conflict, action="supersede", keep_id=second))
    assert not deleted
    assert len(refused) == 1 and isinstance(refused[0], ValidationError)
    assert "was deleted" in str(refused[0].detail)
    assert Node.objects.get(pk=first).valid_to is None  # not retired by a deleted memory
    assert Conflict.objects.get().status == "open"
