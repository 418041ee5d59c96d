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
