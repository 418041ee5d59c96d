"""A fact's drawer names each source once: its source is also linked by a derived edge, and the
drawer listed it twice ("from #24 …" and "derived from #24 …")."""

from __future__ import annotations

import pytest
from django.test import Client

from memory.models import Edge, Node
from reflection import services
from tests.reflection.helpers import session, weave

pytestmark = pytest.mark.django_db


def test_a_facts_source_is_listed_once(world, client_for):
    a = world["a"]
    turn = {"speaker": "carol", "text": "The data migration is scheduled for December 14th.",
            "occurred_at": "2026-12-01T09:00:00Z"}
    leaf = weave(client_for(a.key), "mig", turns=[turn], visibility="org")["node_ids"][0]
    services.abstract_session(session_id=session(a.org, "mig").id)
    fact = Node.objects.get(org=a.org, kind="fact")
    assert fact.source_node_ids == [leaf] and Edge.objects.filter(src_id=leaf, dst_id=fact.id).exists()  # premise
    c = Client()
    c.force_login(a.owner)
    html = c.get(f"/console/memories/{fact.id}/").content.decode()
    block = html[html.index("Lineage</h3>"):html.index("<h3>Versions")]
    assert block.count(f">#{leaf}</a>") == 1 and "derived from" not in block, block
