"""The memory browser lists memories by when they happened (newest first, the higher id on a tie),
pages through them without a gap or a repeat, and marks a superseded memory (first-user audit: the
list was in id order and showed nothing of a memory replaced by a newer one)."""

from __future__ import annotations

import random
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.models import Node, Visibility
from reflection import conflicts as conflict_service
from reflection.models import Conflict

from .conftest import actor, weave

pytestmark = pytest.mark.django_db


def _ids(html: str) -> list[int]:
    return [int(x) for x in re.findall(r'data-node-id="(\d+)"', html)]


def _row(html: str, node_id: int) -> str:
    return re.search(rf'<tr class="node-row" data-node-id="{node_id}".*?</tr>', html, re.S).group(0)


def _shuffled_times(ids: list[int]) -> None:
    """Occurrence times unrelated to the ids, with ties: an imported history, a late-woven session."""
    rng = random.Random(7)
    base = timezone.now() - timedelta(days=30)
    for nid in ids:
        Node.objects.filter(id=nid).update(occurred_at=base + timedelta(hours=rng.randrange(40)))


def test_the_browser_pages_by_occurrence_newest_first(world, login):
    a = world["a"]
    ids = weave(actor(a.owner, a.org), *[f"Note {i} about the rollout." for i in range(120)])
    _shuffled_times(ids)
    expected = [n.id for n in sorted(Node.objects.filter(id__in=ids), key=lambda n: (n.occurred_at, n.id),
                                     reverse=True)]
    assert expected != sorted(ids, reverse=True)  # the times really do disagree with the ids
    c = login(a.owner)
    seen, url = [], "/console/memories/?limit=50"
    while url:
        html = c.get(url).content.decode()
        seen += _ids(html)
        m = re.search(r'href="\?([^"]*after=\d+[^"]*)"', html)
        url = "/console/memories/?" + m.group(1).replace("&amp;", "&") if m else None
    assert seen == expected
    # htmx "load more" continues after the row it names
    r = c.get(f"/console/memories/?after={expected[49]}&limit=50&partial=rows", HTTP_HX_REQUEST="true")
    assert _ids(r.content.decode()) == expected[50:100]


def test_a_page_is_a_bounded_number_of_queries(world, login):
    a = world["a"]
    ids = weave(actor(a.owner, a.org), *[f"Item {i} of the launch list." for i in range(60)])
    _shuffled_times(ids)
    c = login(a.owner)

    def queries(url: str) -> int:
        with CaptureQueriesContext(connection) as q:
            assert c.get(url).status_code == 200
        return len(q.captured_queries)

    queries("/console/memories/?limit=1")  # the session's first request reads what later ones reuse
    assert queries("/console/memories/?limit=50") == queries("/console/memories/?limit=5")
    assert queries(f"/console/memories/?limit=50&after={ids[-1]}") <= queries("/console/memories/?limit=5") + 1


def test_an_anchor_the_viewer_may_not_read_is_refused(world, mem, login):
    """``after`` names a row of the list: another's hidden memory is no anchor (its time would leak
    through which rows follow it)."""
    c = login(world["a"].member)
    r = c.get(f"/console/memories/?after={mem.owner_private}")
    assert r.status_code == 400 and not _ids(r.content.decode())
    assert "No such memory to continue the list from" in r.content.decode()
    r = c.get(f"/console/memories/?after={mem.owner_private}&partial=rows", HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and not _ids(r.content.decode())
    assert c.get(f"/console/memories/?after={mem.member_private}").status_code == 200  # their own is one


def test_a_superseded_memory_is_marked(world, login):
    a = world["a"]
    owner = actor(a.owner, a.org)
    old = weave(owner, "The offsite is on March 14.")[0]
    new = weave(owner, "The offsite is on March 15.")[0]
    other = weave(owner, "Flights are booked.", visibility=Visibility.ORG)[0]
    conflict = Conflict.objects.create(org=a.org, node_a_id=old, node_b_id=new, reason="different date",
                                       detector="rule")
    conflict_service.resolve(actor=owner, conflict=conflict, action="supersede", keep_id=new)
    html = login(a.member).get("/console/memories/").content.decode()
    assert 'class="pill superseded"' in _row(html, old) and ">superseded<" in _row(html, old)
    assert "superseded" not in _row(html, new) and "superseded" not in _row(html, other)
    # its drawer says it is no longer recalled, not when its tension would stop seeding it
    c = login(a.owner)
    drawer = c.get(f"/console/memories/{old}/").content.decode()
    assert "superseded: not recalled" in drawer and "stops seeding in" not in drawer
    drawer = c.get(f"/console/memories/{new}/").content.decode()
    assert "superseded: not recalled" not in drawer and ("stops seeding in" in drawer or "does not fade" in drawer)
