from __future__ import annotations

import pytest

from memory.models import Edge, Node

pytestmark = pytest.mark.django_db

SESSION = {
    "session_key": "trip-1",
    "turns": [
        {"speaker": "Ana", "text": "We booked the Lisbon offsite for March 14.", "event_id": "e1",
         "occurred_at": "2026-02-01T10:00:00Z"},
        {"speaker": "Ben", "text": "Great, Ana. I will reserve the Alfama venue tomorrow!", "event_id": "e2",
         "occurred_at": "2026-02-01T10:01:00Z"},
        {"speaker": "Ana", "text": "Ben prefers window seats on the flight to Lisbon.", "event_id": "e3",
         "occurred_at": "2026-02-01T10:02:00Z"},
    ],
}


def test_weave_session_writes_leaves_with_silks_and_edges(world, client_for):
    r = client_for(world["a"].key).post("/api/v1/memories/weave-session", SESSION, format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["created"] == 3 and body["embedded"] is True
    assert set(body["event_ids"]) == {"e1", "e2", "e3"}
    nodes = {n.event_id: n for n in Node.objects.filter(id__in=body["node_ids"])}
    assert nodes["e1"].text == SESSION["turns"][0]["text"]  # verbatim
    assert nodes["e1"].owner_agent_id == world["a"].agent.id and nodes["e1"].org_id == world["a"].org.id
    assert "Lisbon" in nodes["e1"].entities
    assert nodes["e2"].time_refs and nodes["e2"].time_refs[0]["start"] == "2026-02-02"  # "tomorrow"
    assert nodes["e2"].valence > 0  # "Great … !"
    assert [nodes[e].seq for e in ("e1", "e2", "e3")] == [0, 1, 2]
    assert nodes["e1"].embedding is not None and len(nodes["e1"].embedding) == 384
    kinds = set(Edge.objects.filter(org=world["a"].org).values_list("kind", flat=True))
    assert {"temporal_next", "entity"} <= kinds
    assert Edge.objects.filter(src=nodes["e1"], dst=nodes["e2"], kind="temporal_next").exists()


def test_weave_is_idempotent_on_event_ids(world, client_for):
    c = client_for(world["a"].key)
    first = c.post("/api/v1/memories/weave-session", SESSION, format="json").json()
    again = c.post("/api/v1/memories/weave-session", SESSION, format="json").json()
    assert again["created"] == 0 and again["node_ids"] == first["node_ids"]
    assert Node.objects.filter(org=world["a"].org).count() == 3


def test_continuing_a_session_links_to_its_last_turn(world, client_for):
    c = client_for(world["a"].key)
    first = c.post("/api/v1/memories/weave-session", SESSION, format="json").json()
    r = c.post("/api/v1/memories/weave", {"text": "Venue confirmed.", "session_key": "trip-1"}, format="json")
    assert r.status_code == 201
    new = Node.objects.get(id=r.json()["node_ids"][0])
    assert new.seq == 3
    assert Edge.objects.filter(src_id=first["event_ids"]["e3"], dst=new, kind="temporal_next").exists()


@pytest.mark.parametrize("body,field", [
    ({"session_key": "s", "turns": []}, "turns"),
    ({"session_key": "s", "turns": [{"text": "   "}]}, "turns"),
    ({"session_key": "s", "turns": [{"text": 42, "speaker": ["x"]}]}, "turns"),
    ({"session_key": "s", "turns": [{"text": "x" * 20_001}]}, "turns"),
    ({"session_key": "s", "turns": [{"text": "ok", "when": "typo"}]}, "turns"),
    ({"turns": [{"text": "ok"}]}, "session_key"),
    ({"session_key": "s", "turns": [{"text": "ok"}], "visibility": "secret"}, "visibility"),
    ({"session_key": "s", "turns": [{"text": "ok", "occurred_at": "yesterday-ish"}]}, "turns"),
])
def test_bad_input_is_400_and_writes_nothing(world, client_for, body, field):
    r = client_for(world["a"].key).post("/api/v1/memories/weave-session", body, format="json")
    assert r.status_code == 400, r.content
    assert field in r.json()["error"]["fields"]
    assert Node.objects.count() == 0


def test_read_only_key_cannot_weave(world, client_for):
    from teams import services
    from teams.models import Scope

    _, ro = services.api_key_create(actor=None, agent=world["a"].agent, scopes=[Scope.READ])
    r = client_for(ro).post("/api/v1/memories/weave", {"text": "hello"}, format="json")
    assert r.status_code == 403 and Node.objects.count() == 0


def test_team_visibility_needs_own_team(world, client_for):
    r = client_for(world["a"].key).post(
        "/api/v1/memories/weave", {"text": "x", "visibility": "team", "team_id": world["b"].team.id}, format="json")
    assert r.status_code == 400 and "team_id" in r.json()["error"]["fields"]
    r = client_for(world["a"].key).post("/api/v1/memories/weave", {"text": "shared", "visibility": "team"},
                                        format="json")
    assert r.status_code == 201
    assert Node.objects.get(id=r.json()["node_ids"][0]).team_id == world["a"].team.id


def test_similar_edges_link_to_the_nearest_earlier_memories(world, client_for):
    c = client_for(world["a"].key)
    first = c.post("/api/v1/memories/weave", {"text": "The nightly backup job failed because the disk was full."},
                   format="json").json()["node_ids"][0]
    c.post("/api/v1/memories/weave", {"text": "Lunch options near the office include ramen and tacos."},
           format="json")
    again = c.post("/api/v1/memories/weave", {"text": "Nightly backup job failed again: the disk is full."},
                   format="json").json()["node_ids"][0]
    similar = set(Edge.objects.filter(dst_id=again, kind="similar").values_list("src_id", flat=True))
    assert first in similar
    assert len(similar) == 1  # the unrelated lunch note is below the cosine threshold


@pytest.mark.parametrize("body", [
    {"text": "It was 10000 years ago"},
    {"text": "That happened 99999999 days ago."},
])
def test_time_expressions_past_the_calendar_are_stored_not_a_500(world, client_for, body):
    """Ordinary text whose time expression resolves outside years 1-9999 is written verbatim, with
    that expression left unresolved (it used to raise in the temporal silk and answer 500)."""
    r = client_for(world["a"].key).post("/api/v1/memories/weave", body, format="json")
    assert r.status_code == 201, r.content
    node = Node.objects.get(id=r.json()["node_ids"][0])
    assert node.text == body["text"] and node.time_refs == []


def _agent(world):
    from teams.auth import actor_for_agent
    from teams.models import Scope

    return actor_for_agent(world["a"].agent, scopes=frozenset({Scope.READ, Scope.WRITE}))


def test_tomorrow_on_the_calendars_last_day_is_left_unresolved(world, client_for):
    """The API refuses a turn dated that far ahead (more than a day from now); a write that reaches
    the service another way (an import, the proxy's write-back) still stores it verbatim, unresolved."""
    from datetime import UTC, datetime

    from memory import services

    body = {"text": "we deploy tomorrow", "occurred_at": "9999-12-31T12:00:00Z"}
    r = client_for(world["a"].key).post("/api/v1/memories/weave", body, format="json")
    assert r.status_code == 400 and "future" in r.json()["error"]["fields"]["occurred_at"][0]
    turn = services.TurnIn(text=body["text"], occurred_at=datetime(9999, 12, 31, 12, tzinfo=UTC))
    node = Node.objects.get(id=services.weave_session(actor=_agent(world), turns=[turn]).node_ids[0])
    assert node.text == body["text"] and node.time_refs == []


def test_a_turn_past_the_calendar_does_not_fail_the_others_in_bulk(world, client_for):
    from datetime import UTC, datetime

    from memory import services

    turns = [{"text": "It was 10000 years ago", "event_id": "far"},
             {"text": "I moved here yesterday", "occurred_at": "2023-05-08T10:00:00Z", "event_id": "near"}]
    r = client_for(world["a"].key).post("/api/v1/memories/bulk", [{"session_key": "s", "turns": turns}],
                                        format="json")
    assert r.status_code == 201, r.content
    edge = services.TurnIn(text="we deploy tomorrow", occurred_at=datetime(9999, 12, 31, 12, tzinfo=UTC),
                           event_id="edge")
    services.bulk_ingest(actor=_agent(world), sessions=[services.SessionIn(session_key="s2", turns=[edge])],
                         embed=False)
    nodes = {n.event_id: n for n in Node.objects.filter(org=world["a"].org)}
    assert set(nodes) == {"far", "edge", "near"}
    assert nodes["far"].time_refs == [] and nodes["edge"].time_refs == []
    assert nodes["near"].time_refs[0]["start"] == "2023-05-07"
