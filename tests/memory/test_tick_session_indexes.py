"""The reflection tick asks three questions of every session ever written, every minute: which open
ones went idle, which abstractions are owed, which reflections are owed. Partial indexes answer
each from the work outstanding instead of a scan of the table; this checks that the statements the
tick really sends can use them (with sequential scans off, so a small test table does not hide it)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.models import MemorySession
from reflection import services

pytestmark = pytest.mark.django_db

S = MemorySession.Status
INDEXES = ("session_idle_open", "session_abstraction_owed", "session_reflection_owed")


def _plans(statements: list[str]) -> str:
    plans = []
    with connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")
        for sql in statements:
            cur.execute("EXPLAIN " + sql)
            plans.append("\n".join(r[0] for r in cur.fetchall()))
    return "\n\n".join(plans)


def test_the_ticks_session_queries_use_the_partial_indexes(world, settings):
    settings.NYLON_ENQUEUE_TASKS = False
    org, agent = world["a"].org, world["a"].agent
    now = timezone.now()
    old = now - timedelta(days=2)
    for i, (ended, abstraction, reflection) in enumerate([
        (None, S.OPEN, S.OPEN), (old, S.PENDING, S.OPEN), (old, S.FAILED, S.OPEN), (old, S.DONE, S.OPEN),
        (old, S.DONE, S.DONE),
    ]):
        MemorySession.objects.create(org=org, owner_agent=agent, key=f"s{i}", started_at=old, last_turn_at=old,
                                     ended_at=ended, abstraction_status=abstraction, reflection_status=reflection)
    with CaptureQueriesContext(connection) as q:
        services.tick(now=now)
    selects = [x["sql"] for x in q.captured_queries
               if x["sql"].lstrip().upper().startswith("SELECT") and '"memory_memorysession"' in x["sql"]]
    assert selects
    plans = _plans(selects)
    for name in INDEXES:
        assert name in plans, (name, plans)
