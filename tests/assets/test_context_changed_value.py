"""A value that changed: "Budget for paid ads in Q1 is 40k EUR", then a week later "Correction: Q1
paid ads budget is cut to 25k EUR after the finance review". The rules found no conflict (too few
shared words for the same-statement rule) and the context listed the old value first; an agent
answered 40k. The change is now a conflict, and the context lists the newer side first, the older
one tagged as disputed by it."""

from __future__ import annotations

import pytest

from reflection import conflicts
from reflection.models import Conflict

from .helpers import weave

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

OLD = "Budget for paid ads in Q1 is 40k EUR."
NEW = "Correction: Q1 paid ads budget is cut to 25k EUR after the finance review."
CHATTER = ["Launch of the spring campaign is planned for March 3.", "Weekly reports go out on Friday afternoon.",
           "The landing page copy is reviewed by Dana.", "Ad creatives are due two weeks before launch."]


def _recall(client, query):
    r = client.post("/api/v1/context", {"query": query, "k": 6, "reinforce": False}, format="json")
    assert r.status_code == 200, r.content
    return r.json()


@pytest.mark.parametrize("query", ["What is the Q1 paid ads budget?", "How much money do we have for paid ads?"])
def test_the_correction_is_a_conflict_and_is_read_first(world, client_for, settings, query):
    settings.NYLON_LLM_URL = ""  # the rules decide
    a = world["a"]
    bob = client_for(a.member)
    old = weave(bob, OLD, visibility="org", session="growth-1", speaker="bob", occurred_at="2026-11-03T11:00:00Z")
    for i, text in enumerate(CHATTER):
        weave(bob, text, visibility="org", session="growth-1", speaker="bob", occurred_at=f"2026-11-03T11:0{i + 1}:00Z")
    new = weave(bob, NEW, visibility="org", session="growth-2", speaker="bob", occurred_at="2026-11-10T11:00:00Z")
    conflicts.detect(org_id=a.org.id, node_ids=[new])
    c = Conflict.objects.get(node_a_id=old, node_b_id=new)
    assert c.status == Conflict.Status.OPEN and "40k vs 25k" in c.reason

    body = _recall(client_for(a.key), query)
    ids = [r["node_id"] for r in body["recall"]]
    assert new in ids and old in ids and ids.index(new) < ids.index(old), body["recall"]
    shown = {r["node_id"]: r for r in body["recall"]}
    assert [d["node_id"] for d in shown[old]["disputed_by"]] == [new]
    assert f"disputed by memory {new}" in body["dynamic"]
    scores = [r["score"] for r in body["recall"]]
    assert scores == sorted(scores, reverse=True)


def test_the_newer_side_is_told_by_time_not_by_the_text_of_its_time():
    """Times are compared as times: "…T11:00:00Z" (no fraction written) came after "…T11:00:00.5Z"."""
    from types import SimpleNamespace

    from assets.context import Recalled, _newer_side_first

    def item(nid, at, rival, rival_at):
        return Recalled(hit=SimpleNamespace(node_id=nid, score=1.0, text=str(nid)), occurred_at=at,
                        disputed_by=[{"node_id": rival, "occurred_at": rival_at}])

    whole, half = "2026-11-10T11:00:00Z", "2026-11-10T11:00:00.500000Z"
    older, newer = item(1, whole, 2, half), item(2, half, 1, whole)
    assert [it.node_id for it in _newer_side_first([older, newer])] == [2, 1]
    assert [it.node_id for it in _newer_side_first([newer, older])] == [2, 1]
