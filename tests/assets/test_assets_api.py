"""/api/v1/assets and /assets/{id}: create, read, versioned update with optimistic locking."""

from __future__ import annotations

import pytest

from assets.models import Asset, AssetVersion, AuditEvent

from .helpers import create_asset, last_event, weave

pytestmark = pytest.mark.django_db


def test_owner_creates_and_reads_member_and_outsider_do_not(world, client_for):
    a = world["a"]
    body = create_asset(client_for(a.member), kind="skill", title="Deploy", body="1. build\n2. ship",
                        summary="How we deploy")
    assert body["version"] == 1 and body["status"] == "draft" and body["visibility"] == "private"
    assert body["owner"] == {"kind": "user", "id": a.member.id} and len(body["content_hash"]) == 64
    assert client_for(a.member).get(f"/api/v1/assets/{body['id']}").status_code == 200
    for who in (a.owner, a.admin, a.key, world["b"].owner):  # private: owner only, org owner included
        assert client_for(who).get(f"/api/v1/assets/{body['id']}").status_code == 404
    assert client_for(world["outsider"]).get(f"/api/v1/assets/{body['id']}").status_code == 403
    assert client_for(None).get(f"/api/v1/assets/{body['id']}").status_code in (401, 403)
    assert [x["id"] for x in client_for(a.member).get("/api/v1/assets").json()["results"]] == [body["id"]]
    assert client_for(a.owner).get("/api/v1/assets").json()["results"] == []


def test_shared_scopes_at_creation_need_admins_of_the_scope(world, client_for):
    a = world["a"]
    create_asset(client_for(a.member), visibility="org", status=400)
    create_asset(client_for(a.member), visibility="team", team_id=a.team.id, status=400)
    create_asset(client_for(a.key), visibility="org", status=400)
    org_asset = create_asset(client_for(a.admin), visibility="org", title="Handbook")
    assert client_for(a.member).get(f"/api/v1/assets/{org_asset['id']}").status_code == 200
    # Agents read org assets only through a binding.
    assert client_for(a.key).get(f"/api/v1/assets/{org_asset['id']}").status_code == 404


def test_strict_input(world, client_for):
    c = client_for(world["a"].member)
    r = c.post("/api/v1/assets", {"kind": "wiki", "title": "x", "colour": "red"}, format="json")
    assert r.status_code == 400 and "colour" in r.json()["error"]["fields"]
    assert c.post("/api/v1/assets", {"kind": "poem", "title": "x"}, format="json").status_code == 400
    assert Asset.objects.count() == 0


def test_versions_idempotent_resave_and_history(world, client_for):
    a = world["a"]
    c = client_for(a.member)
    asset = create_asset(c, body="v1 text")
    url = f"/api/v1/assets/{asset['id']}"
    r = c.patch(url, {"expected_version": 1, "body": "v2 text"}, format="json")
    assert r.status_code == 200 and r.json()["version"] == 2
    h2 = r.json()["content_hash"]
    r = c.patch(url, {"expected_version": 2, "body": "v2 text"}, format="json")  # identical content
    assert r.status_code == 200 and r.json()["version"] == 2 and r.json()["content_hash"] == h2
    assert AssetVersion.objects.filter(asset_id=asset["id"]).count() == 2
    hist = c.get(f"{url}/versions").json()["results"]
    assert [v["version"] for v in hist] == [2, 1] and hist[1]["body"] == "v1 text"
    assert c.get(f"{url}/versions/1").json()["body"] == "v1 text"
    assert c.get(f"{url}/versions/9").status_code == 404
    assert client_for(a.owner).get(f"{url}/versions").status_code == 404  # history is as private as the asset


def test_stale_version_is_409_and_writes_nothing(world, client_for):
    c = client_for(world["a"].member)
    asset = create_asset(c, body="one")
    url = f"/api/v1/assets/{asset['id']}"
    assert c.patch(url, {"expected_version": 1, "body": "two"}, format="json").status_code == 200
    r = c.patch(url, {"expected_version": 1, "body": "three"}, format="json")
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"
    assert Asset.objects.get(id=asset["id"]).body == "two"
    assert c.patch(url, {"body": "no version"}, format="json").status_code == 400  # expected_version required


def test_widening_visibility_needs_promotion(world, client_for):
    c = client_for(world["a"].member)
    asset = create_asset(c)
    url = f"/api/v1/assets/{asset['id']}"
    assert c.patch(url, {"expected_version": 1, "visibility": "org"}, format="json").status_code == 400
    r = c.patch(url, {"expected_version": 1, "visibility": "restricted"}, format="json")
    assert r.status_code == 200 and r.json()["visibility"] == "restricted" and r.json()["version"] == 1


def test_chat_memory_holds_only_readable_nodes(world, client_for):
    a = world["a"]
    mine = weave(client_for(a.member), "I prefer tea over coffee.")
    theirs = weave(client_for(a.key), "The bot's private scratch note.")
    c = client_for(a.member)
    create_asset(c, kind="chat_memory", title="prefs", node_ids=[mine, theirs], status=400)
    create_asset(c, kind="chat_memory", title="empty", status=400)
    body = create_asset(c, kind="chat_memory", title="prefs", node_ids=[mine])
    assert body["node_ids"] == [mine]


def test_writes_and_reads_by_id_are_audited(world, client_for):
    a = world["a"]
    asset = create_asset(client_for(a.member))
    client_for(a.member).get(f"/api/v1/assets/{asset['id']}")
    client_for(a.admin).get(f"/api/v1/assets/{asset['id']}")
    assert last_event(a.org, action="asset.create").actor_id == a.member.id
    allowed = last_event(a.org, action="asset.read", outcome=AuditEvent.Outcome.ALLOWED)
    denied = last_event(a.org, action="asset.read", outcome=AuditEvent.Outcome.DENIED)
    assert allowed.actor_id == a.member.id and allowed.reason == "owner"
    assert denied.actor_id == a.admin.id and denied.reason == "visibility_private"
