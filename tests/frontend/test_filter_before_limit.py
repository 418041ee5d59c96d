"""The console applies the permission filter before the LIMIT: rows the viewer may see are never
pushed out of a bounded listing by rows it may not see (heavier edges to someone's private nodes,
candidates the viewer cannot approve, bindings of agents the viewer does not manage)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assets import services as asset_services
from assets.models import AccessGrant, AgentBinding, Asset
from frontend import selectors
from memory.models import Edge, Node, Visibility
from teams.models import Agent, Team, TeamMembership, TeamRole

from .conftest import actor

pytestmark = pytest.mark.django_db


def _nodes(org, user, n: int, *, visibility: str, text: str = "note") -> list[int]:
    now = timezone.now()
    made = Node.objects.bulk_create([
        Node(org=org, owner_user=user, visibility=visibility, text=f"{text} {i}", occurred_at=now,
             tension_updated_at=now) for i in range(n)
    ])
    return [x.id for x in made]


def _edge_ids(html: str) -> set[int]:
    table = re.search(r'<table class="compact" id="node-edges">(.*?)</table>', html, re.S).group(1)
    return {int(x) for x in re.findall(r"#(\d+)</a>", table)}


# --- node drawer ----------------------------------------------------------------------------------


@pytest.fixture
def hub(world):
    """An org node of the member with 201 heavy edges to the owner's private nodes (in both
    directions) and one light edge to an org node of the owner."""
    a = world["a"]
    center = _nodes(a.org, a.member, 1, visibility=Visibility.ORG, text="hub")[0]
    private = _nodes(a.org, a.owner, 201, visibility=Visibility.PRIVATE, text="Owner secret")
    neighbour = _nodes(a.org, a.owner, 1, visibility=Visibility.ORG, text="Visible neighbour")[0]
    Edge.objects.bulk_create(
        [Edge(org=a.org, src_id=center, dst_id=p, kind="entity", weight=0.99) for p in private[:150]]
        + [Edge(org=a.org, src_id=p, dst_id=center, kind="entity", weight=0.98) for p in private[150:]]
        + [Edge(org=a.org, src_id=neighbour, dst_id=center, kind="similar", weight=0.1)]
    )
    return {"center": center, "private": private, "neighbour": neighbour}


def test_drawer_lists_a_visible_neighbour_behind_201_heavier_hidden_edges(world, hub, login):
    a = world["a"]
    with CaptureQueriesContext(connection) as q:
        r = login(a.member).get(f"/console/memories/{hub['center']}/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    html = r.content.decode()
    assert _edge_ids(html) == {hub["neighbour"]}
    assert "Visible neighbour" in html and "Owner secret" not in html
    # the hidden count is every hidden edge, not the ones that happened to fill a slice
    assert "201 to memories you cannot see" in html
    # still bounded: every edge query carries a LIMIT, none reads a hub's edges into Python
    edge_sql = [x["sql"] for x in q.captured_queries if 'FROM "memory_edge"' in x["sql"]]
    assert edge_sql and all("LIMIT" in s for s in edge_sql), edge_sql


def test_drawer_selector_orders_visible_edges_and_the_owner_sees_them_all(world, hub):
    a = world["a"]
    got = selectors.node_edges(actor=actor(a.member, a.org), node=Node.objects.get(id=hub["center"]))
    assert [(e.other_id, e.direction) for e in got[0]] == [(hub["neighbour"], "in")]
    assert got[1:] == (201, False)  # exact, under DRAWER_HIDDEN_COUNT_CAP
    # the owner may see its private nodes: the heaviest DRAWER_MAX_EDGES, out-edges (0.99) first
    rows, *hidden = selectors.node_edges(actor=actor(a.owner, a.org), node=Node.objects.get(id=hub["center"]))
    assert len(rows) == selectors.DRAWER_MAX_EDGES and hidden == [0, False]
    assert [e.other_id for e in rows] == sorted(hub["private"][:150])[: selectors.DRAWER_MAX_EDGES]


def test_drawer_says_more_than_the_cap_of_hidden_edges(world, hub, login, monkeypatch):
    monkeypatch.setattr(selectors, "DRAWER_HIDDEN_COUNT_CAP", 50, raising=False)  # new in the fix
    html = login(world["a"].member).get(f"/console/memories/{hub['center']}/", HTTP_HX_REQUEST="true").content.decode()
    assert "more than 50 to memories you cannot see" in html and "201 to memories" not in html
    assert _edge_ids(html) == {hub["neighbour"]}


# --- graph ----------------------------------------------------------------------------------------


def test_graph_hop_limit_counts_only_edges_to_visible_nodes(world, login, monkeypatch):
    a = world["a"]
    monkeypatch.setattr(selectors, "GRAPH_MAX_EDGES_PER_HOP", 5)
    center = _nodes(a.org, a.member, 1, visibility=Visibility.ORG, text="hub")[0]
    private = _nodes(a.org, a.owner, 6, visibility=Visibility.PRIVATE, text="Owner secret")
    neighbour, second = _nodes(a.org, a.owner, 2, visibility=Visibility.ORG, text="Visible")
    Edge.objects.bulk_create(
        [Edge(org=a.org, src_id=center, dst_id=p, kind="entity", weight=0.99) for p in private]
        + [Edge(org=a.org, src_id=center, dst_id=neighbour, kind="similar", weight=0.1),
           Edge(org=a.org, src_id=second, dst_id=neighbour, kind="similar", weight=0.1)]
    )
    g = login(a.member).get(f"/console/memories/{center}/graph.json?depth=2").json()
    assert {n["id"] for n in g["nodes"]} == {center, neighbour, second}
    assert {(e["from"], e["to"]) for e in g["edges"]} == {(center, neighbour), (second, neighbour)}
    # the owner sees its private nodes, the heaviest five within the hop's limit
    mine = login(a.owner).get(f"/console/memories/{center}/graph.json?depth=1").json()
    assert {n["id"] for n in mine["nodes"]} == {center, *private[:5]}


# --- approval queue -------------------------------------------------------------------------------


def _candidate(world, title: str, *, visibility: str = "team") -> Asset:
    a = world["a"]
    owner = actor(a.owner, a.org)
    asset = asset_services.asset_create(actor=owner, kind="wiki", title=title, body="b",
                                        visibility=Visibility.PRIVATE, team=None)
    return asset_services.asset_promote(actor=owner, asset=asset, visibility=visibility, team=a.team)


@pytest.fixture
def team_lead(world):
    """The member administers the core team; the org owner belongs to it (to propose promotions)."""
    a = world["a"]
    TeamMembership.objects.filter(team=a.team, user=a.member).update(role=TeamRole.ADMIN)
    TeamMembership.objects.create(org=a.org, team=a.team, user=a.owner, role=TeamRole.MEMBER)
    return a.member


def test_team_admin_queue_shows_the_approvable_candidate_behind_unapprovable_ones(world, team_lead, login):
    approvable = _candidate(world, "Team runbook")
    # newer, more than the queue's limit, and into the admin's team, but org-wide: org admins only
    for i in range(21):
        _candidate(world, f"Org-wide proposal {i}", visibility="org")
    html = login(team_lead).get("/console/assets/").content.decode()
    queue = re.search(r'<section class="card" id="awaiting-approval">(.*?)</section>', html, re.S)
    assert queue is not None
    assert re.findall(r'href="/console/assets/(\d+)/"', queue.group(1)) == [str(approvable.id)]


def test_org_admin_queue_pages_past_candidates_only_can_approve_refuses(world, team_lead, monkeypatch):
    a = world["a"]
    older = _candidate(world, "Older runbook")
    approvable = _candidate(world, "Team runbook")
    # a restricted target needs an ACL write grant as well (assets.access.can_approve): not in SQL
    restricted = [_candidate(world, f"Restricted {i}") for i in range(5)]
    Asset.objects.filter(id__in=[x.id for x in restricted]).update(
        promotion={"visibility": "restricted", "team_id": a.team.id})
    monkeypatch.setattr(selectors, "APPROVAL_PAGE", 2, raising=False)  # new in the fix
    admin = actor(a.admin, a.org)
    got = selectors.assets_awaiting_approval(actor=admin, limit=2)
    assert [x.id for x in got] == [approvable.id, older.id]
    # a write grant makes a restricted one approvable, and it comes first (newest first)
    AccessGrant.objects.create(org=a.org, object_type="asset", object_id=restricted[-1].id, grantee_kind="user",
                               grantee_user=a.admin, permission="write", granted_by_label="test")
    assert [x.id for x in selectors.assets_awaiting_approval(actor=admin, limit=2)] == [restricted[-1].id,
                                                                                      approvable.id]
    # bounded: the scan stops at APPROVAL_SCAN_MAX candidates, in pages of APPROVAL_PAGE
    monkeypatch.setattr(selectors, "APPROVAL_SCAN_MAX", 4)
    with CaptureQueriesContext(connection) as q:
        got = selectors.assets_awaiting_approval(actor=admin, limit=2)
    assert [x.id for x in got] == [restricted[-1].id]
    asset_sql = [x["sql"] for x in q.captured_queries if 'FROM "assets_asset"' in x["sql"]]
    assert len(asset_sql) == 2 and all("LIMIT 2" in s for s in asset_sql), asset_sql


# --- bindings -------------------------------------------------------------------------------------


def test_bindings_of_the_admins_agents_are_listed_behind_200_of_other_teams(world, team_lead, login):
    a = world["a"]
    skill = asset_services.asset_create(actor=actor(a.owner, a.org), kind="skill", title="Escalation", body="b",
                                        visibility=Visibility.ORG, team=None)
    other = Team.objects.create(org=a.org, name="alpha other", slug="other")
    agents = Agent.objects.bulk_create([Agent(org=a.org, name=f"aaa-other-{i:03}", team=other) for i in range(201)])
    AgentBinding.objects.bulk_create([AgentBinding(org=a.org, agent=x, asset=skill, priority=1) for x in agents])
    mine = asset_services.binding_set(actor=actor(a.admin, a.org), agent=a.agent, asset=skill, mode="full",
                                      priority=500)
    html = login(team_lead).get(f"/console/assets/{skill.id}/").content.decode()
    assert {int(x) for x in re.findall(r'data-binding-id="(\d+)"', html)} == {mine.id}
    # an org admin manages them all, still within ASSET_SIDE_ROWS
    rows = selectors.asset_bindings(actor=actor(a.admin, a.org), asset=skill)
    assert len(rows) == selectors.ASSET_SIDE_ROWS and mine not in rows
