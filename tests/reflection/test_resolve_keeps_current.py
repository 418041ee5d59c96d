"""Resolving a conflict by keeping a memory another resolution already superseded was accepted:
it superseded the current statement with one retrieval no longer serves, leaving neither (the
first-user audit resolved conflict 3 keeping 32, then conflict 2 keeping 11, which 3 had replaced)."""

from __future__ import annotations

import pytest

from memory.models import Node
from reflection import conflicts
from reflection.models import Conflict

from .helpers import weave

pytestmark = pytest.mark.django_db


def _turn(text: str, day: int) -> list[dict]:
    return [{"speaker": "Cara", "text": text, "occurred_at": f"2026-11-{day:02d}T10:00:00Z"}]


def test_keeping_a_superseded_memory_is_refused(world, client_for, no_llm):
    a = world["a"]
    c = client_for(a.key)
    first = weave(c, "s1", turns=_turn("The architecture review is on 12 November.", 2), end=False)["node_ids"][0]
    second = weave(c, "s2", turns=_turn("The architecture review moves to 13 November.", 9), end=False)["node_ids"][0]
    third = weave(c, "s3", turns=_turn("The architecture review moves to 16 November.", 11), end=False)["node_ids"][0]
    conflicts.detect(org_id=a.org.id, node_ids=[second, third])
    pairs = {(x.node_a_id, x.node_b_id): x for x in Conflict.objects.all()}
    assert (second, third) in pairs and (first, second) in pairs, pairs

    r = c.post(f"/api/v1/conflicts/{pairs[(second, third)].id}/resolve", {"action": "supersede", "keep": third},
               format="json")
    assert r.status_code == 200, r.content
    r = c.post(f"/api/v1/conflicts/{pairs[(first, second)].id}/resolve", {"action": "supersede", "keep": second},
               format="json")
    assert r.status_code == 400 and "itself superseded" in r.content.decode()
    assert Node.objects.get(pk=first).valid_to is None  # nothing written
    assert Conflict.objects.get(pk=pairs[(first, second)].id).status == "open"
    # keeping the other side is fine
    r = c.post(f"/api/v1/conflicts/{pairs[(first, second)].id}/resolve", {"action": "supersede", "keep": first},
               format="json")
    assert r.status_code == 200, r.content


@pytest.mark.parametrize("keep_newer", [True, False])
def test_a_superseded_memory_is_valid_until_the_kept_one_was_said(world, client_for, no_llm, keep_newer):
    """valid_to was the time of the resolution: "Postgres 15" replaced on 24 Nov and resolved on 2 Dec
    showed "valid 10 Nov → 2 Dec" in governance. It is when the kept statement was made; keeping the
    older side, the newer one never held (its validity ends where it began)."""
    a = world["a"]
    c = client_for(a.key)
    old = weave(c, "s1", turns=_turn("The billing service runs PostgreSQL 15.", 10), end=False)["node_ids"][0]
    new = weave(c, "s2", turns=_turn("We migrated the billing service to PostgreSQL 16.", 24),
                end=False)["node_ids"][0]
    # the derived fact of the old statement goes with it
    fact = Node.objects.create(org=a.org, owner_agent=a.agent, visibility="private", kind="fact",
                               text="The billing service runs PostgreSQL 15.", occurred_at="2026-11-10T10:00:00Z",
                               valid_from="2026-11-10T10:00:00Z", source_node_ids=[old],
                               tension_updated_at="2026-11-10T10:00:00Z")
    # ... and one drawn later (an idle reflection of the 28th) ends where it began, not before
    late = Node.objects.create(org=a.org, owner_agent=a.agent, visibility="private", kind="fact",
                               text="Billing is on PostgreSQL 15.", occurred_at="2026-11-28T10:00:00Z",
                               valid_from="2026-11-28T10:00:00Z", source_node_ids=[old],
                               tension_updated_at="2026-11-28T10:00:00Z")
    conflicts.detect(org_id=a.org.id, node_ids=[new])
    conflict = Conflict.objects.get(node_a_id=old, node_b_id=new)
    keep, gone = (new, old) if keep_newer else (old, new)
    r = c.post(f"/api/v1/conflicts/{conflict.id}/resolve", {"action": "supersede", "keep": keep}, format="json")
    assert r.status_code == 200, r.content
    ended = Node.objects.get(pk=gone).valid_to
    # the newer statement's time either way: when it replaced the old one, or, kept older, when it began
    assert ended.isoformat().startswith("2026-11-24T10:00")
    assert Node.objects.get(pk=keep).valid_to is None
    if keep_newer:
        assert Node.objects.get(pk=fact.pk).valid_to == ended
        late_node = Node.objects.get(pk=late.pk)
        assert late_node.valid_to == late_node.valid_from > ended
    body = client_for(a.key).get(f"/api/v1/memories/nodes/{gone}").json()
    assert body["silks"]["temporal"]["valid_to"].startswith("2026-11-24T10:00")
