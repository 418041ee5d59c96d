"""The answers to writes (``PATCH assets/{id}``, ``…/transition``, ``…/promote``) serialised the asset
as stored, without the agent view of the reads. An agent holding a write grant on a restricted asset
it does not own, served version 1 by ``GET``, was handed the whole unapproved body of another
member's edit by a PATCH that changed nothing; and to its own asset's PATCH an agent got a move
note's ``by`` with the full email address that ``GET`` hides.

An agent's write is now answered as its reads are: an asset it does not own as it is served, except
a version it has just saved on top of the served one (it sees what it wrote); when nothing of the
asset is served to it, without content."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from teams.models import Membership, Role, TeamMembership, TeamRole

from .helpers import grant
from .test_approved_edit_review import APPROVED_TEXT, INJECTION, _approved_team_skill, _edit, fresh_cache  # noqa: F401

pytestmark = pytest.mark.django_db


def _agent_writer(world, client_for):
    """carol's approved team skill, narrowed to restricted with a write grant to the team's agent
    (bound to it), and an edit of hers awaiting review (she may not approve a restricted target)."""
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    r = carol.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "visibility": "restricted"}, format="json")
    assert r.status_code == 200, r.content
    grant(carol, "asset", aid, grantee_kind="agent", agent_id=a.agent.id, permission="write")
    return aid, carol, bob, client_for(a.key)


def test_agent_writer_cannot_write_on_another_members_pending_edit(world, client_for):
    """It is served version 1 while carol's version 2 awaits review: a write at version 1 is stale,
    and the 409 does not name the current version; one at a guessed version 2 is refused alike (it
    would put the agent's name under text no approver has seen, and answer with it)."""
    aid, carol, _bob, bot = _agent_writer(world, client_for)
    assert _edit(carol, aid, 1, INJECTION)["status"] == "candidate"
    got = bot.get(f"/api/v1/assets/{aid}").json()
    assert got["body"] == APPROVED_TEXT and got["version"] == 1

    for version, change in ((1, {}), (1, {"title": "Deploys (typo fixed)"}), (2, {}),
                            (2, {"title": "Deploys (typo fixed)"})):
        r = bot.patch(f"/api/v1/assets/{aid}", {"expected_version": version, **change}, format="json")
        assert r.status_code == 409, r.content
        text = r.content.decode()
        assert INJECTION not in text and "version 2" not in text and "read it again" in text
    assert carol.get(f"/api/v1/assets/{aid}").json()["version"] == 2  # nothing written
    # people still get the number (they read the current version)
    r = carol.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "title": "x"}, format="json")
    assert r.status_code == 409 and "at version 2" in r.content.decode()


def test_agent_writer_may_write_again_on_its_own_pending_edit(world, client_for):
    aid, _carol, _bob, bot = _agent_writer(world, client_for)
    r = bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "Deploy blue-green."}, format="json")
    assert r.status_code == 200 and r.json()["version"] == 2
    r = bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 2, "body": "Deploy blue-green; page on-call."},
                  format="json")
    assert r.status_code == 200, r.content
    assert r.json()["version"] == 3 and r.json()["body"] == "Deploy blue-green; page on-call."


def test_agent_writer_sees_what_it_wrote_on_the_served_version(world, client_for):
    aid, carol, _bob, bot = _agent_writer(world, client_for)
    r = bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "Deploy blue-green; page on-call."},
                  format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["body"] == "Deploy blue-green; page on-call." and body["title"] == "Deploys"
    assert body["version"] == 2 and body["status"] == "candidate"  # agents never approve
    assert body["served_version"] == 1 and body["pending_version"] == 2
    # its reads stay the served version until an approver approves its edit
    assert bot.get(f"/api/v1/assets/{aid}").json()["body"] == APPROVED_TEXT


def test_agent_writer_moving_an_asset_gets_no_unapproved_text(world, client_for):
    aid, carol, _bob, bot = _agent_writer(world, client_for)
    _edit(carol, aid, 1, INJECTION)
    # withdrawn: nothing of it is served any more, so the answer carries no content
    r = bot.post(f"/api/v1/assets/{aid}/transition", {"to": "deprecated"}, format="json")
    assert r.status_code == 200, r.content
    assert INJECTION not in r.content.decode() and APPROVED_TEXT not in r.content.decode()
    body = r.json()
    assert body["status"] == "deprecated" and body["served_version"] is None
    assert body["title"] == body["body"] == body["summary"] == "" and body["node_ids"] == []
    assert carol.get(f"/api/v1/assets/{aid}").json()["body"] == INJECTION  # nothing lost


def test_agent_writes_of_its_own_asset_hide_email_addresses(world, client_for):
    a = world["a"]
    boss = get_user_model().objects.create_user("boss@corp.example", "boss@corp.example", "pw-boss-123")
    Membership.objects.create(org=a.org, user=boss, role=Role.MEMBER)
    TeamMembership.objects.create(org=a.org, team=a.team, user=boss, role=TeamRole.ADMIN)
    bot = client_for(a.key)
    r = bot.post("/api/v1/assets", {"kind": "wiki", "title": "Bot page", "body": "x"}, format="json")
    assert r.status_code == 201, r.content
    aid = r.json()["id"]
    assert bot.post(f"/api/v1/assets/{aid}/promote", {"visibility": "team"}, format="json").status_code == 200
    r = client_for(boss).post(f"/api/v1/assets/{aid}/transition", {"to": "draft", "note": "no"}, format="json")
    assert r.status_code == 200, r.content
    assert "boss@corp.example" not in bot.get(f"/api/v1/assets/{aid}").content.decode()

    r = bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "confidence": 0.5}, format="json")
    assert r.status_code == 200, r.content
    assert "boss@corp.example" not in r.content.decode()
    assert r.json()["last_move_note"]["by"] == "user:boss" and r.json()["body"] == "x"  # its own: current

    r = bot.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "body": "y"}, format="json")
    assert r.status_code == 200 and "boss@corp.example" not in r.content.decode(), r.content
    assert r.json()["body"] == "y" and r.json()["version"] == 2
    r = bot.post(f"/api/v1/assets/{aid}/promote", {"visibility": "team", "expected_version": 2}, format="json")
    assert r.status_code == 200 and "boss@corp.example" not in r.content.decode(), r.content
    # the person who wrote the note still reads it in full
    assert client_for(boss).get(f"/api/v1/assets/{aid}").json()["last_move_note"]["by"] == "user:boss@corp.example"
