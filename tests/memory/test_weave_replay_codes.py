"""Replays on every path that takes event_ids (first-user audit): an exact replay that created nothing
answers 200, not 201; an event_id already stored with another text, speaker or session is a 409
event_id_reused naming it, with nothing written (it used to answer the stored memory and echo the
new session key). The proxy's write-back keeps its first answer (proxy.writeback.turns_for)."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from memory import services
from memory.cache import get_cache
from memory.models import MemorySession, Node, SourceKind
from teams.auth import actor_for_agent
from teams.models import Scope

pytestmark = pytest.mark.django_db

WEAVE = "/api/v1/memories/weave"
SESSION = "/api/v1/memories/weave-session"
BULK = "/api/v1/memories/bulk"

TURNS = [{"speaker": "Ana", "text": "We booked the Lisbon offsite for March 14.", "event_id": "e1"},
         {"speaker": "Ben", "text": "I will reserve the Alfama venue.", "event_id": "e2"}]


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


def _snapshot(world) -> tuple:
    org = world["a"].org
    return (sorted(Node.objects.filter(org=org).values_list("id", "text", "speaker", "session_key")),
            sorted(MemorySession.objects.filter(org=org).values_list("key", "turn_count", "ended_at")))


def test_weave_session_replay_answers_200(world, client_for):
    c = client_for(world["a"].key)
    first = c.post(SESSION, {"session_key": "trip", "turns": TURNS}, format="json")
    assert first.status_code == 201 and first.json()["created"] == 2
    again = c.post(SESSION, {"session_key": "trip", "turns": TURNS}, format="json")
    assert again.status_code == 200, again.content
    assert again.json()["created"] == 0 and again.json()["node_ids"] == first.json()["node_ids"]
    # one new turn among replayed ones created something: 201
    more = c.post(SESSION, {"session_key": "trip", "turns": [*TURNS, {"text": "Venue confirmed.", "event_id": "e3"}]},
                  format="json")
    assert more.status_code == 201 and more.json()["created"] == 1


def test_weave_replay_answers_200(world, client_for):
    c = client_for(world["a"].key)
    body = {"text": "Venue confirmed.", "event_id": "w1", "session_key": "trip", "speaker": "Ana"}
    first = c.post(WEAVE, body, format="json")
    assert first.status_code == 201
    again = c.post(WEAVE, body, format="json")
    assert again.status_code == 200, again.content
    assert again.json()["created"] == 0 and again.json()["node_ids"] == first.json()["node_ids"]
    # without an event_id every call is a new memory
    assert c.post(WEAVE, {"text": "Venue confirmed."}, format="json").status_code == 201
    assert c.post(WEAVE, {"text": "Venue confirmed."}, format="json").status_code == 201


def test_weave_with_a_reused_event_id_and_other_text_is_a_409(world, client_for):
    c = client_for(world["a"].key)
    first = c.post(WEAVE, {"text": "The locker code is 1234.", "event_id": "w1", "session_key": "s1"},
                   format="json").json()
    before = _snapshot(world)
    r = c.post(WEAVE, {"text": "The locker code is 9021.", "event_id": "w1", "session_key": "s2"}, format="json")
    assert r.status_code == 409, r.content
    err = r.json()["error"]
    assert err["code"] == "event_id_reused"
    node = first["node_ids"][0]
    assert "'w1'" in err["message"] and f"memory {node}" in err["message"]
    assert "text and session_key" in err["message"] and "nothing was written" in err["message"]
    assert err["fields"] == {"event_id": [f"Already stored (memory {node}) with a different text and session_key; "
                                          "an event_id is a retry's key."]}
    assert "s2" not in r.content.decode()  # the new session key is not echoed back as if stored
    assert _snapshot(world) == before


@pytest.mark.parametrize("change,what", [
    ({"text": "We booked the Porto offsite for March 14."}, "text"),
    ({"speaker": "Ben"}, "speaker"),
    ({"speaker": ""}, "speaker"),
])
def test_weave_session_with_a_changed_turn_is_a_409_on_that_turn(world, client_for, change, what):
    c = client_for(world["a"].key)
    c.post(SESSION, {"session_key": "trip", "turns": TURNS}, format="json")
    before = _snapshot(world)
    turns = [{**TURNS[0], **change}, TURNS[1], {"text": "A new turn.", "event_id": "e9"}]
    r = c.post(SESSION, {"session_key": "trip", "turns": turns}, format="json")
    assert r.status_code == 409, r.content
    err = r.json()["error"]
    node = Node.objects.get(event_id="e1").id
    assert err["code"] == "event_id_reused" and f"different {what}:" in err["message"]
    assert err["fields"] == {"turns": {"0": {"event_id": [
        f"Already stored (memory {node}) with a different {what}; an event_id is a retry's key."]}}}
    assert _snapshot(world) == before  # not even the new turn e9


def test_weave_session_replayed_into_another_session_is_a_409(world, client_for):
    c = client_for(world["a"].key)
    c.post(SESSION, {"session_key": "trip", "turns": TURNS}, format="json")
    before = _snapshot(world)
    r = c.post(SESSION, {"session_key": "other", "turns": TURNS, "end_session": True}, format="json")
    assert r.status_code == 409, r.content
    fields = r.json()["error"]["fields"]["turns"]
    assert set(fields) == {"0", "1"} and "session_key" in fields["1"]["event_id"][0]
    assert "2 event_ids are already stored" in r.json()["error"]["message"]
    assert _snapshot(world) == before


def test_event_ids_are_per_writer(world, client_for):
    """Another agent's (or org's) e1 is not this writer's: no clash, a new memory."""
    client_for(world["a"].key).post(SESSION, {"session_key": "trip", "turns": TURNS}, format="json")
    r = client_for(world["b"].key).post(SESSION, {"session_key": "x", "turns": [{**TURNS[0], "text": "other"}]},
                                        format="json")
    assert r.status_code == 201, r.content


def test_bulk_with_a_changed_replay_refuses_the_whole_request(world, client_for):
    c = client_for(world["a"].key)
    assert c.post(BULK, [{"session_key": "trip", "turns": TURNS}], format="json").status_code == 201
    before = _snapshot(world)
    sessions = [{"session_key": "new", "turns": [{"text": "Something new.", "event_id": "n1"}]},
                {"session_key": "trip", "turns": [TURNS[0], {**TURNS[1], "text": "I will reserve the Baixa venue."}]}]
    r = c.post(BULK, sessions, format="json")
    assert r.status_code == 409, r.content
    err = r.json()["error"]
    node = Node.objects.get(event_id="e2").id
    assert err["code"] == "event_id_reused" and "'e2'" in err["message"]
    assert err["fields"] == {"sessions": {"1": {"turns": {"1": {"event_id": [
        f"Already stored (memory {node}) with a different text; an event_id is a retry's key."]}}}}}
    assert _snapshot(world) == before  # all or nothing: not session 0 either
    # as JSON lines too
    body = "\n".join(json.dumps(s) for s in sessions)
    assert c.post(BULK, body, content_type="application/x-ndjson").status_code == 409
    # the exact replay stays a 200
    again = c.post(BULK, [{"session_key": "trip", "turns": TURNS}], format="json")
    assert again.status_code == 200 and again.json()["created"] == 0


def test_a_replay_by_the_other_path_is_checked_too(world, client_for):
    c = client_for(world["a"].key)
    c.post(BULK, [{"session_key": "trip", "turns": TURNS}], format="json")
    assert c.post(SESSION, {"session_key": "trip", "turns": TURNS}, format="json").status_code == 200
    r = c.post(WEAVE, {**TURNS[0], "session_key": "trip", "text": "changed"}, format="json")
    assert r.status_code == 409 and "text" in r.json()["error"]["fields"]["event_id"][0]


def test_nylon_ingest_refuses_a_changed_replay_before_writing(world, tmp_path):
    a = world["a"]
    actor = actor_for_agent(a.agent, scopes=frozenset({Scope.READ, Scope.WRITE}))
    services.weave_session(actor=actor, session_key="trip", turns=[services.TurnIn(**TURNS[0])])
    before = _snapshot(world)
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"session_key": "new", "turns": [{"text": "fresh", "event_id": "n1"}]}) + "\n"
                    + json.dumps({"session_key": "trip", "turns": [{**TURNS[0], "text": "changed"}]}) + "\n")
    with pytest.raises(CommandError, match="line 2: .*Already stored"):
        call_command("nylon_ingest", str(path), "--org", a.org.slug, "--agent", a.agent.name, "--chunk", "1")
    assert _snapshot(world) == before


def test_the_proxy_write_back_keeps_its_first_answer(world):
    """The proxy keys an answer by its question: a retry that sampled another answer keeps the first."""
    a = world["a"]
    actor = actor_for_agent(a.agent, scopes=frozenset({Scope.READ, Scope.WRITE}))
    first = services.weave_session(actor=actor, session_key="p", source_kind=SourceKind.PROXY,
                                   turns=[services.TurnIn(text="first answer", event_id="proxy:x")])
    again = services.weave_session(actor=actor, session_key="p", source_kind=SourceKind.PROXY,
                                   turns=[services.TurnIn(text="another answer", event_id="proxy:x")])
    assert again.created == 0 and again.node_ids == first.node_ids
    assert Node.objects.get(id=first.node_ids[0]).text == "first answer"


def test_openapi_lists_200_201_and_409_for_the_writes(world, client_for):
    schema = client_for(world["a"].owner).get("/api/schema/", {"format": "json"}).json()
    for path in ("/api/v1/memories/weave", "/api/v1/memories/weave-session", "/api/v1/memories/bulk"):
        responses = schema["paths"][path]["post"]["responses"]
        assert {"200", "201", "409"} <= set(responses), (path, sorted(responses))
        assert "event_id_reused" in responses["409"]["description"]
