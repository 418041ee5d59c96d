"""Re-running an import writes nothing twice: rows already in the org are skipped and counted.
Before, every run added every node, edge, asset and version again, and a file holding a node with
an event_id failed its second run (or an import back into its own org) on the raw
'duplicate key value violates unique constraint "node_event_idempotent"', without a line."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from assets.models import Asset, AssetVersion
from memory.models import Edge, Node

from .helpers import create_asset
from .test_export_import import _twin_org

pytestmark = pytest.mark.django_db


def _weave(client, text: str, **extra) -> int:
    r = client.post("/api/v1/memories/weave", {"text": text, "visibility": "org", "session_key": "s", **extra},
                    format="json")
    assert r.status_code == 201, r.content
    return r.json()["node_ids"][0]


@pytest.fixture
def exported(world, client_for) -> str:
    """alpha as its admin exports it: nodes (one with an event_id), their edges, an asset at
    version 2 with both versions, the agent's node."""
    a = world["a"]
    admin = client_for(a.admin)
    _weave(admin, "The Orion deal closes in June.", event_id="crm-1")
    _weave(admin, "Orion legal review is on Tuesday.")
    _weave(client_for(a.key), "The agent noted the Orion budget.")
    asset = create_asset(admin, kind="wiki", title="Orion", body="v1", visibility="org")
    assert admin.patch(f"/api/v1/assets/{asset['id']}", {"expected_version": 1, "body": "v2"},
                       format="json").status_code == 200
    text = b"".join(admin.get("/api/v1/export").streaming_content).decode()
    types = [json.loads(x)["type"] for x in text.splitlines()]
    assert types.count("node") == 3 and "edge" in types and types.count("asset_version") == 2
    assert any(json.loads(x).get("event_id") == "crm-1" for x in text.splitlines())
    return text


def _counts(org) -> tuple[int, ...]:
    return tuple(m.objects.filter(org=org).count() for m in (Node, Edge, Asset, AssetVersion))


def _import(client, text: str, org: str):
    return client.post("/api/v1/import", {"jsonl": text}, format="json", HTTP_X_NYLON_ORG=org)


def test_importing_the_same_file_twice_skips_every_row_the_first_run_wrote(world, client_for, exported):
    gamma = _twin_org(world)
    admin = client_for(world["a"].admin)
    r = _import(admin, exported, "gamma")
    assert r.status_code == 201, r.content
    first = r.json()
    assert first["skipped"] == 0 and first["node"] == 3 and first["asset"] == 1 and first["asset_version"] == 2
    after = _counts(gamma)
    assert after == (3, first["edge"], 1, 2)
    r = _import(admin, exported, "gamma")
    assert r.status_code == 200, r.content  # nothing created: a 200, as a replayed weave
    assert r.json() == {"node": 0, "edge": 0, "asset": 0, "asset_version": 0, "unowned": 0, "missing": [],
                        "skipped": sum(first[k] for k in ("node", "edge", "asset", "asset_version"))}
    assert _counts(gamma) == after
    assert Node.objects.filter(org=gamma, event_id="crm-1").count() == 1


def test_importing_an_export_back_into_its_own_org_writes_nothing(world, client_for, exported):
    a = world["a"]
    before = _counts(a.org)
    r = _import(client_for(a.admin), exported, "alpha")
    assert r.status_code == 200, r.content
    assert r.json()["skipped"] == sum(1 for _ in exported.splitlines()) - 1
    assert _counts(a.org) == before


def test_a_re_run_skips_an_asset_edited_since_and_keeps_its_history(world, client_for, exported, tmp_path):
    gamma = _twin_org(world)
    admin = client_for(world["a"].admin)
    assert _import(admin, exported, "gamma").status_code == 201
    copy = Asset.objects.get(org=gamma)
    r = admin.patch(f"/api/v1/assets/{copy.id}", {"expected_version": 2, "body": "v3"}, format="json",
                    HTTP_X_NYLON_ORG="gamma")
    assert r.status_code == 200, r.content
    after = _counts(gamma)
    f = tmp_path / "alpha.jsonl"
    f.write_text(exported)
    call_command("import_memory", "--org", "gamma", str(f))
    assert _counts(gamma) == after
    assert list(Asset.objects.get(org=gamma).versions.values_list("body", flat=True).order_by("version")) == [
        "v1", "v2", "v3"]


def test_rows_new_in_a_later_export_are_imported_and_linked_to_those_already_there(world, client_for, exported):
    a = world["a"]
    gamma = _twin_org(world)
    admin = client_for(a.admin)
    assert _import(admin, exported, "gamma").status_code == 201
    _weave(admin, "Orion signed on the 12th.")  # joins the session: new edges to an old node
    later = b"".join(admin.get("/api/v1/export").streaming_content).decode()
    before = _counts(gamma)
    r = _import(admin, later, "gamma")
    assert r.status_code == 201, r.content
    assert r.json()["node"] == 1 and r.json()["asset"] == 0
    assert _counts(gamma)[0] == before[0] + 1
    new = Node.objects.get(org=gamma, text="Orion signed on the 12th.")
    assert Edge.objects.filter(org=gamma).filter(dst=new).exists() or Edge.objects.filter(src=new).exists()


def test_identical_memories_in_one_file_stay_two_and_a_re_run_matches_each(world, client_for, exported):
    gamma = _twin_org(world)
    admin = client_for(world["a"].admin)
    lines = exported.splitlines()
    i = next(j for j, x in enumerate(lines) if json.loads(x)["type"] == "node" and not json.loads(x)["event_id"])
    twin = {**json.loads(lines[i]), "id": 10 ** 9}
    text = "\n".join([*lines, json.dumps(twin)])
    assert _import(admin, text, "gamma").json()["node"] == 4
    r = _import(admin, text, "gamma")
    assert r.json()["node"] == 0 and _counts(gamma)[0] == 4


def test_the_same_event_twice_in_one_file_is_a_400_naming_both_lines(world, client_for, exported):
    gamma = _twin_org(world)
    lines = exported.splitlines()
    i = next(j for j, x in enumerate(lines) if json.loads(x).get("event_id") == "crm-1")
    dup = {**json.loads(lines[i]), "id": 10 ** 9, "text": "another text"}
    r = _import(client_for(world["a"].admin), "\n".join([*lines, json.dumps(dup)]), "gamma")
    assert r.status_code == 400
    assert r.json()["error"]["fields"]["jsonl"] == [
        f"line {len(lines) + 1}: event_id: The same owner and event_id as line {i + 1}."]
    assert _counts(gamma) == (0, 0, 0, 0)


def test_a_collision_with_a_row_written_meanwhile_names_its_line_and_writes_nothing(world, client_for,
                                                                                     exported, monkeypatch):
    """The look-up of rows already there cannot see a row another writer commits after it: the
    unique constraint still refuses it, by line, and the import is rolled back."""
    from assets import porting

    gamma = _twin_org(world)
    admin = client_for(world["a"].admin)
    assert _import(admin, exported, "gamma").status_code == 201
    before = _counts(gamma)
    monkeypatch.setattr(porting, "_existing_nodes", lambda org, plan: {})  # as if written after the look-up
    r = _import(admin, exported, "gamma")
    assert r.status_code == 400, r.content
    i = next(j for j, x in enumerate(exported.splitlines()) if json.loads(x).get("event_id") == "crm-1")
    assert r.json()["error"]["fields"]["jsonl"] == [
        f"line {i + 1}: event_id: Collides with a row already in the organisation (node_event_idempotent); "
        "nothing was imported."]
    assert _counts(gamma) == before
