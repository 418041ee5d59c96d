"""An agent with a write grant may write again on its own edit awaiting review, and on no one
else's. Its own was told by the version's author label, "agent:<name>": renamed, the agent lost its
own edit, and a new agent given its former name could sign under text no approver had seen. The
version now records its author by id (``AssetVersion.author_agent`` / ``author_user``)."""

from __future__ import annotations

import json

import pytest
from django.apps import apps
from django.db import connection

from assets.models import AgentBinding, AssetVersion
from teams import services as team_services
from teams.models import Agent

from .helpers import grant
from .test_agent_write_answers import _agent_writer
from .test_approved_edit_review import fresh_cache  # noqa: F401

pytestmark = pytest.mark.django_db


def _rename_and_reuse_the_name(world, client_for, carol, aid):
    """The owner renames the team's agent; a new agent of the team takes its former name and gets
    the same write grant and binding."""
    a = world["a"]
    old_name = a.agent.name
    r = client_for(a.owner).patch(f"/api/v1/agents/{a.agent.id}", {"name": "bot-retired"}, format="json")
    assert r.status_code == 200, r.content
    newcomer = Agent.objects.create(org=a.org, name=old_name, team=a.team)
    _, key = team_services.api_key_create(actor=None, agent=newcomer, name="test")
    grant(carol, "asset", aid, grantee_kind="agent", agent_id=newcomer.id, permission="write")
    # bound as the team's agent was while the asset was the team's (no one may bind it now that
    # it is restricted: its owner is no admin, the admins do not read it)
    AgentBinding.objects.create(org=a.org, agent=newcomer, asset_id=aid, mode="full")
    return client_for(key)


def test_a_new_agent_with_a_former_name_cannot_write_on_the_others_pending_edit(world, client_for):
    aid, carol, _bob, bot = _agent_writer(world, client_for)
    r = bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "Deploy blue-green."}, format="json")
    assert r.status_code == 200 and r.json()["version"] == 2
    newcomer = _rename_and_reuse_the_name(world, client_for, carol, aid)

    r = newcomer.patch(f"/api/v1/assets/{aid}", {"expected_version": 2, "body": "Deploy on Fridays."},
                       format="json")
    assert r.status_code == 409, r.content
    assert "Deploy blue-green." not in r.content.decode()
    assert AssetVersion.objects.filter(asset_id=aid).count() == 2  # nothing written

    # the renamed agent still writes on its own edit
    r = bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 2, "body": "Deploy blue-green; page on-call."},
                  format="json")
    assert r.status_code == 200, r.content
    assert r.json()["version"] == 3
    v3 = AssetVersion.objects.get(asset_id=aid, version=3)
    assert v3.author_agent_id == world["a"].agent.id and v3.author_label == "agent:bot-retired"


def test_people_are_recorded_by_id_too(world, client_for):
    aid, _carol, _bob, _bot = _agent_writer(world, client_for)
    v1 = AssetVersion.objects.get(asset_id=aid, version=1)
    assert v1.author_user_id == world["a"].member.id and v1.author_agent_id is None


def _backfill(migration):
    with connection.schema_editor() as schema_editor:
        migration.authors_from_labels(apps, schema_editor)


def test_the_migration_names_authors_from_labels_but_not_a_later_namesake(world, client_for):
    """Versions saved before the columns: the label names the agent that bore the name then; an
    agent created after the version is not its author."""
    aid, carol, _bob, bot = _agent_writer(world, client_for)
    r = bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "Deploy blue-green."}, format="json")
    assert r.status_code == 200
    AssetVersion.objects.filter(asset_id=aid).update(author_agent=None, author_user=None)
    migration = __import__("assets.migrations.0006_assetversion_author", fromlist=["authors_from_labels"])
    _backfill(migration)
    got = {v.version: (v.author_user_id, v.author_agent_id) for v in AssetVersion.objects.filter(asset_id=aid)}
    assert got[1] == (world["a"].member.id, None) and got[2] == (None, world["a"].agent.id)

    # renamed, with a namesake made afterwards: the old label matches only the namesake, which is
    # younger than the version, so the version is left without an author id
    _rename_and_reuse_the_name(world, client_for, carol, aid)
    AssetVersion.objects.filter(asset_id=aid).update(author_agent=None, author_user=None)
    _backfill(migration)
    assert AssetVersion.objects.get(asset_id=aid, version=2).author_agent_id is None


# --- export/import: authors travel by their current names, never ids; the import maps them back ---


def _export(tmp_path, slug: str = "alpha") -> list[str]:
    from django.core.management import call_command

    out = tmp_path / f"{slug}.jsonl"
    call_command("export_memory", "--org", slug, "--out", str(out))
    return out.read_text().splitlines()


def test_after_a_restore_the_agent_still_writes_on_its_own_pending_edit(world, client_for, tmp_path):
    """The asset is exported, lost and imported back: the agent's edit awaiting review is its own
    again (the author id was left empty, and the agent was refused what the label had allowed)."""
    from assets.models import Asset
    from assets.porting import import_lines

    a = world["a"]
    aid, carol, _bob, bot = _agent_writer(world, client_for)
    r = bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "Deploy blue-green."}, format="json")
    assert r.status_code == 200 and r.json()["version"] == 2
    lines = _export(tmp_path)
    Asset.objects.filter(id=aid).delete()

    counts = import_lines(a.org, lines)
    assert counts["asset"] == 1 and counts["asset_version"] == 2
    restored = Asset.objects.get(org=a.org, title="Deploys")
    got = {v.version: (v.author_user_id, v.author_agent_id) for v in restored.versions.all()}
    assert got == {1: (a.member.id, None), 2: (None, a.agent.id)}
    # grants and bindings are not exported: given again
    grant(carol, "asset", restored.id, grantee_kind="agent", agent_id=a.agent.id, permission="write")
    AgentBinding.objects.create(org=a.org, agent=a.agent, asset=restored, mode="full")
    r = bot.patch(f"/api/v1/assets/{restored.id}", {"expected_version": 2, "body": "Deploy blue-green; page on-call."},
                  format="json")
    assert r.status_code == 200, r.content
    assert r.json()["version"] == 3


def test_an_import_maps_authors_by_name_in_the_target_org_only(world, client_for, tmp_path):
    """Into another org: the agent of that org bearing the name, the member with the username;
    a name the org has no agent or member of is no author (never someone else's id)."""
    from assets.porting import import_lines
    from teams.models import Membership, Organization, Role, Team

    a = world["a"]
    aid, _carol, _bob, bot = _agent_writer(world, client_for)
    assert bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "Deploy blue-green."},
                     format="json").status_code == 200
    lines = _export(tmp_path)

    gamma = Organization.objects.create(name="Gamma", slug="gamma")
    Membership.objects.create(org=gamma, user=a.member, role=Role.MEMBER)
    team = Team.objects.create(org=gamma, name="core", slug="core")
    gamma_bot = Agent.objects.create(org=gamma, name=a.agent.name, team=team)
    assert import_lines(gamma, lines)["asset_version"] == 2
    got = {v.version: (v.author_user_id, v.author_agent_id) for v in AssetVersion.objects.filter(org=gamma)}
    assert got == {1: (a.member.id, None), 2: (None, gamma_bot.id)}

    # delta has the member but no agent of that name; the version's author names no member of it
    delta = Organization.objects.create(name="Delta", slug="delta")
    Membership.objects.create(org=delta, user=a.member, role=Role.MEMBER)
    Team.objects.create(org=delta, name="core", slug="core")
    Agent.objects.create(org=delta, name="someone-else")
    rows = [json.loads(x) for x in lines]
    for row in rows:
        if row["type"] == "asset_version" and row["version"] == 1:
            row["author_user"] = world["b"].member.username  # a member of beta, not of delta
    assert import_lines(delta, [json.dumps(x) for x in rows])["asset_version"] == 2
    got = {v.version: (v.author_user_id, v.author_agent_id) for v in AssetVersion.objects.filter(org=delta)}
    assert got == {1: (None, None), 2: (None, None)}


def _restore(lines: list[str], org, carol, agents: list[Agent]):
    """Import ``lines`` into ``org`` and give the restored asset's write grant and binding back to
    ``agents`` (grants and bindings are not exported)."""
    from assets.models import Asset
    from assets.porting import import_lines

    counts = import_lines(org, lines)
    assert counts["asset"] == 1 and counts["asset_version"] == 2, counts
    restored = Asset.objects.get(org=org, title="Deploys")
    for agent in agents:
        grant(carol, "asset", restored.id, grantee_kind="agent", agent_id=agent.id, permission="write")
        AgentBinding.objects.create(org=org, agent=agent, asset=restored, mode="full")
    return restored


def test_a_restore_keeps_a_renamed_agents_pending_edit_from_the_agent_now_bearing_its_name(
        world, client_for, tmp_path):
    """The label of the pending edit names the agent's former name, now borne by a newcomer: the
    export carries the author by its current name, so the restore gives the edit back to the
    renamed agent and the newcomer is refused as it was before."""
    from assets.models import Asset

    a = world["a"]
    aid, carol, _bob, bot = _agent_writer(world, client_for)
    r = bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "Deploy blue-green."}, format="json")
    assert r.status_code == 200 and r.json()["version"] == 2
    newcomer_client = _rename_and_reuse_the_name(world, client_for, carol, aid)
    newcomer = Agent.objects.get(org=a.org, name=AssetVersion.objects.get(asset_id=aid, version=2)
                                 .author_label.partition(":")[2])
    on_top = {"expected_version": 2, "body": "Deploy on Fridays."}
    assert newcomer_client.patch(f"/api/v1/assets/{aid}", on_top, format="json").status_code == 409

    lines = _export(tmp_path)
    Asset.objects.filter(id=aid).delete()
    restored = _restore(lines, a.org, carol, [a.agent, newcomer])
    v2 = restored.versions.get(version=2)
    assert (v2.author_agent_id, v2.author_user_id) == (a.agent.id, None)
    assert restored.versions.get(version=1).author_user_id == a.member.id

    r = newcomer_client.patch(f"/api/v1/assets/{restored.id}", on_top, format="json")
    assert r.status_code == 409, r.content
    assert "Deploy blue-green." not in r.content.decode()
    assert restored.versions.count() == 2  # nothing written
    r = bot.patch(f"/api/v1/assets/{restored.id}",
                  {"expected_version": 2, "body": "Deploy blue-green; page on-call."}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["version"] == 3


def test_an_export_names_version_authors_by_their_current_names(world, client_for, tmp_path):
    aid, carol, _bob, bot = _agent_writer(world, client_for)
    assert bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "Deploy blue-green."},
                     format="json").status_code == 200
    _rename_and_reuse_the_name(world, client_for, carol, aid)
    rows = {r["version"]: r for r in map(json.loads, _export(tmp_path)) if r["type"] == "asset_version"}
    a = world["a"]
    assert (rows[1]["author_user"], rows[1]["author_agent"]) == (a.member.username, None)
    assert (rows[2]["author_user"], rows[2]["author_agent"]) == (None, "bot-retired")
    assert rows[2]["author_label"] != "agent:bot-retired"  # the label keeps the name it was saved under
    assert not {"author_agent_id", "author_user_id"} & set(rows[2])  # no ids


def test_an_export_from_before_the_author_names_falls_back_to_the_label(world, client_for, tmp_path):
    """A file written before versions carried their authors' names: the label is all there is."""
    from assets.models import Asset

    a = world["a"]
    aid, carol, _bob, bot = _agent_writer(world, client_for)
    assert bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "Deploy blue-green."},
                     format="json").status_code == 200
    rows = [json.loads(x) for x in _export(tmp_path)]
    for row in rows:
        if row["type"] == "asset_version":
            del row["author_agent"], row["author_user"]
    Asset.objects.filter(id=aid).delete()
    restored = _restore([json.dumps(x) for x in rows], a.org, carol, [a.agent])
    got = {v.version: (v.author_user_id, v.author_agent_id) for v in restored.versions.all()}
    assert got == {1: (a.member.id, None), 2: (None, a.agent.id)}
    r = bot.patch(f"/api/v1/assets/{restored.id}",
                  {"expected_version": 2, "body": "Deploy blue-green; page on-call."}, format="json")
    assert r.status_code == 200, r.content


def test_a_file_names_authors_never_by_id(world, client_for, tmp_path):
    """Authors travel as names resolved among the importing org's agents and members: a column of
    ids is refused, and so is a name that is no string. When the row has the author fields they,
    not the label, decide: a name the org has no agent of is no author, and so is an author the
    source no longer had (both null), though the label names an agent of the org."""
    from assets.models import Asset
    from assets.porting import ImportInvalid, import_lines

    a = world["a"]
    aid, carol, _bob, bot = _agent_writer(world, client_for)
    assert bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "Deploy blue-green."},
                     format="json").status_code == 200
    rows = [json.loads(x) for x in _export(tmp_path)]
    v2 = next(i for i, r in enumerate(rows) if r["type"] == "asset_version" and r["version"] == 2)

    def with_v2(**change) -> list[str]:
        return [json.dumps({**r, **change} if i == v2 else r) for i, r in enumerate(rows)]

    for forged, column in (({"author_agent_id": world["b"].agent.id}, "author_agent_id"),
                           ({"author_user_id": world["b"].member.id}, "author_user_id"),
                           ({"author_agent": a.agent.id}, "author_agent"),
                           ({"author_user": [a.member.username]}, "author_user")):
        with pytest.raises(ImportInvalid) as exc:
            import_lines(a.org, with_v2(**forged))
        assert list(exc.value.errors) == [str(v2 + 1)] and column in exc.value.errors[str(v2 + 1)], forged

    Asset.objects.filter(id=aid).delete()
    Agent.objects.filter(id=world["b"].agent.id).update(name="beta-only-bot")
    restored = _restore(with_v2(author_agent="beta-only-bot"), a.org, carol, [])
    assert restored.versions.get(version=2).author_agent_id is None
    restored.delete()
    restored = _restore(with_v2(author_agent=None, author_user=None), a.org, carol, [])
    assert restored.versions.get(version=2).author_agent_id is None
