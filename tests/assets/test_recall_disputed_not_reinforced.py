"""Recall reinforces what it returns (mentions raise tension), so a stale statement recalled beside
its correction kept gaining: "the ads budget is 40k", recalled 19 times, reached tension 2.0 and
outranked "we cut the ads budget to 25k" (1.4), though an open conflict already named it the older
side. While a memory is the older side of an open conflict its recalls do not reinforce it (the
flush of the recall marks skips it); once the conflict is closed they count again."""

from __future__ import annotations

import pytest
from django.db import connection

from memory.models import Node, RecallMark
from memory.services import flush_recalls
from reflection import conflicts
from reflection.models import Conflict

from .helpers import weave

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

OLD = "Budget for paid ads in Q1 is 40k EUR."
NEW = "Correction: Q1 paid ads budget is cut to 25k EUR after the finance review."
QUERY = "What is the Q1 paid ads budget?"


def _resonate(client, query=QUERY, *, hits: bool = False):
    r = client.post("/api/v1/memories/resonate", {"query": query, "k": 5}, format="json")
    assert r.status_code == 200, r.content
    return r.json()["hits"] if hits else [h["node_id"] for h in r.json()["hits"]]


def _silk(node_id: int) -> tuple:
    n = Node.objects.get(pk=node_id)
    return n.mentions, n.tension_updated_at, n.last_recalled_at


def _pair(world, client_for, settings, *, old_first: bool = True) -> tuple[int, int]:
    settings.NYLON_LLM_URL = ""  # the rules decide
    bob = client_for(world["a"].member)
    writes = [("old", OLD, "2026-11-03T11:00:00Z"), ("new", NEW, "2026-11-10T11:00:00Z")]
    ids = {}
    for name, text, at in writes if old_first else writes[::-1]:
        ids[name] = weave(bob, text, visibility="org", session=f"growth-{name}", speaker="bob", occurred_at=at)
    conflicts.detect(org_id=world["a"].org.id, node_ids=[max(ids.values())])
    c = Conflict.objects.get(node_a_id=min(ids.values()), node_b_id=max(ids.values()))
    assert c.status == Conflict.Status.OPEN
    return ids["old"], ids["new"]


@pytest.mark.parametrize("old_first", [True, False])  # the older side by occurred_at, whichever id it has
def test_the_older_side_of_an_open_conflict_is_not_reinforced(world, client_for, settings, old_first):
    old, new = _pair(world, client_for, settings, old_first=old_first)
    agent = client_for(world["a"].key)
    # Their decay clocks a week back (a test's transaction gives every statement one now()).
    Node.objects.filter(pk__in=[old, new]).update(tension_updated_at="2026-11-10T12:00:00Z")
    before_old, before_new = _silk(old), _silk(new)
    for _ in range(12):
        ids = _resonate(agent)
        assert old in ids and new in ids
    assert RecallMark.objects.filter(node_id=old).count() == 12
    out = flush_recalls()
    assert out.disputed == 1 and out.nodes == 2
    m_old, t_old, r_old = _silk(old)
    m_new, t_new, r_new = _silk(new)
    assert (m_old, t_old) == before_old[:2]  # neither counted nor its decay clock restarted
    assert r_old is not None and r_old == r_new  # it was recalled, and says so
    assert m_new == before_new[0] + 12 and t_new > before_new[1]
    assert not RecallMark.objects.exists()  # the marks are consumed either way
    tension = {h["node_id"]: h["explanation"]["parts"]["tension"] for h in _resonate(agent, hits=True)}
    assert tension[new] > tension[old], tension  # the correction gained, the stale statement did not


def test_a_closed_conflict_lets_recall_count_again(world, client_for, settings):
    old, new = _pair(world, client_for, settings)
    agent = client_for(world["a"].key)
    Conflict.objects.filter(node_a_id=min(old, new)).update(status=Conflict.Status.KEPT_BOTH)
    _resonate(agent)
    assert flush_recalls().disputed == 0
    assert _silk(old)[0] == 1 and _silk(new)[0] == 1


def test_a_deleted_correction_disputes_nothing(world, client_for, settings):
    """The newer side deleted (a mistake): the conflict stays open, but the queue hides a conflict with
    a deleted side, so nobody could close it; the older memory's recalls count again meanwhile."""
    from memory.models import Node as NodeModel

    old, new = _pair(world, client_for, settings)
    NodeModel.objects.filter(pk=new).update(deleted_at="2026-11-20T12:00:00Z")
    _resonate(client_for(world["a"].key))
    assert flush_recalls().disputed == 0 and _silk(old)[0] == 1


def test_the_flush_stays_one_statement_per_chunk(world, client_for, settings):
    from django.test.utils import CaptureQueriesContext

    old, new = _pair(world, client_for, settings)
    agent = client_for(world["a"].key)
    for query in (QUERY, "How much is the ads budget?", "paid ads"):
        _resonate(agent, query)
    with CaptureQueriesContext(connection) as ctx:
        out = flush_recalls(chunk=4)
    assert out.disputed >= 1
    statements = [q["sql"] for q in ctx.captured_queries if "memory_recallmark" in q["sql"]]
    # one per chunk of 4 marks (the last one short), whatever the number of disputed nodes
    assert len(statements) == out.marks // 4 + 1
