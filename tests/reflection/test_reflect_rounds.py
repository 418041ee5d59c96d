"""A session reopened by new turns is reflected again: the new round's bridges are written under
keys of their own (they used to collide with the first round's on ``node_event_idempotent``, roll
back and be retried with a paid call every tick), and a redelivered round writes nothing twice."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import Edge, MemorySession, Node
from reflection import services
from reflection.models import SessionWork

from .helpers import session, weave
from .test_reflect import SPICY

pytestmark = pytest.mark.django_db

KILN = [{"speaker": "Ana", "text": "I bought a pottery kiln for my garage today.",
         "occurred_at": "2023-05-20T10:00:00Z"}]
KILN_BRIDGE = "Pottery kilns reach temperatures above 1000 degrees Celsius when firing clay."


def reflect_calls(server) -> int:
    return sum(1 for r in server.requests if r["task"] == "reflect")


def test_reopened_session_is_reflected_again_once(world, client_for, llm):
    server = llm.need_script()
    c = client_for(world["a"].key)
    weave(c, "s1", turns=SPICY)
    s = session(world["a"].org, "s1")
    services.abstract_session(session_id=s.id)
    assert services.reflect_session(session_id=s.id)["bridges"] == 1
    first = Node.objects.get(kind="bridge")

    weave(c, "s1", turns=KILN, end=False)  # new turns reopen the session …
    s.refresh_from_db()
    assert s.reflection_status == "open"
    weave(c, "s1", turns=[{"speaker": "Ben", "text": "Nice.", "occurred_at": "2023-05-20T10:01:00Z"}])  # … end
    assert services.abstract_session(session_id=s.id)["facts"] == 2
    kiln_fact = Node.objects.get(kind="fact", text__contains="kiln")
    server.push(("json", {"bridges": [{"text": KILN_BRIDGE, "fact_ids": [kiln_fact.id]}]}))
    assert services.reflect_session(session_id=s.id) == {"status": "done", "bridges": 1}
    second = Node.objects.filter(kind="bridge").exclude(pk=first.pk).get()
    assert second.text == KILN_BRIDGE and second.event_id != first.event_id
    assert Edge.objects.filter(src=kiln_fact, dst=second, kind="bridge").exists()
    s.refresh_from_db()
    assert s.reflection_status == "done"
    assert SessionWork.objects.get(session=s).reflection == "done"

    # the same round delivered again (the session re-marked meanwhile): nothing twice, no paid call
    calls = reflect_calls(server)
    MemorySession.objects.filter(pk=s.pk).update(reflection_status="pending")
    assert services.reflect_session(session_id=s.id)["noop"] is True
    assert Node.objects.filter(kind="bridge").count() == 2 and reflect_calls(server) == calls
    assert MemorySession.objects.get(pk=s.pk).reflection_status == "done"


def test_round_written_by_a_concurrent_delivery_is_not_written_again(world, client_for, llm, monkeypatch):
    """Two deliveries of one round both call the LLM; the second one, under the lock, finds the
    round written (even with the session re-marked in between) and adds nothing."""
    llm.need_script()
    weave(client_for(world["a"].key), "s1", turns=SPICY)
    s = session(world["a"].org, "s1")
    services.abstract_session(session_id=s.id)
    write = services._write_bridges
    pending: list[dict] = []
    monkeypatch.setattr(services, "_write_bridges", lambda **kw: pending.append(kw) or {"held": True})
    services.reflect_session(session_id=s.id)
    services.reflect_session(session_id=s.id)
    assert len(pending) == 2
    assert write(**pending[0])["bridges"] == 1
    MemorySession.objects.filter(pk=s.pk).update(reflection_status="pending")
    assert write(**pending[1])["noop"] is True
    assert Node.objects.filter(kind="bridge").count() == 1


def test_reopened_session_goes_through_the_tick(world, client_for, llm, settings):
    """The tick's path: reflected, reopened, abstracted, reflected again — no failure, no loop."""
    server = llm.need_script()
    settings.NYLON_ABSTRACTION_RETRY_SECS = 0
    c = client_for(world["a"].key)
    weave(c, "s1", turns=SPICY)
    s = session(world["a"].org, "s1")
    services.abstract_session(session_id=s.id)
    later = timezone.now() + timedelta(days=1)
    assert s.id in services.tick(now=later)["reflect"]
    services.reflect_session(session_id=s.id)
    weave(c, "s1", turns=KILN)  # turns sent with end_session: the new facts reopen reflection
    services.abstract_session(session_id=s.id)
    s.refresh_from_db()
    assert s.reflection_status == "open" and SessionWork.objects.get(session=s).reflection_attempts == 0
    server.push(("json", {"bridges": [{"text": KILN_BRIDGE,
                                       "fact_ids": [Node.objects.filter(kind="fact").latest("id").id]}]}))
    assert s.id in services.tick(now=later + timedelta(days=1))["reflect"]
    assert services.reflect_session(session_id=s.id)["bridges"] == 1
    assert s.id not in services.tick(now=later + timedelta(days=2))["reflect"]
    assert Node.objects.filter(kind="bridge").count() == 2
