"""The node drawer counted edges to deleted memories as edges "to memories you cannot see": a soft
delete keeps the node's edges, and the count asked only whether the other end was visible, which a
deleted node never is. Deleted ends are now left out of that count; memories the viewer may not read
still count, and a superseded memory (not deleted) is listed as an edge like any other."""

from __future__ import annotations

import re

import pytest

from frontend import selectors
from memory import services as memory_services
from memory.models import Edge, Node, Visibility
from reflection import conflicts as conflict_service
from reflection.models import Conflict

from .conftest import actor, weave

pytestmark = pytest.mark.django_db


def _edge_ids(html: str) -> set[int]:
    table = re.search(r'<table class="compact" id="node-edges">(.*?)</table>', html, re.S)
    return {int(x) for x in re.findall(r"#(\d+)</a>", table.group(1))} if table else set()


def _drawer(login, user, node_id: int) -> str:
    r = login(user).get(f"/console/memories/{node_id}/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    return r.content.decode()


def test_edges_to_deleted_memories_are_not_memories_you_cannot_see(world, login):
    a = world["a"]
    owner, member = actor(a.owner, a.org), actor(a.member, a.org)
    center = weave(member, "The billing service moved to Postgres 16.")[0]
    gone_org = weave(owner, "Billing runs on Postgres 14.")[0]
    gone_private = weave(owner, "Billing DB password rotation notes.", visibility=Visibility.PRIVATE)[0]
    hidden = weave(owner, "Billing migration private checklist.", visibility=Visibility.PRIVATE)[0]
    Edge.objects.bulk_create([
        Edge(org=a.org, src_id=center, dst_id=gone_org, kind="entity", weight=0.9),
        Edge(org=a.org, src_id=gone_private, dst_id=center, kind="entity", weight=0.9),
        Edge(org=a.org, src_id=center, dst_id=hidden, kind="entity", weight=0.9),
    ])
    for nid in (gone_org, gone_private):
        memory_services.node_delete(actor=owner, node=Node.objects.get(id=nid))

    html = _drawer(login, a.member, center)
    assert "1 to a memory you cannot see" in html, re.findall(r"cannot see[^<]*", html)
    assert gone_org not in _edge_ids(html)
    rows, count, more = selectors.node_edges(actor=member, node=Node.objects.get(id=center))
    assert (count, more) == (1, False)

    # the owner sees the private one: only deleted ends are left, and they are not "hidden"
    assert "cannot see" not in _drawer(login, a.owner, center)
    Node.objects.filter(id=hidden).update(deleted_at=Node.objects.get(id=gone_org).deleted_at)
    assert "cannot see" not in _drawer(login, a.member, center)


def test_a_superseded_neighbour_is_listed_not_hidden(world, login):
    a = world["a"]
    owner = actor(a.owner, a.org)
    old = weave(owner, "The offsite is on March 14.")[0]
    new = weave(owner, "The offsite is on March 15.")[0]
    conflict = Conflict.objects.create(org=a.org, node_a_id=old, node_b_id=new, reason="different date",
                                       detector="rule")
    conflict_service.resolve(actor=owner, conflict=conflict, action="supersede", keep_id=new)
    assert Node.objects.get(id=old).valid_to is not None and Node.objects.get(id=old).deleted_at is None
    html = _drawer(login, a.member, new)
    assert old in _edge_ids(html) and "cannot see" not in html
