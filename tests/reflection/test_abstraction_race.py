"""Two abstraction deliveries of one session that read different leaves write each fact once."""

from __future__ import annotations

import pytest

from memory.models import Edge, Node
from reflection import services
from reflection.models import SessionWork

from .helpers import session, weave

pytestmark = pytest.mark.django_db


def test_a_delivery_that_read_more_leaves_writes_only_the_new_facts(world, client_for, no_llm):
    weave(client_for(world["a"].key), "s1")
    s = session(world["a"].org, "s1")
    leaves = services._session_leaves(s)
    # Delivery A read the session when it had its first two turns; delivery B read all of them.
    # A commits first; B, which computed its drafts before A's commit, must not write A's again.
    a_drafts = services._heuristic_facts(leaves[:2])
    b_drafts = services._heuristic_facts(leaves)
    assert a_drafts and len(b_drafts) > len(a_drafts)
    services._write_facts(session_id=s.id, drafts=a_drafts, vectors=None, source="heuristic",
                          upto=leaves[1].seq)
    s.refresh_from_db()
    s.abstraction_status = "pending"  # new turns reopened it
    s.save(update_fields=["abstraction_status"])
    out = services._write_facts(session_id=s.id, drafts=b_drafts, vectors=None, source="heuristic",
                                upto=leaves[-1].seq)
    assert out["facts"] == len(b_drafts) - len(a_drafts)
    texts = list(Node.objects.filter(kind="fact").values_list("text", flat=True))
    assert sorted(texts) == sorted(d.text for d in b_drafts)  # each fact once
    for f in Node.objects.filter(kind="fact"):
        assert list(Edge.objects.filter(dst=f, kind="derived").values_list("src_id", flat=True)) == f.source_node_ids
    assert SessionWork.objects.get(session_id=s.id).abstracted_upto == leaves[-1].seq
