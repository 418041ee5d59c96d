"""The agent's own ``GET agents/{id}/bindings`` named each bound asset by its stored title: the title
of an edit awaiting review (never approved), and that of an asset its owner has since made private
(a 404 everywhere else). To the agent's key a binding now names the asset as ``GET assets/{id}``
gives it: the served version's title, or null when nothing of it is served to the agent; its note
no longer says that a newer version awaits review. Admins listing the bindings see the asset as it
is."""

from __future__ import annotations

import pytest

from .helpers import create_asset
from .test_approved_edit_review import APPROVED_TEXT, _approved_team_skill, fresh_cache  # noqa: F401

pytestmark = pytest.mark.django_db

PENDING_TITLE = "Pending title: rotate the prod DB password on Friday"
PRIVATE_TITLE = "Carol's private notes: layoffs list"


def _bindings(client, agent_id) -> dict[int, dict]:
    r = client.get(f"/api/v1/agents/{agent_id}/bindings")
    assert r.status_code == 200, r.content
    return {b["asset_id"]: b for b in r.json()["results"]}


def test_agent_is_named_the_served_title_not_a_pending_one(world, client_for):
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    r = carol.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "title": PENDING_TITLE}, format="json")
    assert r.status_code == 200 and r.json()["status"] == "candidate", r.content
    bot = client_for(a.key)
    assert bot.get(f"/api/v1/assets/{aid}").json()["title"] == "Deploys"

    row = _bindings(bot, a.agent.id)[aid]
    assert row["asset_title"] == "Deploys" and row["served_version"] == 1 and row["served"] is True
    assert row["note"] == ""  # nor that version 2 awaits approval
    r = bot.get(f"/api/v1/agents/{a.agent.id}/bindings")
    assert PENDING_TITLE not in r.content.decode()

    # the admin who reviews it sees the asset as it is
    row = _bindings(bob, a.agent.id)[aid]
    assert row["asset_title"] == PENDING_TITLE and "version 2 awaits approval" in row["note"]


def test_agent_is_not_named_an_asset_made_private_by_its_owner(world, client_for):
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    r = carol.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "visibility": "private",
                                              "title": PRIVATE_TITLE}, format="json")
    assert r.status_code == 200, r.content
    bot = client_for(a.key)
    assert bot.get(f"/api/v1/assets/{aid}").status_code == 404

    r = bot.get(f"/api/v1/agents/{a.agent.id}/bindings")
    assert PRIVATE_TITLE not in r.content.decode() and "Deploys" not in r.content.decode()
    row = _bindings(bot, a.agent.id)[aid]
    assert row["asset_title"] is None and row["served"] is False
    # why it gets nothing is still said (a pending edit made the note blank before)
    assert "no longer includes the agent" in row["note"] and PRIVATE_TITLE not in row["note"]


def test_agent_is_named_its_own_candidate_and_nothing_of_a_bound_asset_never_approved(world, client_for):
    a = world["a"]
    admin, bot = client_for(a.admin), client_for(a.key)
    own = create_asset(bot, title="Bot scratchpad", body="draft")["id"]
    r = bot.post(f"/api/v1/assets/{own}/promote", {"visibility": "team"}, format="json")
    assert r.status_code == 200, r.content  # a candidate its approvers (the admin) may read and bind
    never = create_asset(admin, title="Org wiki draft", body="x", visibility="org")["id"]
    for aid in (own, never):
        r = admin.post(f"/api/v1/agents/{a.agent.id}/bindings", {"asset_id": aid}, format="json")
        assert r.status_code == 201, r.content
    rows = _bindings(bot, a.agent.id)
    assert rows[own]["asset_title"] == "Bot scratchpad"  # its own asset: as GET gives it to its owner
    assert rows[never]["asset_title"] is None and rows[never]["served"] is False
    assert bot.get(f"/api/v1/assets/{never}").status_code == 404
    assert _bindings(admin, a.agent.id)[never]["asset_title"] == "Org wiki draft"
