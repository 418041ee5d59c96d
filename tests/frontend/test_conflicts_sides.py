"""The conflicts queue says who wrote each side and which is newer, and offers keeping either: a
reviewer deciding between two statements needs their sources, and the older one is sometimes the
right one (a mistaken correction)."""

from __future__ import annotations

import re

import pytest

from memory.models import Node
from reflection.models import Conflict

pytestmark = pytest.mark.django_db


@pytest.fixture
def conflict(world, mem):
    return Conflict.objects.create(org=world["a"].org, node_a_id=mem.owner_org, node_b_id=mem.agent_org,
                                   reason="rescheduled: March 14 vs March 21", detector="rule")


def _section(html: str, conflict_id: int) -> str:
    return html.split(f'id="conflict-{conflict_id}"')[1].split("</section>")[0]


def test_each_side_names_its_writer_and_the_newer_is_marked(world, login, conflict, mem):
    Node.objects.filter(id=mem.owner_org).update(speaker="Ana")
    section = _section(login(world["a"].owner).get("/console/conflicts/").content.decode(), conflict.id)
    sides = section.split('class="muted who"')[1:]
    assert len(sides) == 2
    assert sides[0].split("</p>")[0].lstrip(">").startswith("Ana")  # the speaker, as said
    assert f"agent {world['a'].agent.name}" in sides[1].split("</p>")[0]  # no speaker: the writing agent
    newer = max((Node.objects.get(id=i) for i in (mem.owner_org, mem.agent_org)), key=lambda n: (n.occurred_at, n.id))
    assert re.search(rf"Memory {newer.id}</a> <span class=\"muted\">· newer", section)


def test_keeping_the_older_supersedes_the_newer(world, login, conflict, mem):
    c = login(world["a"].owner)
    section = _section(c.get("/console/conflicts/").content.decode(), conflict.id)
    keeps = re.findall(r'value="supersede" data-keep="(\d+)"', section)
    older, newer = sorted((Node.objects.get(id=i) for i in (mem.owner_org, mem.agent_org)),
                          key=lambda n: (n.occurred_at, n.id))
    assert [int(k) for k in keeps] == [newer.id, older.id]  # "keep the newer", then "keep the older"
    r = c.post(f"/console/conflicts/{conflict.id}/resolve", {"action": "supersede", "keep": str(older.id)})
    assert r.status_code == 302
    conflict.refresh_from_db()
    assert conflict.status == Conflict.Status.SUPERSEDED and conflict.kept_node_id == older.id
    assert Node.objects.get(id=newer.id).valid_to is not None and Node.objects.get(id=older.id).valid_to is None
