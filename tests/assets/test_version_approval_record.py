"""Which versions of an asset were approved is recorded on the version (``approved_at``). An agent
read an asset's history as "every version up to the served one", which let it read an edit that an
approver had sent back (v1 approved, v2 rejected, v3 approved: v2 was in the agent's list). Agents
now read only the approved versions; people see which ones were approved."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model

from assets.models import AssetVersion

from .helpers import approve
from .test_approved_edit_review import APPROVED_TEXT, INJECTION, _approved_team_skill, _edit, fresh_cache  # noqa: F401

pytestmark = pytest.mark.django_db

FIXED = "Deploy with the blue-green runbook; page the on-call first; note it in #ops."


def _v1_approved_v2_rejected_v3_approved(world, client_for):
    aid, carol, bob = _approved_team_skill(world, client_for)
    assert _edit(carol, aid, 1, INJECTION)["status"] == "candidate"
    assert bob.post(f"/api/v1/assets/{aid}/transition", {"to": "draft"}, format="json").status_code == 200
    _edit(bob, aid, 2, FIXED)  # an edit of the draft: v3, not yet approved
    assert approve(bob, aid)["served_version"] == 3
    return aid, carol, bob


def _versions(client, aid):
    r = client.get(f"/api/v1/assets/{aid}/versions")
    assert r.status_code == 200, r.content
    return r.json()["results"]


def test_agents_read_only_approved_versions(world, client_for):
    aid, carol, bob = _v1_approved_v2_rejected_v3_approved(world, client_for)
    bot = client_for(world["a"].key)

    rows = _versions(bot, aid)
    assert [v["version"] for v in rows] == [3, 1]
    assert INJECTION not in str(rows)
    assert bot.get(f"/api/v1/assets/{aid}/versions/2").status_code == 404
    assert bot.get(f"/api/v1/assets/{aid}/versions/1").json()["body"] == APPROVED_TEXT

    # People read every version and see which were approved.
    for person in (carol, bob):
        rows = {v["version"]: v for v in _versions(person, aid)}
        assert sorted(rows) == [1, 2, 3]
        assert rows[1]["approved_at"] and rows[3]["approved_at"] and rows[2]["approved_at"] is None


def test_an_approvers_own_edit_is_recorded_approved(world, client_for):
    aid, carol, bob = _approved_team_skill(world, client_for)
    assert _edit(bob, aid, 1, FIXED)["served_version"] == 2
    assert _edit(carol, aid, 2, INJECTION)["status"] == "candidate"  # v3 awaits review
    rows = {v["version"]: v["approved_at"] for v in _versions(bob, aid)}
    assert rows[1] and rows[2] and rows[3] is None
    assert [v["version"] for v in _versions(client_for(world["a"].key), aid)] == [2, 1]


def test_the_console_marks_approved_versions(world, client_for, client):
    aid, _carol, _bob = _v1_approved_v2_rejected_v3_approved(world, client_for)
    client.force_login(get_user_model().objects.get(username="alpha-bob"))  # the team admin who approved
    html = client.get(f"/console/assets/{aid}/").content.decode()
    row = {v: html.split(f'<tr data-version="{v}"', 1)[1].split("</tr>", 1)[0] for v in (1, 2, 3)}
    assert "served" in row[3] and ">approved<" in row[1] and ">approved<" not in row[2]


def test_the_migration_recovers_approvals_from_the_audit(world, client_for):
    """Versions saved before the column existed: the served one, and the ones the audit says were
    approved (its entries carry the version since the approval gate)."""
    aid, _carol, _bob = _v1_approved_v2_rejected_v3_approved(world, client_for)
    AssetVersion.objects.filter(asset_id=aid).update(approved_at=None)
    migration = __import__("assets.migrations.0005_assetversion_approved_at", fromlist=["approved_versions"])
    migration.approved_versions(apps, None)
    got = dict(AssetVersion.objects.filter(asset_id=aid).values_list("version", "approved_at"))
    assert got[1] is not None and got[3] is not None and got[2] is None
