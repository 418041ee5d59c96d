from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import Edge, MemorySession, Node
from reflection import hooks, llm, services
from reflection.models import SessionWork

from .helpers import session, weave

pytestmark = pytest.mark.django_db


def test_end_session_enqueues_abstraction_after_commit(world, client_for, monkeypatch,
                                                      django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr(hooks, "_send", lambda task, *args: sent.append((task.name, args)))
    with django_capture_on_commit_callbacks(execute=True):
        weave(client_for(world["a"].key), "s1")
    s = session(world["a"].org, "s1")
    assert s.ended_at is not None and s.abstraction_status == MemorySession.Status.PENDING
    assert ("reflection.abstract_session", (s.id,)) in sent
    assert any(name == "reflection.detect_conflicts" for name, _ in sent)


def test_heuristic_abstraction_writes_linked_facts_once(world, client_for, no_llm):
    out = weave(client_for(world["a"].key), "s1")
    s = session(world["a"].org, "s1")
    result = services.abstract_session(session_id=s.id)
    assert result == {"status": "done", "facts": 3, "source": "heuristic"}
    facts = list(Node.objects.filter(org=world["a"].org, kind="fact").order_by("seq"))
    assert [f.text for f in facts] == [
        "Ana went to a pottery class yesterday (on 7 May 2023).",
        "Ana decided to sign up for the spring course.",
        "Ben eats spicy food every day.",
    ]
    leaf_ids = out["node_ids"]
    for f in facts:
        assert f.source_kind == "heuristic" and f.owner_agent_id == world["a"].agent.id
        assert f.visibility == "private" and f.embedded and len(f.source_node_ids) == 1
        assert Edge.objects.filter(src_id=f.source_node_ids[0], dst=f, kind="derived").exists()
    assert Node.objects.filter(id__in=leaf_ids, kind="leaf").count() == 4  # leaves are never replaced
    s.refresh_from_db()
    assert s.abstraction_status == "done" and s.abstraction_attempts == 0  # counts failures only
    # redelivery of the same task does nothing twice
    assert services.abstract_session(session_id=s.id)["noop"] is True
    MemorySession.objects.filter(pk=s.pk).update(abstraction_status="pending")  # even if re-marked
    assert services.abstract_session(session_id=s.id)["noop"] is True
    assert MemorySession.objects.get(pk=s.pk).abstraction_status == "done"
    assert Node.objects.filter(kind="fact").count() == 3


def test_facts_keep_the_scope_of_their_leaves(world, client_for, no_llm):
    weave(client_for(world["a"].key), "t1", visibility="team")
    services.abstract_session(session_id=session(world["a"].org, "t1").id)
    facts = Node.objects.filter(kind="fact")
    assert facts and all(f.visibility == "team" and f.team_id == world["a"].team.id for f in facts)


@pytest.mark.parametrize("hidden", ["private", "team"])
def test_llm_fact_is_no_wider_than_any_turn_it_was_shown(world, client_for, llm, hidden):
    """The LLM sees a hidden turn and an org turn together and cites only the org one: its
    citation is a claim, so the fact keeps the hidden turn's scope."""
    server = llm.need_script()
    a = world["a"]
    c = client_for(a.key)
    weave(c, "mixed", end=False, visibility=hidden, team_id=a.team.id if hidden == "team" else None,
          turns=[{"speaker": "Ana", "text": "My salary is 91k and I plan to resign in June.",
                  "occurred_at": "2023-05-08T10:00:00Z"}])
    weave(c, "mixed", visibility="org",
          turns=[{"speaker": "Ana", "text": "Let's meet on Friday.", "occurred_at": "2023-05-08T10:01:00Z"}])
    s = session(a.org, "mixed")
    server.push(("json", {"facts": [{"text": "Ana earns 91k and plans to resign in June.", "source_turns": [1]}]}))
    assert services.abstract_session(session_id=s.id)["facts"] == 1
    fact = Node.objects.get(kind="fact")
    org_turn = Node.objects.get(kind="leaf", visibility="org")
    assert fact.source_node_ids == [org_turn.id]  # the citation is kept as lineage …
    assert fact.visibility == hidden  # … but does not widen the fact
    assert fact.team_id == (a.team.id if hidden == "team" else None)


def test_continued_session_abstracts_only_new_leaves(world, client_for, no_llm):
    c = client_for(world["a"].key)
    weave(c, "s1")
    s = session(world["a"].org, "s1")
    services.abstract_session(session_id=s.id)
    weave(c, "s1", turns=[{"speaker": "Ana", "text": "I bought a kiln today.", "occurred_at": "2023-05-09T09:00:00Z"}])
    assert services.abstract_session(session_id=s.id)["facts"] == 1
    assert Node.objects.filter(kind="fact").count() == 4
    assert SessionWork.objects.get(session=s).abstracted_upto == 4


def test_llm_abstraction(world, client_for, llm):
    weave(client_for(world["a"].key), "s1")
    s = session(world["a"].org, "s1")
    result = services.abstract_session(session_id=s.id)
    assert result["status"] == "done" and result["source"] == "llm" and result["facts"] >= 1
    for f in Node.objects.filter(kind="fact"):
        assert f.source_kind == "llm" and f.source_node_ids
        assert Edge.objects.filter(dst=f, kind="derived").count() == len(f.source_node_ids)
    if llm.scripted:
        assert result["facts"] == 4
        assert Node.objects.filter(kind="fact", text__startswith="Ana said that I went").exists()


@pytest.mark.parametrize("outage", [402, 401, 429, "truncated", ("slow", 1.5)])
def test_llm_failure_marks_the_session_failed_and_the_beat_retries_it(world, client_for, llm, settings, outage):
    server = llm.need_script()
    settings.NYLON_ABSTRACTION_RETRY_SECS = 0
    weave(client_for(world["a"].key), "s1")
    s = session(world["a"].org, "s1")
    server.default = (429, 1) if outage == 429 else outage
    assert services.abstract_session(session_id=s.id)["status"] == "failed"
    s.refresh_from_db()
    assert s.abstraction_status == "failed" and s.abstraction_attempts == 1 and "llm " in s.abstraction_error
    assert Node.objects.filter(kind="fact").count() == 0  # nothing written …
    assert llm_state_status() == "degraded"  # … and it shows
    server.default = "json"
    tick = services.tick()
    assert s.id in tick["abstract"]
    assert services.abstract_session(session_id=s.id)["facts"] == 4
    s.refresh_from_db()
    assert s.abstraction_status == "done" and s.abstraction_error == ""
    assert llm_state_status() == "ok"


def llm_state_status() -> str:
    return llm.llm_state()["status"]


def test_tick_ends_idle_sessions(world, client_for, settings):
    settings.NYLON_SESSION_IDLE_SECS = 1800
    weave(client_for(world["a"].key), "old", end=False)
    weave(client_for(world["a"].key), "fresh", end=False,
          turns=[{"speaker": "Ana", "text": "Hello there.", "occurred_at": timezone.now().isoformat()}])
    old = session(world["a"].org, "old")
    past = timezone.now() - timedelta(hours=2)
    Node.objects.filter(session_key="old").update(created_at=past)
    out = services.tick()
    assert out["ended"] == [old.id] and old.id in out["abstract"]
    old.refresh_from_db()
    assert old.ended_at is not None and old.abstraction_status == "pending"
    assert session(world["a"].org, "fresh").ended_at is None
    # the retry clock: not re-enqueued before NYLON_ABSTRACTION_RETRY_SECS
    assert old.id not in services.tick()["abstract"]


def test_status_api_shows_failures(world, client_for, llm):
    server = llm.need_script()
    c = client_for(world["a"].key)
    weave(c, "s1")
    server.default = 402
    services.abstract_session(session_id=session(world["a"].org, "s1").id)
    body = c.get("/api/v1/background/status").json()
    assert body["llm"]["status"] == "degraded" and body["llm"]["last_error"] == "out_of_credit"
    assert body["sessions"]["abstraction"] == {"failed": 1}
    assert body["failed"][0]["session_key"] == "s1" and "out_of_credit" in body["failed"][0]["error"]
    # another org sees none of it
    assert client_for(world["b"].key).get("/api/v1/background/status").json()["failed"] == []


def test_turns_after_abstraction_reopen_the_session_for_the_idle_tick(world, client_for, no_llm, settings):
    settings.NYLON_SESSION_IDLE_SECS = 1800
    c = client_for(world["a"].key)
    weave(c, "s1")
    s = session(world["a"].org, "s1")
    services.abstract_session(session_id=s.id)
    s.refresh_from_db()
    assert s.abstraction_status == "done"
    weave(c, "s1", end=False,
          turns=[{"speaker": "Ana", "text": "I bought a kiln today.", "occurred_at": "2023-05-09T09:00:00Z"}])
    s.refresh_from_db()
    assert s.ended_at is None and s.abstraction_status == "open"
    out = services.tick(now=timezone.now() + timedelta(hours=2))
    assert s.id in out["ended"] and s.id in out["abstract"]
    assert services.abstract_session(session_id=s.id)["facts"] == 1  # only the new leaf
    assert Node.objects.filter(org=world["a"].org, kind="fact").count() == 4
