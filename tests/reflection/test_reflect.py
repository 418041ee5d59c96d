from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import Edge, Node
from reflection import services
from reflection.models import SessionWork

from .helpers import session, weave

pytestmark = pytest.mark.django_db

SPICY = [{"speaker": "Ana", "text": "I eat very spicy food every day.", "occurred_at": "2023-05-08T10:00:00Z"},
         {"speaker": "Ana", "text": "I have had heartburn twice this week.", "occurred_at": "2023-05-08T10:01:00Z"}]


def abstracted(world, client_for, key="s1"):
    weave(client_for(world["a"].key), key, turns=SPICY)
    s = session(world["a"].org, key)
    services.abstract_session(session_id=s.id)
    Node.objects.filter(kind="leaf").update(created_at=timezone.now() - timedelta(hours=1))
    return s


def test_without_llm_reflection_is_skipped_visibly(world, client_for, no_llm, settings):
    settings.NYLON_REFLECT_IDLE_SECS = 600
    s = abstracted(world, client_for)
    assert services.tick()["reflect"] == []
    work = SessionWork.objects.get(session=s)
    assert work.reflection == "skipped" and work.reflection_detail == "skipped: no LLM"
    body = client_for(world["a"].key).get("/api/v1/background/status").json()
    assert body["reflection"] == [{"session_key": "s1", "status": "skipped", "detail": "skipped: no LLM"}]
    assert services.reflect_session(session_id=s.id)["status"] == "skipped"
    assert not Node.objects.filter(kind="bridge").exists()


def test_not_reflected_while_the_owner_is_active(world, client_for, no_llm, settings):
    weave(client_for(world["a"].key), "s1", turns=SPICY)
    services.abstract_session(session_id=session(world["a"].org, "s1").id)
    assert services.tick()["reflect"] == [] and not SessionWork.objects.filter(reflection="skipped").exists()


def test_llm_reflection_writes_deduplicated_bridges(world, client_for, llm, settings):
    settings.NYLON_ABSTRACTION_RETRY_SECS = 0
    s = abstracted(world, client_for)
    assert services.tick()["reflect"] == [s.id]
    s.refresh_from_db()
    assert s.reflection_status == "pending"
    out = services.reflect_session(session_id=s.id)
    assert out["status"] == "done" and 1 <= out["bridges"] <= 3
    bridges = list(Node.objects.filter(kind="bridge"))
    for b in bridges:
        assert (b.confidence, b.t0, b.lam) == (0.6, 0.6, 0.01) and b.source_kind == "reflection"
        assert b.owner_agent_id == world["a"].agent.id and b.visibility == "private"
        edges = Edge.objects.filter(dst=b, kind="bridge")
        assert edges and all(e.weight == 0.8 and e.src.kind == "fact" for e in edges)
        assert len(b.text.split()) >= 6  # vacuous bridges filtered
    s.refresh_from_db()
    assert s.reflection_status == "done"
    assert services.reflect_session(session_id=s.id)["noop"] is True  # idempotent
    if llm.scripted:
        assert [b.text for b in bridges] == [
            "Eating very spicy food regularly can cause heartburn in some people."]
        s2 = abstracted(world, client_for, "s2")  # the same bridge again is deduplicated
        assert services.reflect_session(session_id=s2.id)["bridges"] == 0
        assert Node.objects.filter(kind="bridge").count() == 1


def test_bridge_is_no_wider_than_any_fact_the_llm_was_shown(world, client_for, llm):
    """Reflection shows the LLM all of a session's facts: a bridge citing only the org fact may
    still restate the private one, so it is private."""
    server = llm.need_script()
    c = client_for(world["a"].key)
    weave(c, "s1", visibility="private", turns=SPICY[1:])  # abstracted alone: a private fact …
    s = session(world["a"].org, "s1")
    services.abstract_session(session_id=s.id)
    weave(c, "s1", visibility="org", turns=[{**SPICY[0], "occurred_at": "2023-05-08T10:02:00Z"}])
    services.abstract_session(session_id=s.id)  # … and, in a chunk of its own, an org fact
    org_fact = Node.objects.get(kind="fact", visibility="org")
    assert Node.objects.filter(kind="fact", visibility="private").count() == 1
    server.push(("json", {"bridges": [{"text": "Frequent heartburn can be a sign of acid reflux disease.",
                                       "fact_ids": [org_fact.id]}]}))
    assert services.reflect_session(session_id=s.id)["bridges"] == 1
    bridge = Node.objects.get(kind="bridge")
    assert bridge.source_node_ids == [org_fact.id] and bridge.visibility == "private"


def test_reflection_failure_is_retried(world, client_for, llm, settings):
    server = llm.need_script()
    settings.NYLON_ABSTRACTION_RETRY_SECS = 0
    s = abstracted(world, client_for)
    server.default = 402
    assert services.reflect_session(session_id=s.id)["status"] == "failed"
    s.refresh_from_db()
    assert s.reflection_status == "failed"
    assert "out_of_credit" in SessionWork.objects.get(session=s).reflection_detail
    server.default = "json"
    assert s.id in services.tick()["reflect"]
    assert services.reflect_session(session_id=s.id)["bridges"] == 1


def test_vacuous():
    assert services.is_vacuous("People have preferences.")
    assert services.is_vacuous("Things change.")
    assert not services.is_vacuous("Pottery kilns reach temperatures above 1000 degrees Celsius.")


def test_reflection_gives_up_after_the_attempt_cap(world, client_for, llm, settings):
    server = llm.need_script()
    settings.NYLON_ABSTRACTION_RETRY_SECS = 0
    settings.NYLON_ABSTRACTION_MAX_ATTEMPTS = 2
    s = abstracted(world, client_for)
    server.default = 402
    assert services.reflect_session(session_id=s.id)["status"] == "failed"
    assert s.id in services.tick()["reflect"]  # one retry left
    assert services.reflect_session(session_id=s.id)["status"] == "failed"
    assert s.id not in services.tick()["reflect"]  # capped: no endless paid retries
    assert SessionWork.objects.get(session=s).reflection_attempts == 2
