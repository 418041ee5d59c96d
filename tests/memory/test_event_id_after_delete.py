"""An event id dedupes against the writer's live memories only. Written, deleted and written again
with the same event id, a memory answered 200 ``created: 0`` with the deleted node's id (a 404 to
GET), so ``nylon weave`` of the same file after a delete never brought it back ("0 new, 2 already
stored"). Now the write after the delete is a new memory (201, a new id, found by resonate), on
every path that takes event ids; exact replays of live memories stay 200 and a live event id with
other text stays a 409."""

from __future__ import annotations

import pytest

from memory import services
from memory.cache import get_cache
from memory.models import Node
from teams.auth import actor_for_agent
from teams.models import Scope

pytestmark = pytest.mark.django_db

WEAVE = "/api/v1/memories/weave"
SESSION = "/api/v1/memories/weave-session"
BULK = "/api/v1/memories/bulk"
TURN = {"text": "The idempotency test memory lives in the fjord archive.", "event_id": "idem-1", "session_key": "s"}


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


def _hits(client, query: str = "fjord archive") -> list[int]:
    r = client.post("/api/v1/memories/resonate", {"query": query, "k": 10, "reinforce": False}, format="json")
    assert r.status_code == 200, r.content
    return [h["node_id"] for h in r.json()["hits"]]


def test_weave_after_a_delete_writes_a_new_memory(world, client_for):
    c = client_for(world["a"].key)
    first = c.post(WEAVE, TURN, format="json")
    assert first.status_code == 201
    old = first.json()["node_ids"][0]
    assert old in _hits(c)  # warm cache
    assert c.delete(f"/api/v1/memories/nodes/{old}").status_code == 204

    again = c.post(WEAVE, TURN, format="json")
    assert again.status_code == 201, again.content
    body = again.json()
    new = body["node_ids"][0]
    assert body["created"] == 1 and new != old and body["event_ids"] == {"idem-1": new}
    assert c.get(f"/api/v1/memories/nodes/{new}").status_code == 200
    assert c.get(f"/api/v1/memories/nodes/{old}").status_code == 404
    hits = _hits(c)
    assert new in hits and old not in hits
    # the new memory is now what the event id names: an exact replay is a 200 with it ...
    replay = c.post(WEAVE, TURN, format="json")
    assert replay.status_code == 200 and replay.json()["node_ids"] == [new] and replay.json()["created"] == 0
    # ... and other text under it a 409 naming it, nothing written
    clash = c.post(WEAVE, {**TURN, "text": "Something else entirely."}, format="json")
    assert clash.status_code == 409 and clash.json()["error"]["code"] == "event_id_reused"
    assert f"memory {new}" in clash.json()["error"]["message"]
    rows = Node.objects.filter(event_id="idem-1").order_by("id").values_list("id", "deleted_at")
    assert [(nid, gone is None) for nid, gone in rows] == [(old, False), (new, True)]


def test_weave_session_after_a_delete_writes_only_the_deleted_turn_again(world, client_for):
    c = client_for(world["a"].key)
    turns = [{"text": "We booked the Lisbon offsite for March 14.", "event_id": "e1"},
             {"text": "I will reserve the Alfama venue.", "event_id": "e2"}]
    first = c.post(SESSION, {"session_key": "trip", "turns": turns}, format="json").json()["node_ids"]
    assert c.delete(f"/api/v1/memories/nodes/{first[0]}").status_code == 204
    again = c.post(SESSION, {"session_key": "trip", "turns": turns}, format="json")
    assert again.status_code == 201, again.content
    ids = again.json()["node_ids"]
    assert again.json()["created"] == 1 and ids[1] == first[1] and ids[0] not in first
    assert ids[0] in _hits(c, "Lisbon offsite")
    replay = c.post(SESSION, {"session_key": "trip", "turns": turns}, format="json")
    assert replay.status_code == 200 and replay.json()["node_ids"] == ids


def test_bulk_after_a_delete_writes_a_new_memory(world, client_for):
    c = client_for(world["a"].key)
    sessions = [{"session_key": "trip", "turns": [{"text": "We booked the Lisbon offsite.", "event_id": "b1"},
                                                  {"text": "The fjord archive opens at nine.", "event_id": "b2"}]}]
    first = c.post(BULK, sessions, format="json")
    assert first.status_code == 201
    ids = first.json()["node_ids"]
    assert c.delete(f"/api/v1/memories/nodes/{ids[1]}").status_code == 204
    again = c.post(BULK, sessions, format="json")
    assert again.status_code == 201, again.content
    body = again.json()
    assert (body["created"], body["existing"]) == (1, 1)
    assert body["node_ids"][0] == ids[0] and body["node_ids"][1] not in ids
    assert c.get(f"/api/v1/memories/nodes/{body['node_ids'][1]}").status_code == 200
    assert body["node_ids"][1] in _hits(c)
    replay = c.post(BULK, sessions, format="json")
    assert replay.status_code == 200 and replay.json()["node_ids"] == body["node_ids"]
    changed = [{"session_key": "trip", "turns": [sessions[0]["turns"][0], {"text": "Other.", "event_id": "b2"}]}]
    assert c.post(BULK, changed, format="json").status_code == 409


def test_the_mcp_and_service_path_after_a_delete(world):
    """MCP ``memory_weave`` and the proxy's write-back call ``weave_session``."""
    a = world["a"]
    actor = actor_for_agent(a.agent, scopes=frozenset({Scope.READ, Scope.WRITE}))
    turn = [services.TurnIn(text="The fjord archive key is in drawer four.", event_id="mcp-1")]
    first = services.weave_session(actor=actor, turns=turn)
    services.node_delete(actor=actor, node=Node.objects.get(id=first.node_ids[0]))
    again = services.weave_session(actor=actor, turns=turn)
    assert again.created == 1 and again.node_ids != first.node_ids


def test_a_concurrent_rewrite_after_a_delete_is_not_a_500(world, client_for, monkeypatch):
    """Another request writes the deleted event id again between this weave's check and its insert:
    the partial index refuses the second row under the constraint's own name, so the weave's retry
    recognises it (a 201, not a 500)."""
    c = client_for(world["a"].key)
    old = c.post(WEAVE, TURN, format="json").json()["node_ids"][0]
    assert c.delete(f"/api/v1/memories/nodes/{old}").status_code == 204
    real = services._leaf_silks
    agent = world["a"].agent
    raced = []

    def racing(t, occurred):
        if not raced:
            raced.append(True)
            Node.objects.create(org=world["a"].org, owner_agent=agent, text=TURN["text"], event_id="idem-1",
                                session_key="s", occurred_at=occurred, tension_updated_at=occurred)
        return real(t, occurred)

    monkeypatch.setattr(services, "_leaf_silks", racing)
    r = c.post(WEAVE, TURN, format="json")
    assert r.status_code == 201, r.content
    assert Node.objects.filter(event_id="idem-1", deleted_at__isnull=True).count() == 1
