"""Export/import of an org's memory as JSONL: commands round-trip; API for org admins only."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from assets.models import Asset, AssetVersion, AuditEvent
from memory.models import Edge, Node
from teams.models import Agent, Membership, Organization, Role, Team

from .helpers import create_asset, weave

pytestmark = pytest.mark.django_db


def _populate(world, client_for):
    a = world["a"]
    weave(client_for(a.member), "I keep my notes in Obsidian.", session="m1")
    weave(client_for(a.member), "Obsidian sync costs eight dollars.", session="m1")
    weave(client_for(a.key), "The Orion deal closes in June.", visibility="org", session="b1")
    weave(client_for(a.key), "Orion legal review is on Tuesday.", visibility="team", session="b1")
    asset = create_asset(client_for(a.member), kind="skill", title="Deploy", body="v1")
    client_for(a.member).patch(f"/api/v1/assets/{asset['id']}", {"expected_version": 1, "body": "v2"},
                               format="json")
    create_asset(client_for(a.admin), kind="persona", visibility="org", title="Tone", body="terse")


def _snapshot(org) -> dict:
    texts = dict(Node.objects.filter(org=org).values_list("id", "text"))
    nodes = sorted((n.text, n.visibility, n.kind, n.owner_user.username if n.owner_user_id else None,
                    n.owner_agent.name if n.owner_agent_id else None, n.team.slug if n.team_id else None,
                    n.session_key, n.seq, n.occurred_at, n.embedded,
                    None if n.embedding is None else round(float(sum(n.embedding)), 4))
                   for n in Node.objects.filter(org=org).select_related("owner_user", "owner_agent", "team"))
    edges = sorted((texts[e.src_id], texts[e.dst_id], e.kind, e.weight) for e in Edge.objects.filter(org=org))
    assets = sorted((x.kind, x.title, x.body, x.version, x.status, x.visibility, x.content_hash,
                     tuple((v.version, v.body, v.content_hash) for v in x.versions.order_by("version")))
                    for x in Asset.objects.filter(org=org))
    return {"nodes": nodes, "edges": edges, "assets": assets}


def _twin_org(world) -> Organization:
    a = world["a"]
    gamma = Organization.objects.create(name="Gamma", slug="gamma")
    for u, role in ((a.owner, Role.OWNER), (a.admin, Role.ADMIN), (a.member, Role.MEMBER)):
        Membership.objects.create(org=gamma, user=u, role=role)
    team = Team.objects.create(org=gamma, name="core", slug="core")
    Agent.objects.create(org=gamma, name=a.agent.name, team=team)
    return gamma


def test_commands_round_trip(world, client_for, tmp_path):
    _populate(world, client_for)
    out = tmp_path / "alpha.jsonl"
    call_command("export_memory", "--org", "alpha", "--out", str(out))
    lines = out.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "header"
    assert {json.loads(x)["type"] for x in lines[1:]} == {"node", "edge", "asset", "asset_version"}
    gamma = _twin_org(world)
    call_command("import_memory", "--org", "gamma", str(out))
    assert _snapshot(gamma) == _snapshot(world["a"].org)
    assert AssetVersion.objects.filter(org=gamma).count() == 3


def test_rows_whose_owner_is_missing_are_skipped_not_reassigned(world, client_for, tmp_path):
    _populate(world, client_for)
    out = tmp_path / "alpha.jsonl"
    call_command("export_memory", "--org", "alpha", "--out", str(out))
    beta = world["b"].org  # nobody of alpha is in beta
    from assets.porting import import_lines

    counts = import_lines(beta, out.read_text().splitlines())
    assert counts["node"] == 0 and counts["asset"] == 0 and counts["skipped"] > 0
    assert Node.objects.filter(org=beta).count() == 0
    # ... and the answer says whose rows were left out
    a = world["a"]
    nodes_and_assets = sum(1 for x in map(json.loads, out.read_text().splitlines()) if x["type"] in ("node", "asset"))
    assert counts["unowned"] == nodes_and_assets
    assert f"agent:{a.agent.name}" in counts["missing"] and f"user:{a.admin.username}" in counts["missing"]


def test_the_import_command_warns_when_rows_have_no_owner_here(world, client_for, tmp_path, capsys):
    _populate(world, client_for)
    out = tmp_path / "alpha.jsonl"
    call_command("export_memory", "--org", "alpha", "--out", str(out))
    call_command("import_memory", "--org", "beta", str(out))
    err = capsys.readouterr().err
    assert "rows were skipped: their owners or teams do not exist in 'beta'" in err
    assert f"agent:{world['a'].agent.name}" in err


def test_api_export_is_for_org_admins_and_keeps_others_private_rows_out(world, client_for):
    a = world["a"]
    _populate(world, client_for)
    for who in (a.member, a.key, world["outsider"]):
        assert client_for(who).get("/api/v1/export").status_code == 403
    r = client_for(a.admin).get("/api/v1/export")
    assert r.status_code == 200 and r["Content-Type"] == "application/x-ndjson"
    rows = [json.loads(x) for x in b"".join(r.streaming_content).decode().splitlines()]
    texts = {x.get("text") for x in rows if x["type"] == "node"}
    assert texts == {"The Orion deal closes in June."}  # not the member's private or the team's rows
    assert {x["title"] for x in rows if x["type"] == "asset"} == {"Tone"}
    # import through the API into another org whose admin is also alpha's admin
    gamma = _twin_org(world)
    jsonl = "\n".join(json.dumps(x) for x in rows)
    c = client_for(a.admin)
    assert client_for(a.member).post("/api/v1/import", {"jsonl": jsonl}, format="json",
                                     HTTP_X_NYLON_ORG="gamma").status_code == 403
    r = c.post("/api/v1/import", {"jsonl": jsonl}, format="json", HTTP_X_NYLON_ORG="gamma")
    assert r.status_code == 201 and r.json()["node"] == 1 and r.json()["asset"] == 1
    assert Node.objects.filter(org=gamma).count() == 1
    assert c.post("/api/v1/import", {"jsonl": "{\"type\": \"node\"}"}, format="json",
                  HTTP_X_NYLON_ORG="gamma").status_code == 400


# --- values the engine cache maps: an unknown one broke every resonate of the org ------------------


@pytest.fixture
def fresh_cache():
    from memory.cache import get_cache

    get_cache().drop()
    yield get_cache()
    get_cache().drop()


def _exported_rows(world, client_for, tmp_path) -> list[dict]:
    """Everything of alpha an org admin may import through the API (nodes, an edge chain, assets,
    versions), header first: the operator's export without the member's private rows."""
    _populate(world, client_for)
    out = tmp_path / "alpha.jsonl"
    call_command("export_memory", "--org", "alpha", "--out", str(out))
    return _without_members_private([json.loads(x) for x in out.read_text().splitlines()])


def _members_private(row: dict) -> bool:
    return (row["type"] in ("node", "asset") and row.get("visibility") in ("private", "restricted")
            and bool(row.get("owner_user")))


def _without_members_private(rows: list[dict]) -> list[dict]:
    gone = {(r["type"], r["id"]) for r in rows if _members_private(r)}
    return [r for r in rows if not _members_private(r)
            and not (r["type"] == "edge" and {("node", r["src"]), ("node", r["dst"])} & gone)
            and not (r["type"] == "asset_version" and ("asset", r["asset"]) in gone)]


def test_api_import_may_not_write_into_a_members_private_memory(world, client_for, tmp_path):
    """An org admin cannot read a member's private memory, so the API import may not plant any in
    it either; agents' private rows pass (the admin mints agents' keys), and the operator's command
    restores everything."""
    a = world["a"]
    _populate(world, client_for)
    out = tmp_path / "alpha.jsonl"
    call_command("export_memory", "--org", "alpha", "--out", str(out))
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    private = [i + 1 for i, r in enumerate(rows) if _members_private(r)]
    assert private
    gamma = _twin_org(world)
    r = _post_import(client_for(a.admin), rows)
    assert r.status_code == 400, r.content
    listed = r.json()["error"]["fields"]["jsonl"]
    assert {m.split(":")[0] for m in listed} == {f"line {n}" for n in private}
    assert all("owner_user" in m and "alpha-member" in m for m in listed)
    assert _counts(gamma) == (0, 0, 0, 0)
    # the same rows owned by the importer pass
    mine = [{**r, "owner_user": a.admin.username} if _members_private(r) else r for r in rows]
    assert _post_import(client_for(a.admin), mine).status_code == 201
    call_command("import_memory", "--org", "gamma", str(out))  # the operator's restore takes all


def _post_import(client, rows: list[dict]):
    return client.post("/api/v1/import", {"jsonl": "\n".join(json.dumps(x) for x in rows)}, format="json",
                       HTTP_X_NYLON_ORG="gamma")


def _counts(org) -> tuple[int, int, int, int]:
    return (Node.objects.filter(org=org).count(), Edge.objects.filter(org=org).count(),
            Asset.objects.filter(org=org).count(), AssetVersion.objects.filter(org=org).count())


@pytest.mark.parametrize("row_type,column,value", [
    ("node", "kind", "note"), ("node", "visibility", "public"), ("node", "source_kind", "scraper"),
    ("edge", "kind", "follows"), ("asset", "visibility", "public"),
], ids=["node-kind", "node-visibility", "node-source-kind", "edge-kind", "asset-visibility"])
def test_api_import_refuses_unknown_values_writes_nothing_and_resonate_still_answers(
        world, client_for, tmp_path, fresh_cache, row_type, column, value):
    a = world["a"]
    rows = _exported_rows(world, client_for, tmp_path)
    gamma = _twin_org(world)
    admin = client_for(a.admin)
    assert _post_import(admin, rows).status_code == 201  # the file as exported imports
    before = _counts(gamma)
    assert before[0] and before[1]
    # the last row of the type goes bad, so valid rows before it would have been written
    i = max(j for j, r in enumerate(rows) if r["type"] == row_type)
    bad = [*rows[:i], {**rows[i], column: value}, *rows[i + 1:]]
    r = _post_import(admin, bad)
    assert r.status_code == 400, r.content
    message = r.json()["error"]["fields"]["jsonl"][0]
    assert message.startswith(f"line {i + 1}: {column}: ") and value in message  # line 1 is the header
    assert _counts(gamma) == before  # nothing written
    assert AuditEvent.objects.filter(org=gamma, action="org.import").count() == 1  # only the good import
    # the org's index still builds, and resonate answers from it
    r = admin.post("/api/v1/memories/resonate", {"query": "Orion deal", "reinforce": False}, format="json",
                   HTTP_X_NYLON_ORG="gamma")
    assert r.status_code == 200, r.content
    assert "The Orion deal closes in June." in [h["text"] for h in r.json()["hits"]]
    assert fresh_cache.get(gamma.id).n == before[0]


def test_import_lines_names_every_bad_line_and_the_command_refuses_the_file(world, client_for, tmp_path,
                                                                            fresh_cache):
    from django.core.management.base import CommandError

    from assets.porting import ImportInvalid, import_lines

    rows = _exported_rows(world, client_for, tmp_path)
    nodes = [j for j, r in enumerate(rows) if r["type"] == "node"]
    edge = next(j for j, r in enumerate(rows) if r["type"] == "edge")
    rows[nodes[0]] = {**rows[nodes[0]], "visibility": "public"}
    rows[nodes[1]] = {**rows[nodes[1]], "kind": None}
    rows[edge] = {k: v for k, v in rows[edge].items() if k != "kind"}
    gamma = _twin_org(world)
    with pytest.raises(ImportInvalid) as exc:
        import_lines(gamma, [json.dumps(x) for x in rows])
    assert set(exc.value.errors) == {str(nodes[0] + 1), str(nodes[1] + 1), str(edge + 1)}
    assert set(exc.value.errors[str(nodes[0] + 1)]) == {"visibility"}
    assert set(exc.value.errors[str(nodes[1] + 1)]) == {"kind"}
    assert exc.value.errors[str(edge + 1)] == {"kind": ["This field is required."]}
    assert _counts(gamma) == (0, 0, 0, 0)
    fresh_cache.get(gamma.id)  # builds (it raised KeyError('public') once such a row was in)
    # the API lists every bad line, each with its column
    r = _post_import(client_for(world["a"].admin), rows)
    assert r.status_code == 400, r.content
    listed = r.json()["error"]["fields"]["jsonl"]
    assert {m.split(":")[0] for m in listed} == {f"line {n + 1}" for n in (nodes[0], nodes[1], edge)}
    assert f"line {edge + 1}: kind: This field is required." in listed
    assert _counts(gamma) == (0, 0, 0, 0)
    # the operator command reads the file as the API reads the body: refused, nothing written
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(x) for x in rows))
    with pytest.raises(CommandError, match=rf"^line {nodes[0] + 1}: visibility: "):
        call_command("import_memory", "--org", "gamma", str(bad))
    assert _counts(gamma) == (0, 0, 0, 0)


def test_every_model_value_is_one_the_engine_cache_maps():
    """Import accepts exactly the models' choices; the cache must be able to map each of them."""
    from memory.cache import EDGE, KIND, SCOPE
    from memory.models import EdgeKind, NodeKind, Visibility

    assert set(NodeKind.values) == set(KIND)
    assert set(Visibility.values) == set(SCOPE)
    assert set(EdgeKind.values) == set(EDGE)


def test_an_export_from_before_approved_at_keeps_its_served_version_approved(world, client_for, tmp_path):
    """Exports made before versions recorded their approval carry no ``approved_at``: the served
    version comes in approved (as the migration marks it), or agents got an empty history."""
    from .helpers import approve

    a = world["a"]
    admin = client_for(a.admin)
    aid = create_asset(admin, kind="skill", visibility="org", title="Ops", body="Page the on-call.")["id"]
    admin.post(f"/api/v1/assets/{aid}/transition", {"to": "candidate"}, format="json")
    approve(admin, aid)
    out = tmp_path / "alpha.jsonl"
    call_command("export_memory", "--org", "alpha", "--out", str(out))
    old = [json.dumps({k: v for k, v in json.loads(x).items() if k != "approved_at"})
           for x in out.read_text().splitlines()]
    out.write_text("\n".join(old) + "\n")
    gamma = _twin_org(world)
    call_command("import_memory", "--org", "gamma", str(out))
    imported = Asset.objects.get(org=gamma, title="Ops")
    assert imported.approved_version == 1
    assert AssetVersion.objects.get(asset=imported, version=1).approved_at is not None
