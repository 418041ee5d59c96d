"""What one write costs the worker must not grow with the org or with the write.

A conflict check sent two candidate queries per node (each re-reading the org's 20,000 most recent
index entries for its window) and one existence query per candidate pair; the beat's tick found
"the owner wrote since" with a scan of every node of every org; and a reflection skipped for want of
an LLM stayed open, so every later tick considered it again. Measured on real Postgres: queries
issued, and rows of ``memory_node`` read (``pg_stat_xact_user_tables``, this transaction's own)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.models import MemorySession, Node, NodeKind
from reflection import conflicts, services
from reflection.models import Conflict, SessionWork

from .helpers import weave

pytestmark = pytest.mark.django_db

S = MemorySession.Status
T0 = "2024-11-14T10:00:00Z"
TOPICS = ["billing service", "staging cluster", "onboarding doc", "search index", "on-call rota", "design system",
          "pricing page", "data warehouse", "mobile release", "SLA report"]


def statements(prefix: str, n: int) -> list[dict]:
    return [{"speaker": "Ana", "text": f"{prefix} the {TOPICS[i % len(TOPICS)]} with the platform team.",
             "occurred_at": T0} for i in range(n)]


def queries_of_check(org_id: int, node_ids: list[int]) -> int:
    with CaptureQueriesContext(connection) as q:
        assert conflicts.detect(org_id=org_id, node_ids=node_ids) == 0
    return len(q.captured_queries)


def test_a_conflict_check_costs_the_same_queries_for_two_nodes_or_eight(world, client_for, no_llm):
    a = world["a"]
    team = {"visibility": "team", "team_id": a.team.id}
    c = client_for(a.key)
    # Earlier memory of the writer and of a teammate (the member): both budgets have candidates.
    weave(c, "earlier", turns=statements("We reviewed", 10), end=False, **team)
    weave(client_for(a.member), "member", turns=statements("We documented", 10), end=False, **team)
    two = weave(c, "two", turns=statements("We discussed", 2), end=False, **team)["node_ids"]
    eight = weave(c, "eight", turns=statements("We planned", 8), end=False, **team)["node_ids"]
    assert queries_of_check(a.org.id, two) == queries_of_check(a.org.id, eight)
    assert not Conflict.objects.exists()


def test_candidates_of_a_batch_are_each_nodes_own(world, client_for, no_llm):
    """One statement for the batch gives each node the candidates its own query gave: the owner's
    nearest first, then the shared audience's, each nearest first."""
    a = world["a"]
    team = {"visibility": "team", "team_id": a.team.id}
    weave(client_for(a.member), "member", turns=statements("We documented", 6), end=False, **team)
    ids = weave(client_for(a.key), "mine", turns=statements("We reviewed", 6), end=False, **team)["node_ids"]
    nodes = list(Node.objects.filter(id__in=ids))
    batch = conflicts._candidates_of(nodes)
    for node in nodes:
        alone = conflicts._candidates_of([node])[node.id]
        assert [(o.id, round(s, 6)) for o, s in batch[node.id]] == [(o.id, round(s, 6)) for o, s in alone]
        own = [o for o, _ in alone if o.owner_agent_id == a.agent.id]
        shared = [o for o, _ in alone if o.owner_user_id == a.member.id]
        assert len(own) == conflicts.CANDIDATES and len(shared) == conflicts.CANDIDATES
        assert all(o.kind == node.kind and o.id != node.id for o, _ in alone)
        sims = [s for _, s in alone]
        assert sims[:4] == sorted(sims[:4], reverse=True) and sims[4:] == sorted(sims[4:], reverse=True)


def test_the_window_floor_is_the_orgs_nth_newest_row(world, client_for, no_llm, monkeypatch):
    a, b = world["a"], world["b"]
    monkeypatch.setattr(conflicts, "SHARED_WINDOW_ROWS", 5)

    def floor() -> int:
        with connection.cursor() as cur:
            return conflicts._recent_floor(cur, a.org.id)

    assert floor() == 0  # fewer rows than the window: all of them
    ids = weave(client_for(a.key), "s", turns=statements("We reviewed", 8), end=False)["node_ids"]
    weave(client_for(b.key), "s", turns=statements("We reviewed", 8), end=False)  # another org's, newer
    assert floor() == sorted(ids)[-5]


def node_rows_read() -> int:
    """Rows of memory_node read so far in this transaction, by sequential and index scans."""
    with connection.cursor() as cur:
        cur.execute("""SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables
                       WHERE relname = 'memory_node'""")
        return cur.fetchone()[0]


def leaves(member, key: str, n: int, when) -> None:
    Node.objects.bulk_create([
        Node(org=member.org, owner_agent=member.agent, kind=NodeKind.LEAF, text=f"turn {i}", session_key=key, seq=i,
             occurred_at=when, tension_updated_at=when) for i in range(n)])


def test_the_tick_reads_a_few_rows_of_an_idle_owner_with_many(world, no_llm):
    """An idle session to end and an abstracted one owed reflection, of an owner with 3,000 old
    leaves: deciding that the owner is idle reads its newest leaf, not all of them."""
    a = world["a"]
    past = timezone.now() - timedelta(days=3)
    leaves(a, "idle-open", 1500, past)
    leaves(a, "abstracted", 1500, past)
    Node.objects.filter(org=a.org).update(created_at=past)
    MemorySession.objects.bulk_create([
        MemorySession(org=a.org, owner_agent=a.agent, key="idle-open", started_at=past, last_turn_at=past,
                      turn_count=1500),
        MemorySession(org=a.org, owner_agent=a.agent, key="abstracted", started_at=past, last_turn_at=past,
                      ended_at=past, turn_count=1500, abstraction_status=S.DONE)])
    before = node_rows_read()
    out = services.tick()
    read = node_rows_read() - before
    assert len(out["ended"]) == 1  # both were considered: the open one ended, the other skipped
    assert SessionWork.objects.get(session__key="abstracted").reflection == SessionWork.Reflection.SKIPPED
    assert read < 50, f"the tick read {read} rows of memory_node"


def owed_sessions(member, n: int, prefix: str) -> list[MemorySession]:
    past = timezone.now() - timedelta(days=2)
    return MemorySession.objects.bulk_create([
        MemorySession(org=member.org, owner_agent=member.agent, key=f"{prefix}{i}", started_at=past,
                      last_turn_at=past, ended_at=past, abstraction_status=S.DONE) for i in range(n)])


def test_a_skipped_reflection_is_final_and_leaves_the_ticks_query(world, no_llm):
    a = world["a"]
    made = owed_sessions(a, 3, "s")
    services.tick()
    for s in MemorySession.objects.filter(id__in=[m.id for m in made]):
        assert s.reflection_status == S.DONE
    works = SessionWork.objects.filter(session__in=made)
    assert {(w.reflection, w.reflection_detail, w.reflection_attempts) for w in works} == {
        (SessionWork.Reflection.SKIPPED, "skipped: no LLM", 1)}
    with CaptureQueriesContext(connection) as q:
        assert services.tick() == {"ended": [], "abstract": [], "reflect": []}
    # Nothing owed is left: the org query finds no org, and nothing is marked again.
    assert not any("reflection_sessionwork" in x["sql"] and x["sql"].startswith("UPDATE") for x in q.captured_queries)
    assert {w.reflection_attempts for w in SessionWork.objects.filter(session__in=made)} == {1}
    assert services.reflect_session(session_id=made[0].id)["status"] == "skipped"


def test_sessions_skipped_before_are_closed_without_being_marked_again(world, no_llm):
    """Rows a tick skipped before skipping was final (SKIPPED, but left OPEN) are closed once."""
    a = world["a"]
    made = owed_sessions(a, 2, "old")
    SessionWork.objects.bulk_create([SessionWork(org=a.org, session=s, reflection=SessionWork.Reflection.SKIPPED,
                                                 reflection_detail="skipped: no LLM", reflection_attempts=1)
                                     for s in made])
    services.tick()
    assert set(MemorySession.objects.filter(id__in=[s.id for s in made]).values_list("reflection_status", flat=True)) \
        == {S.DONE}
    assert {w.reflection_attempts for w in SessionWork.objects.filter(session__in=made)} == {1}


def test_new_facts_reopen_a_skipped_session_for_a_round_of_its_own(world, client_for, no_llm, settings):
    settings.NYLON_REFLECT_IDLE_SECS = 600
    a = world["a"]
    turns = [{"speaker": "Ana", "text": "I moved the billing service to the new region.", "occurred_at": T0}]
    weave(client_for(a.key), "s1", turns=turns)
    s = MemorySession.objects.get(org=a.org, key="s1")
    services.abstract_session(session_id=s.id)
    Node.objects.filter(org=a.org).update(created_at=timezone.now() - timedelta(hours=1))
    services.tick()
    assert MemorySession.objects.get(pk=s.pk).reflection_status == S.DONE
    more = [{"speaker": "Ana", "text": "I deployed the search index to production.", "occurred_at": T0}]
    weave(client_for(a.key), "s1", turns=more)
    services.abstract_session(session_id=s.id)
    assert MemorySession.objects.get(pk=s.pk).reflection_status == S.OPEN  # a new round is owed
    Node.objects.filter(org=a.org).update(created_at=timezone.now() - timedelta(hours=1))
    services.tick()
    assert MemorySession.objects.get(pk=s.pk).reflection_status == S.DONE
    work = SessionWork.objects.get(session=s)
    assert (work.reflection, work.reflection_attempts) == (SessionWork.Reflection.SKIPPED, 1)  # reset per round
