"""An agent reading a bound asset over REST was given its current text: an edit awaiting review
(or sent back to draft) reached the agent through ``GET assets/{id}``, the list and the versions,
while its context and ``memory_get`` served the approved version. REST now gives an agent every
asset it does not own as it is served; its owner and people keep reading (and reviewing) the
current version."""

from __future__ import annotations

import pytest

from .helpers import create_asset, last_event, moved
from .test_approved_edit_review import APPROVED_TEXT, INJECTION, _approved_team_skill, _edit, fresh_cache  # noqa: F401

pytestmark = pytest.mark.django_db


def _listed(client, aid):
    r = client.get("/api/v1/assets")
    assert r.status_code == 200, r.content
    return [row for row in r.json()["results"] if row["id"] == aid]


def test_agent_rest_reads_of_a_bound_asset_serve_the_approved_version(world, client_for):
    a = world["a"]
    aid, carol, bob = _approved_team_skill(world, client_for)
    assert _edit(carol, aid, 1, INJECTION)["status"] == "candidate"
    bot = client_for(a.key)

    r = bot.get(f"/api/v1/assets/{aid}")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["body"] == APPROVED_TEXT and body["version"] == 1 and body["served_version"] == 1
    assert body["status"] == "approved" and body["pending_version"] is None  # what it is served is approved
    assert INJECTION not in r.content.decode()

    [row] = _listed(bot, aid)
    assert row["body"] == APPROVED_TEXT and row["version"] == 1

    r = bot.get(f"/api/v1/assets/{aid}/versions")
    assert r.status_code == 200 and [v["version"] for v in r.json()["results"]] == [1]
    assert INJECTION not in r.content.decode()
    assert bot.get(f"/api/v1/assets/{aid}/versions/2").status_code == 404
    assert bot.get(f"/api/v1/assets/{aid}/versions/1").json()["body"] == APPROVED_TEXT

    # The people who review it see the pending version.
    for person in (carol, bob):
        got = person.get(f"/api/v1/assets/{aid}").json()
        assert got["body"] == INJECTION and got["version"] == 2 and got["pending_version"] == 2
        assert [v["version"] for v in person.get(f"/api/v1/assets/{aid}/versions").json()["results"]] == [2, 1]

    # Sent back to draft: still the approved version for the agent.
    assert bob.post(f"/api/v1/assets/{aid}/transition", {"to": "draft"}, format="json").status_code == 200
    assert bot.get(f"/api/v1/assets/{aid}").json()["body"] == APPROVED_TEXT

    # Approved: the agent is given the new version.
    bob.post(f"/api/v1/assets/{aid}/transition", {"to": "candidate"}, format="json")
    # (carol may propose it again; bob approves)
    assert bob.post(f"/api/v1/assets/{aid}/transition", moved(aid, "approved"), format="json").status_code == 200
    got = bot.get(f"/api/v1/assets/{aid}").json()
    assert got["body"] == INJECTION and got["version"] == 2


def test_agent_gets_nothing_of_a_bound_asset_never_approved(world, client_for):
    a = world["a"]
    admin, bot = client_for(a.admin), client_for(a.key)
    aid = create_asset(admin, kind="persona", visibility="org", title="Voice", body="Unreviewed.")["id"]
    r = admin.post(f"/api/v1/agents/{a.agent.id}/bindings", {"asset_id": aid}, format="json")
    assert r.status_code == 201 and r.json()["served"] is False

    assert bot.get(f"/api/v1/assets/{aid}").status_code == 404
    ev = last_event(a.org, action="asset.read", object_id=str(aid))
    assert ev.outcome == "denied" and ev.reason == "not_served"
    assert _listed(bot, aid) == []
    assert bot.get(f"/api/v1/assets/{aid}/versions").status_code == 404
    assert bot.get(f"/api/v1/assets/{aid}/versions/1").status_code == 404
    assert admin.get(f"/api/v1/assets/{aid}").json()["body"] == "Unreviewed."  # people still read it


def test_an_agent_reads_its_own_assets_current_version(world, client_for):
    a = world["a"]
    bot = client_for(a.key)
    aid = create_asset(bot, kind="skill", title="Bot notes", body="Draft notes.")["id"]
    assert bot.get(f"/api/v1/assets/{aid}").json()["body"] == "Draft notes."
    [row] = _listed(bot, aid)
    assert row["body"] == "Draft notes."
    _edit(bot, aid, 1, "Second draft.")
    assert bot.get(f"/api/v1/assets/{aid}").json()["version"] == 2
    assert [v["version"] for v in bot.get(f"/api/v1/assets/{aid}/versions").json()["results"]] == [2, 1]


def test_node_governance_names_a_bound_asset_as_the_agent_is_served_it(world, client_for):
    """A memory's governance lists the assets holding it: for an agent, as served (its title and
    versions), not the edit awaiting review."""
    from .helpers import weave
    from .test_approved_edit_review import _team_admin

    a = world["a"]
    carol, bob, bot = client_for(a.member), client_for(_team_admin(a)), client_for(a.key)
    nid = weave(carol, "The deploy window is Tuesday.", visibility="team", team_id=a.team.id)
    aid = create_asset(carol, kind="chat_memory", title="Deploy facts", node_ids=[nid])["id"]
    assert carol.post(f"/api/v1/assets/{aid}/promote", {"visibility": "team", "team_id": a.team.id},
                      format="json").status_code == 200
    assert bob.post(f"/api/v1/assets/{aid}/transition", moved(aid, "approved"), format="json").status_code == 200
    assert bob.post(f"/api/v1/agents/{a.agent.id}/bindings", {"asset_id": aid}, format="json").status_code == 201
    r = carol.patch(f"/api/v1/assets/{aid}", {"expected_version": 1, "title": INJECTION[:200]}, format="json")
    assert r.status_code == 200 and r.json()["status"] == "candidate"

    r = bot.get(f"/api/v1/memories/nodes/{nid}/governance")
    assert r.status_code == 200, r.content
    [entry] = r.json()["lineage"]["assets"]
    assert entry["title"] == "Deploy facts" and entry["version"] == 1
    assert [v["version"] for v in entry["versions"]] == [1]
    assert INJECTION not in r.content.decode()
    [entry] = carol.get(f"/api/v1/memories/nodes/{nid}/governance").json()["lineage"]["assets"]
    assert entry["title"] == INJECTION[:200] and entry["version"] == 2
