"""The permission matrix: {owner, admin, member, other-team member, outsider, agent with and
without binding, other org} × {private, team, org, restricted} × {read, write}, for memory nodes
and memory assets, through the endpoints. Every cell is as docs/permissions.md specifies, and no
response of a refused cell carries the object's text. Listings agree with the read column."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction

from assets.models import AgentBinding, Asset
from assets.services import content_hash
from teams import services as team_services
from teams.models import Agent, Membership, Role, Team, TeamMembership, TeamRole

from .helpers import weave

pytestmark = pytest.mark.django_db

VIS = ["private", "team", "org", "restricted"]
ROWS = ["author", "owner", "admin", "member", "other_team", "outsider", "agent_bound", "agent_unbound",
        "other_org"]

# expected HTTP status per (row, visibility): node read, node write (DELETE), asset read, asset write (PATCH)
NODE_READ = {
    "author": [200, 200, 200, 200],
    "owner": [404, 404, 200, 404], "admin": [404, 404, 200, 404],
    "member": [404, 200, 200, 404], "other_team": [404, 404, 200, 404],
    "outsider": [403, 403, 403, 403],
    "agent_bound": [404, 200, 200, 404], "agent_unbound": [404, 200, 200, 404],
    "other_org": [404, 404, 404, 404],
}
NODE_WRITE = {
    "author": [204, 204, 204, 204],
    "owner": [404, 404, 204, 404], "admin": [404, 404, 204, 404],
    "member": [404, 403, 403, 404], "other_team": [404, 404, 403, 404],
    "outsider": [403, 403, 403, 403],
    "agent_bound": [404, 403, 403, 404], "agent_unbound": [404, 403, 403, 404],
    "other_org": [404, 404, 404, 404],
}
ASSET_READ = {
    "author": [200, 200, 200, 200],
    "owner": [404, 404, 200, 404], "admin": [404, 404, 200, 404],
    "member": [404, 200, 200, 404], "other_team": [404, 404, 200, 404],
    "outsider": [403, 403, 403, 403],
    "agent_bound": [404, 200, 200, 404], "agent_unbound": [404, 404, 404, 404],
    "other_org": [404, 404, 404, 404],
}
ASSET_WRITE = {
    "author": [200, 200, 200, 200],
    "owner": [404, 404, 200, 404], "admin": [404, 404, 200, 404],
    "member": [404, 403, 403, 404], "other_team": [404, 404, 403, 404],
    "outsider": [403, 403, 403, 403],
    "agent_bound": [404, 403, 403, 404], "agent_unbound": [404, 404, 404, 404],
    "other_org": [404, 404, 404, 404],
}


@pytest.fixture
def matrix(world, client_for):
    a = world["a"]
    User = get_user_model()
    author = User.objects.create_user("alpha-author", "author@example.com", "pw-author-123")
    Membership.objects.create(org=a.org, user=author, role=Role.MEMBER)
    TeamMembership.objects.create(org=a.org, team=a.team, user=author, role=TeamRole.MEMBER)
    ops = Team.objects.create(org=a.org, name="ops", slug="ops")
    other_team = User.objects.create_user("alpha-ops", "ops@example.com", "pw-ops-123")
    Membership.objects.create(org=a.org, user=other_team, role=Role.MEMBER)
    TeamMembership.objects.create(org=a.org, team=ops, user=other_team, role=TeamRole.MEMBER)
    unbound = Agent.objects.create(org=a.org, name="alpha-bot-2", team=a.team)
    _, unbound_key = team_services.api_key_create(actor=None, agent=unbound, name="t")

    nodes, assets = {}, {}
    for v in VIS:
        nodes[v] = weave(client_for(author), f"node secret {v} zebra", visibility=v,
                         team_id=a.team.id if v == "team" else None)
        # Approved (version 1): an agent is given only an asset's approved version, so a draft would
        # be a 404 for the bound agent whatever its visibility (test_agent_rest_served_version).
        x = Asset(org=a.org, kind="wiki", title=f"asset secret {v} zebra", body="b", owner_user=author,
                  team=a.team if v == "team" else None, visibility=v, status="approved", approved_version=1)
        x.content_hash = content_hash(title=x.title, summary="", body="b", node_ids=[])
        x.save()
        assets[v] = x.id
        # A binding made for every asset, even those it can't widen (stale or forced bindings).
        AgentBinding.objects.create(org=a.org, agent=a.agent, asset=x)
    who = {"author": author, "owner": a.owner, "admin": a.admin, "member": a.member, "other_team": other_team,
           "outsider": world["outsider"], "agent_bound": a.key, "agent_unbound": unbound_key,
           "other_org": world["b"].owner}
    return {"nodes": nodes, "assets": assets, "clients": {k: client_for(v) for k, v in who.items()}}


def _probe(fn):
    """Run a write and roll it back so every cell starts from the same state."""
    with transaction.atomic():
        r = fn()
        transaction.set_rollback(True)
    return r


def _no_leak(r, v):
    if r.status_code >= 400:
        assert f"secret {v}" not in r.content.decode()


def test_every_cell(matrix):
    failures = []
    for row in ROWS:
        c = matrix["clients"][row]
        for i, v in enumerate(VIS):
            nid, aid = matrix["nodes"][v], matrix["assets"][v]
            cells = {
                "node.read": (c.get(f"/api/v1/memories/nodes/{nid}"), NODE_READ),
                "node.write": (_probe(lambda c=c, nid=nid: c.delete(f"/api/v1/memories/nodes/{nid}")), NODE_WRITE),
                "asset.read": (c.get(f"/api/v1/assets/{aid}"), ASSET_READ),
                "asset.write": (_probe(lambda c=c, aid=aid: c.patch(f"/api/v1/assets/{aid}",
                                                                    {"expected_version": 1, "body": "b"},
                                                                    format="json")), ASSET_WRITE),
            }
            for name, (r, table) in cells.items():
                _no_leak(r, v)
                if r.status_code != table[row][i]:
                    failures.append(f"{row} {v} {name}: {r.status_code} != {table[row][i]}")
    assert failures == []


def test_listings_and_resonance_agree_with_the_read_column(matrix):
    for row in ROWS:
        c = matrix["clients"][row]
        r = c.get("/api/v1/memories/nodes")
        if row == "outsider":
            assert r.status_code == 403
            continue
        listed = {n["id"] for n in r.json()["results"]}
        expect = {matrix["nodes"][v] for i, v in enumerate(VIS) if NODE_READ[row][i] == 200}
        assert listed & set(matrix["nodes"].values()) == expect, row
        hits = c.post("/api/v1/memories/resonate", {"query": "node secret zebra", "reinforce": False},
                      format="json").json()["hits"]
        assert {h["node_id"] for h in hits} & set(matrix["nodes"].values()) <= expect, row
        assets = {x["id"] for x in c.get("/api/v1/assets").json()["results"]}
        expect_a = {matrix["assets"][v] for i, v in enumerate(VIS) if ASSET_READ[row][i] == 200}
        assert assets & set(matrix["assets"].values()) == expect_a, row
