"""Deleting a team changes who may read its memories and assets (moved to another team, or made
private) and removes the grants to its roles: the audit says which, not only how many. Before, one
``team.delete`` entry carried counts, and no asset's or grant's own trail showed the change."""

from __future__ import annotations

import pytest

from assets.models import AccessGrant, Asset, AuditEvent
from memory.models import Node
from teams import services
from teams.models import Team

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

T0 = "2026-01-01T00:00:00Z"


def _node(a, team, visibility: str) -> int:
    return Node.objects.create(org=a.org, owner_user=a.member, team=team, visibility=visibility, text="x",
                               occurred_at=T0, tension_updated_at=T0).id


def _asset(a, team, visibility: str, title: str) -> int:
    return Asset.objects.create(org=a.org, owner_user=a.member, team=team, visibility=visibility, kind="wiki",
                                title=title, status="approved").id


def _grant(a, team, object_type: str, object_id: int, role: str) -> int:
    return AccessGrant.objects.create(org=a.org, object_type=object_type, object_id=object_id,
                                      grantee_kind="team_role", grantee_team=team, grantee_team_role=role,
                                      permission="read").id


@pytest.fixture
def ops(world):
    """Team Ops: a shared and an org-visible memory, a shared and an org-visible asset naming it, and
    grants to its roles on a restricted memory and a restricted asset (of core)."""
    a = world["a"]
    team = Team.objects.create(org=a.org, name="Ops")
    restricted_node = _node(a, a.team, "restricted")
    restricted_asset = _asset(a, a.team, "restricted", "Secrets")
    return {
        "team": team,
        "nodes": [_node(a, team, "team"), _node(a, team, "org")],
        "shared_asset": _asset(a, team, "team", "Ops runbook"),
        "org_asset": _asset(a, team, "org", "Ops FAQ"),
        "grants": {"node": (_grant(a, team, "node", restricted_node, "member"), restricted_node),
                   "asset": (_grant(a, team, "asset", restricted_asset, "admin"), restricted_asset)},
    }


def _trail(a, action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(org=a.org, action=action).order_by("id"))


def test_private_names_each_asset_moved_and_each_grant_removed(world, client_for, ops):
    a, team = world["a"], ops["team"]
    r = client_for(a.owner).delete(f"/api/v1/teams/{team.id}?memories=private")
    assert r.status_code == 200, r.content
    rid = r["X-Request-Id"]

    [entry] = _trail(a, "team.delete")
    assert entry.detail["asset_ids"] == [ops["shared_asset"], ops["org_asset"]]
    assert entry.detail["grant_ids"] == [ops["grants"]["node"][0], ops["grants"]["asset"][0]]
    assert entry.detail["nodes_changed"] == 2 and entry.detail["node_ids"] == ops["nodes"]
    assert entry.detail["node_ids_more"] == 0
    assert entry.detail["grants_removed"] == 2  # the counts are still there

    cause = {"cause": "team.delete", "team": {"id": team.id, "name": "Ops"}, "audit_id": entry.id}
    moves = {int(e.object_id): e for e in _trail(a, "asset.move")}
    assert set(moves) == {ops["shared_asset"], ops["org_asset"]}
    assert moves[ops["shared_asset"]].detail == {"from": {"visibility": "team", "team_id": team.id},
                                                 "to": {"visibility": "private", "team_id": None}, **cause}
    assert moves[ops["org_asset"]].detail == {"from": {"visibility": "org", "team_id": team.id},
                                              "to": {"visibility": "org", "team_id": None}, **cause}
    assert all(e.object_type == "asset" and e.actor_id == a.owner.id and e.request_id == rid
               for e in moves.values())

    revokes = {(e.object_type, int(e.object_id)): e for e in _trail(a, "acl.revoke")}
    node_grant, node_id = ops["grants"]["node"]
    asset_grant, asset_id = ops["grants"]["asset"]
    assert set(revokes) == {("node", node_id), ("asset", asset_id)}
    assert revokes[("node", node_id)].detail == {"grant_id": node_grant, "grantee": f"team:{team.id}:member",
                                                 "permission": "read", **cause}
    assert revokes[("asset", asset_id)].detail["grantee"] == f"team:{team.id}:admin"
    assert not AccessGrant.objects.filter(id__in=[node_grant, asset_grant]).exists()
    # Each object's own trail (the console's per-object audit) shows what happened to it.
    assert AuditEvent.objects.filter(org=a.org, object_type="asset", object_id=str(ops["shared_asset"]),
                                     action="asset.move").exists()


def test_move_names_the_team_they_went_to(world, client_for, ops):
    a, team = world["a"], ops["team"]
    r = client_for(a.owner).delete(f"/api/v1/teams/{team.id}?memories=move&to_team_id={a.team.id}")
    assert r.status_code == 200, r.content
    moves = {int(e.object_id): e.detail for e in _trail(a, "asset.move")}
    assert moves[ops["shared_asset"]]["to"] == {"visibility": "team", "team_id": a.team.id}
    assert moves[ops["org_asset"]]["to"] == {"visibility": "org", "team_id": a.team.id}
    assert Asset.objects.get(id=ops["shared_asset"]).team_id == a.team.id
    assert len(_trail(a, "acl.revoke")) == 2  # grants to Ops's roles are not moved to core's


def test_many_memories_are_named_by_their_first_ids_and_a_count(world, client_for, monkeypatch):
    a = world["a"]
    team = Team.objects.create(org=a.org, name="Big")
    nodes = [_node(a, team, "team") for _ in range(5)]
    monkeypatch.setattr(services, "TEAM_DELETE_AUDIT_NODE_IDS", 3)
    r = client_for(a.owner).delete(f"/api/v1/teams/{team.id}?memories=private")
    assert r.status_code == 200, r.content
    [entry] = _trail(a, "team.delete")
    assert entry.detail["node_ids"] == nodes[:3] and entry.detail["node_ids_more"] == 2
    assert entry.detail["nodes_changed"] == 5 and entry.detail["asset_ids"] == [] == entry.detail["grant_ids"]
    assert not _trail(a, "asset.move") and not _trail(a, "acl.revoke")
