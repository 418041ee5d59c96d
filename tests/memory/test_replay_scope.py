"""A retry under a stored event_id that names another visibility, team or time is a 409, not a
success: a first-user audit retried a team memory's write as "private" and got a 200 while the memory
stayed readable by the team (the answer does not echo the visibility, so nothing told the client).
What a retry leaves out is the writer's default and matches anything stored."""

from __future__ import annotations

import pytest

from memory.models import Node
from teams.models import Agent, Team
from teams.services import api_key_create

from .test_weave_replay_codes import BULK, SESSION, WEAVE, _snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def key(world):
    return world["a"].key  # an agent of the alpha core team


def _first(c, **extra) -> int:
    r = c.post(WEAVE, {"text": "The staging password rotates on Fridays.", "event_id": "w1",
                       "occurred_at": "2026-11-20T10:00:00Z", "visibility": "team", **extra}, format="json")
    assert r.status_code == 201, r.content
    return r.json()["node_ids"][0]


@pytest.mark.parametrize(("change", "what"), [
    ({"visibility": "private"}, "visibility"),
    ({"visibility": "org"}, "visibility"),
    ({"occurred_at": "2026-11-20T11:00:00Z"}, "occurred_at"),
    ({"occurred_at": "2026-11-20T10:00:00"}, ""),  # a naive time in the default zone (UTC): the same
])
def test_weave_retry_naming_another_scope_or_time(world, client_for, key, change, what):
    c = client_for(key)
    node = _first(c)
    before = _snapshot(world)
    r = c.post(WEAVE, {"text": "The staging password rotates on Fridays.", "event_id": "w1", **change},
               format="json")
    if not what:
        assert r.status_code == 200 and r.json()["node_ids"] == [node]
        return
    assert r.status_code == 409, r.content
    err = r.json()["error"]
    assert err["code"] == "event_id_reused" and f"different {what}" in err["message"]
    assert err["fields"] == {"event_id": [f"Already stored (memory {node}) with a different {what}; "
                                          "an event_id is a retry's key."]}
    assert _snapshot(world) == before
    assert Node.objects.get(id=node).visibility == "team"


def test_a_retry_that_leaves_scope_and_time_out_is_a_replay(world, client_for, key):
    c = client_for(key)
    node = _first(c, visibility="org")
    r = c.post(WEAVE, {"text": "The staging password rotates on Fridays.", "event_id": "w1"}, format="json")
    assert r.status_code == 200 and r.json()["node_ids"] == [node]
    # the same scope named again is a replay too
    r = c.post(WEAVE, {"text": "The staging password rotates on Fridays.", "event_id": "w1", "visibility": "org",
                       "occurred_at": "2026-11-20T10:00:00+00:00"}, format="json")
    assert r.status_code == 200 and r.json()["node_ids"] == [node]


def test_a_retry_naming_another_team_is_a_409(world, client_for):
    a = world["a"]
    Team.objects.create(org=a.org, name="alpha web", slug="web")
    c = client_for(a.member)  # a person: may name the teams they are in
    r = c.post(WEAVE, {"text": "Runbook lives in Notion.", "event_id": "m1", "visibility": "org"}, format="json")
    assert r.status_code == 201
    r = c.post(WEAVE, {"text": "Runbook lives in Notion.", "event_id": "m1", "visibility": "org",
                       "team_id": a.team.id}, format="json")
    assert r.status_code == 409 and "different team_id" in r.json()["error"]["message"]


def test_weave_session_and_bulk_check_the_named_scope(world, client_for, key):
    c = client_for(key)
    turns = [{"speaker": "Ana", "text": "Cutover is on the 4th.", "event_id": "e1",
              "occurred_at": "2026-11-20T10:00:00Z"}]
    assert c.post(SESSION, {"session_key": "s", "turns": turns, "visibility": "team"},
                  format="json").status_code == 201
    before = _snapshot(world)
    r = c.post(SESSION, {"session_key": "s", "turns": turns, "visibility": "private"}, format="json")
    assert r.status_code == 409 and "visibility" in r.json()["error"]["fields"]["turns"]["0"]["event_id"][0]
    r = c.post(BULK, [{"session_key": "s", "turns": turns, "visibility": "private"}], format="json")
    assert r.status_code == 409
    assert "visibility" in r.json()["error"]["fields"]["sessions"]["0"]["turns"]["0"]["event_id"][0]
    moved = [{**turns[0], "occurred_at": "2026-11-21T10:00:00Z"}]
    r = c.post(BULK, [{"session_key": "s", "turns": moved}], format="json")
    assert r.status_code == 409 and "occurred_at" in r.content.decode()
    assert _snapshot(world) == before
    # the exact replay, with or without the scope it was stored with
    for body in ([{"session_key": "s", "turns": turns}], [{"session_key": "s", "turns": turns, "visibility": "team"}]):
        again = c.post(BULK, body, format="json")
        assert again.status_code == 200 and again.json()["created"] == 0


def test_another_agents_default_is_not_compared(world, client_for):
    """A retry that names no visibility matches what was stored, whatever the writer's default now is."""
    a = world["a"]
    agent = Agent.objects.create(org=a.org, name="solo", default_visibility="private")
    c = client_for(api_key_create(actor=None, agent=agent, name="k")[1])
    r = c.post(WEAVE, {"text": "Solo note.", "event_id": "s1", "visibility": "org"}, format="json")
    assert r.status_code == 201
    assert c.post(WEAVE, {"text": "Solo note.", "event_id": "s1"}, format="json").status_code == 200
