"""Without an LLM a conflict is often found between two facts, each a turn restated ("the Pro plan
goes from $29 to $35" / "finance wants the Pro plan at $39"). The context shows a fact beside its
turn as that turn (``folded``), and the conflict went with the fact: both turns were listed unmarked,
the older value first (a retrieval audit: "Are we still using Postgres for the billing service?"
listed the old decision three lines above its change). A turn now carries the disputes of the facts
folded into it, a side folded into another shown turn named as that turn, the newer read first."""

from __future__ import annotations

import pytest

from memory.models import MemorySession, Node, NodeKind
from reflection.models import Conflict
from reflection.services import abstract_session

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

OLD = "We decided the Pro plan price is 35 dollars per seat."
NEW = "We decided the Pro plan price is 39 dollars per seat, finance asked."


def _session(client, org, key: str, text: str, at: str) -> tuple[int, int]:
    r = client.post("/api/v1/memories/weave-session", {"session_key": key, "visibility": "org", "turns": [
        {"speaker": "dana", "text": text, "occurred_at": at},
        {"speaker": "eli", "text": "Sounds good.", "occurred_at": at.replace(":00:00Z", ":01:00Z")},
    ]}, format="json")
    assert r.status_code == 201, r.content
    leaf = r.json()["node_ids"][0]
    abstract_session(session_id=MemorySession.objects.get(org=org, key=key).id)
    fact = Node.objects.get(org=org, kind=NodeKind.FACT, source_node_ids=[leaf])
    return leaf, fact.id


def test_a_conflict_of_two_facts_marks_their_turns_and_reads_the_newer_first(world, client_for):
    a = world["a"]
    c = client_for(a.key)
    old_leaf, old_fact = _session(c, a.org, "pricing-1", OLD, "2026-11-06T10:00:00Z")
    new_leaf, new_fact = _session(c, a.org, "pricing-2", NEW, "2026-11-16T10:00:00Z")
    # the conflict as the rules found it in the audit: between the facts, not their turns
    Conflict.objects.filter(org=a.org).delete()
    Conflict.objects.create(org=a.org, node_a_id=min(old_fact, new_fact), node_b_id=max(old_fact, new_fact),
                            reason="different number: 35 vs 39", detector="rule")

    r = c.post("/api/v1/context", {"query": "What is the price of the Pro plan?", "k": 4, "reinforce": False},
               format="json")
    assert r.status_code == 200, r.content
    recall = r.json()["recall"]
    shown = {x["node_id"]: x for x in recall}
    assert {old_leaf, new_leaf} <= set(shown) and not {old_fact, new_fact} & set(shown), recall  # folded
    ids = [x["node_id"] for x in recall]
    assert ids.index(new_leaf) < ids.index(old_leaf), recall
    assert [d["node_id"] for d in shown[old_leaf]["disputed_by"]] == [new_leaf]
    assert [d["node_id"] for d in shown[new_leaf]["disputed_by"]] == [old_leaf]
    assert f"disputed by memory {new_leaf}" in r.json()["dynamic"]


def test_a_disputing_fact_not_shown_is_named_as_itself():
    """The other side recalled nowhere (another reader's turn): the fact itself is the one named."""
    from types import SimpleNamespace

    from assets.context import Recalled, _attach_disputes

    def item(nid, folded, at):
        return Recalled(hit=SimpleNamespace(node_id=nid, score=1.0, text=str(nid)), occurred_at=at, folded=folded)

    turn = item(1, [2], "2026-11-06T10:00:00Z")
    _attach_disputes([turn], {2: [{"node_id": 9, "occurred_at": "2026-11-16T10:00:00Z"}]})
    assert turn.disputed_by == [{"node_id": 9, "occurred_at": "2026-11-16T10:00:00Z"}]
