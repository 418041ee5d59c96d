"""abstraction_attempts counts the consecutive failures of the work still owed: a long-lived
session that was abstracted many times keeps its retry budget, and at the last attempt its turns get
the heuristic facts (visibly) instead of staying FAILED with none."""

from __future__ import annotations

import pytest

from memory.models import Node
from reflection import llm as L
from reflection import services

from .helpers import session, weave

pytestmark = pytest.mark.django_db


def turn(i: int) -> list[dict]:
    return [{"speaker": "Ana", "text": f"I decided we will run load test number {i} on day {i}.",
             "occurred_at": f"2023-05-{10 + i:02d}T10:00:00Z"}]


def test_a_long_lived_session_is_retried_after_one_failure(world, client_for, llm, settings):
    server = llm.need_script()
    settings.NYLON_ABSTRACTION_MAX_ATTEMPTS = 3
    settings.NYLON_ABSTRACTION_RETRY_SECS = 0
    c = client_for(world["a"].key)
    for i in range(5):  # more successful rounds than the attempt budget
        weave(c, "long", turns=turn(i))
        assert services.abstract_session(session_id=session(world["a"].org, "long").id)["facts"] == 1
    s = session(world["a"].org, "long")
    assert s.abstraction_attempts == 0
    weave(c, "long", turns=turn(5))
    server.default = 500
    assert services.abstract_session(session_id=s.id)["status"] == "failed"
    s.refresh_from_db()
    assert s.abstraction_status == "failed" and s.abstraction_attempts == 1
    server.default = "json"
    assert s.id in services.tick()["abstract"]  # before: 6 attempts >= 3, never re-sent
    out = services.abstract_session(session_id=s.id)
    assert out["facts"] == 1 and out["source"] == "llm"
    s.refresh_from_db()
    assert s.abstraction_status == "done" and s.abstraction_attempts == 0 and s.abstraction_error == ""
    assert Node.objects.filter(kind="fact", source_kind="llm").count() == 6


def test_at_the_last_attempt_the_heuristic_facts_are_written_visibly(world, client_for, llm, settings):
    server = llm.need_script()
    settings.NYLON_ABSTRACTION_MAX_ATTEMPTS = 2
    settings.NYLON_ABSTRACTION_RETRY_SECS = 0
    c = client_for(world["a"].key)
    weave(c, "s1")
    s = session(world["a"].org, "s1")
    server.default = 503
    assert services.abstract_session(session_id=s.id)["status"] == "failed"
    assert s.id in services.tick()["abstract"]
    out = services.abstract_session(session_id=s.id)
    assert out == {"status": "done", "facts": 3, "source": "heuristic", "fallback": 3}
    s.refresh_from_db()
    assert s.abstraction_status == "done" and s.abstraction_attempts == 0
    assert "llm server_error: gave up after 2 attempts" in s.abstraction_error
    assert Node.objects.filter(kind="fact", source_kind="heuristic").count() == 3
    assert s.id not in services.tick()["abstract"]
    server.default = "json"
    L.probe()
    body = c.get("/api/v1/background/status").json()
    assert body["failed"] == [] and body["fallback"] == [{"session_key": "s1", "detail": s.abstraction_error}]
    assert body["llm"]["status"] == "degraded" and body["llm"]["degraded_tasks"] == ["abstract"]
    assert "gave up after 2 attempts" in body["llm"]["detail"]

    weave(c, "s1", turns=turn(1))  # the next round is the LLM's again, with a fresh budget
    s.refresh_from_db()
    out = services.abstract_session(session_id=s.id)
    assert out["facts"] == 1 and out["source"] == "llm"
    body = c.get("/api/v1/background/status").json()
    assert body["fallback"] == [] and body["llm"]["status"] == "ok"
