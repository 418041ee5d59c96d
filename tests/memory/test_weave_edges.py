"""Weave edge cases: ending a session with a re-sent turn, /weave's error shape, concurrent event ids."""

from __future__ import annotations

import pytest

from memory import services
from memory.models import MemorySession, Node

pytestmark = pytest.mark.django_db

TURN = {"text": "We booked the Lisbon offsite.", "event_id": "e1"}


def _session(world, key: str = "s") -> MemorySession:
    return MemorySession.objects.get(org=world["a"].org, owner_agent=world["a"].agent, key=key)


def test_end_session_with_an_already_stored_turn_ends_it(world, client_for):
    c = client_for(world["a"].key)
    assert c.post("/api/v1/memories/weave-session", {"session_key": "s", "turns": [TURN]},
                  format="json").status_code == 201
    r = c.post("/api/v1/memories/weave-session", {"session_key": "s", "turns": [TURN], "end_session": True},
               format="json")
    assert r.status_code == 200 and r.json()["created"] == 0  # ended the session, created nothing
    session = _session(world)
    assert session.ended_at is not None and session.abstraction_status == MemorySession.Status.PENDING
    assert session.turn_count == 1


def test_end_session_twice_leaves_the_ended_session_as_it_is(world, client_for):
    c = client_for(world["a"].key)
    body = {"session_key": "s", "turns": [TURN], "end_session": True}
    assert c.post("/api/v1/memories/weave-session", body, format="json").status_code == 201
    first = _session(world)
    MemorySession.objects.filter(pk=first.pk).update(abstraction_status=MemorySession.Status.DONE)
    assert c.post("/api/v1/memories/weave-session", body, format="json").status_code == 200  # a replay
    again = _session(world)
    assert again.ended_at == first.ended_at and again.abstraction_status == MemorySession.Status.DONE


def test_bulk_end_session_with_already_stored_turns_ends_it(world, client_for):
    c = client_for(world["a"].key)
    assert c.post("/api/v1/memories/bulk", [{"session_key": "s", "turns": [TURN]}], format="json").status_code == 201
    r = c.post("/api/v1/memories/bulk", [{"session_key": "s", "turns": [TURN], "end_session": True}], format="json")
    assert r.status_code == 200 and r.json()["created"] == 0  # ended the session, created nothing
    session = _session(world)
    assert session.ended_at is not None and session.abstraction_status == MemorySession.Status.PENDING


def test_weave_text_and_caption_over_the_limit_is_a_400_on_text(world, client_for):
    r = client_for(world["a"].key).post("/api/v1/memories/weave",
                                        {"text": "x" * services.MAX_TEXT_CHARS, "caption": "a photo"}, format="json")
    assert r.status_code == 400
    assert set(r.json()["error"]["fields"]) == {"text"}
    assert not Node.objects.exists()


def test_a_concurrent_write_of_the_same_event_id_is_not_a_500(world, client_for, monkeypatch):
    """The event id is committed by another request between this weave's check and its insert."""
    real = services._leaf_silks
    agent = world["a"].agent
    raced = []

    def racing(t, occurred):
        if not raced:
            raced.append(True)
            Node.objects.create(org=world["a"].org, owner_agent=agent, text="first attempt", event_id="e1",
                                occurred_at=occurred, tension_updated_at=occurred)
        return real(t, occurred)

    monkeypatch.setattr(services, "_leaf_silks", racing)
    r = client_for(world["a"].key).post("/api/v1/memories/weave", TURN, format="json")
    assert r.status_code == 201, r.content
    assert Node.objects.filter(event_id="e1").count() == 1
    assert r.json()["event_ids"]["e1"] == Node.objects.get(event_id="e1").id


def test_bulk_trims_keys_as_weave_session_does(world, client_for):
    """The same body through weave-session and then bulk (a retry by the other path) writes once."""
    c = client_for(world["a"].key)
    body = {"session_key": " s ", "turns": [{"text": "We booked the Lisbon offsite.", "event_id": " e1 ",
                                             "speaker": " Ana "}]}
    first = c.post("/api/v1/memories/weave-session", body, format="json").json()
    r = c.post("/api/v1/memories/bulk", [body], format="json")
    assert r.status_code == 200, r.content  # a replay: nothing created
    assert r.json()["created"] == 0 and r.json()["node_ids"] == first["node_ids"]
    assert Node.objects.get().session_key == "s" and MemorySession.objects.get().key == "s"
    r = c.post("/api/v1/memories/bulk", [{"session_key": "   ", "turns": [{"text": "x"}]}], format="json")
    assert r.status_code == 400 and "session_key" in r.json()["error"]["fields"]["sessions"]["0"]
