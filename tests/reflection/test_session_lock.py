"""The worker's abstraction and reflection lock their session with FOR NO KEY UPDATE of the
session row alone. With FOR UPDATE (of the session and, through select_related, its org), a
request stamping the session's SessionWork (an insert whose foreign key takes KEY SHARE on the
session) deadlocked with the worker inserting the same row, as an SRE run under load saw three
times in 17 minutes; and every node written to the org waited on the org row."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.models import MemorySession
from nylon_project.beat_lock import _conninfo
from reflection import services

from .helpers import weave

pytestmark = pytest.mark.django_db(transaction=True)


def _lock_sql(session_id: int) -> str:
    with CaptureQueriesContext(connection) as q, connection.cursor():
        from django.db import transaction

        with transaction.atomic():
            services._locked_session(session_id)
    (sql,) = [x["sql"] for x in q.captured_queries if " FOR " in x["sql"]]
    return sql


def test_the_session_lock_lets_inserts_that_name_the_session_or_its_org_through(world, client_for):
    org = world["a"].org
    weave(client_for(world["a"].key), "s-lock", end=False)
    s = MemorySession.objects.get(org=org, key="s-lock")
    sql = _lock_sql(s.id)
    assert "FOR NO KEY UPDATE OF" in sql and "teams_organization" not in sql.split(" FOR ")[1], sql
    with psycopg.connect(_conninfo(), autocommit=False) as worker:
        worker.execute(sql)  # the worker's lock, held in its own open transaction
        with psycopg.connect(_conninfo(), autocommit=True) as web:
            web.execute("SET lock_timeout = '2s'")
            # what the request's stamp does: a SessionWork row for the session (FK: KEY SHARE)
            web.execute("INSERT INTO reflection_sessionwork (session_id, org_id, abstracted_upto, facts, "
                        "reflection, reflection_detail, reflection_attempts, bridges, updated_at) "
                        "VALUES (%s, %s, -1, 0, '', '', 0, 0, %s) ON CONFLICT DO NOTHING",
                        [s.id, org.id, timezone.now()])
            # and another session of the org (FK to the org row) is written meanwhile
            web.execute("INSERT INTO memory_memorysession (org_id, owner_agent_id, key, started_at, last_turn_at, "
                        "turn_count, abstraction_status, abstraction_attempts, abstraction_error, "
                        "reflection_status) VALUES (%s, %s, 'other', now(), now(), 0, 'open', 0, '', 'open')",
                        [org.id, world["a"].agent.id])
        worker.rollback()
