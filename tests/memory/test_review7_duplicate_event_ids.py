"""One request naming the same event_id twice with different content is a 400 on the later turn:
the write keeps one node per event_id, so the second text used to vanish behind a 201."""

from __future__ import annotations

import pytest

from memory.cache import get_cache
from memory.models import Node

pytestmark = pytest.mark.django_db

WEAVE = "/api/v1/memories/weave-session"
BULK = "/api/v1/memories/bulk"


@pytest.fixture(autouse=True)
def fresh_cache():
    get_cache().drop()
    yield
    get_cache().drop()


def _turns(*texts):
    return [{"text": t, "event_id": "dd"} for t in texts]


def test_weave_session_refuses_an_event_id_repeated_with_other_text(world, client_for):
    r = client_for(world["a"].key).post(WEAVE, {"session_key": "dupws", "turns": _turns("first version",
                                                                                      "second different")},
                                        format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"] == {"turns": {"1": {"event_id": ["Repeats turn 0's event_id with "
                                                                         "different text."]}}}
    assert not Node.objects.filter(org=world["a"].org, event_id="dd").exists()


def test_weave_session_names_other_differing_content(world, client_for):
    turns = [{"text": "same", "event_id": "dd", "speaker": "Ana"}, {"text": "x", "event_id": "e"},
             {"text": "same", "event_id": "dd", "speaker": "Ben"}]
    r = client_for(world["a"].key).post(WEAVE, {"session_key": "dupws", "turns": turns}, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"]["turns"] == {"2": {"event_id": ["Repeats turn 0's event_id with different "
                                                                       "content."]}}


def test_weave_session_keeps_an_identical_repeat_idempotent(world, client_for):
    r = client_for(world["a"].key).post(WEAVE, {"session_key": "dupws", "turns": _turns("same", "same")},
                                        format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["created"] == 1 and body["node_ids"][0] == body["node_ids"][1]


@pytest.mark.parametrize("ndjson", [False, True])
def test_bulk_refuses_an_event_id_repeated_with_other_text_in_a_session(world, client_for, ndjson):
    sessions = [{"session_key": "ok", "turns": [{"text": "fine"}]},
                {"session_key": "dupws", "turns": _turns("first version", "second different")}]
    c = client_for(world["a"].key)
    if ndjson:
        import json

        r = c.post(BULK, "\n".join(json.dumps(s) for s in sessions), content_type="application/x-ndjson")
    else:
        r = c.post(BULK, sessions, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"] == {"sessions": {"1": {"turns": {"1": {"event_id": [
        "Repeats turn 0's event_id with different text."]}}}}}
    assert not Node.objects.filter(org=world["a"].org).exists()


def test_bulk_refuses_an_event_id_reused_by_another_session(world, client_for):
    sessions = [{"session_key": "s1", "turns": [{"text": "a", "event_id": "x1"}, {"text": "b", "event_id": "dd"}]},
                {"session_key": "s2", "turns": [{"text": "c", "event_id": "dd"}]}]
    r = client_for(world["a"].key).post(BULK, sessions, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["fields"] == {"sessions": {"1": {"turns": {"0": {"event_id": [
        "Repeats session 0 turn 1's event_id with different text."]}}}}}


def test_bulk_keeps_an_identical_repeat(world, client_for):
    sessions = [{"session_key": "s1", "turns": _turns("same", "same")}]
    r = client_for(world["a"].key).post(BULK, sessions, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["created"] == 1


def test_every_per_turn_error_is_keyed_by_the_turn_index(world, client_for):
    """An unknown field, a bad value and a repeated event_id: one shape, {"turns": {"<i>": {...}}}
    (the repeat came as a list with an empty object per good turn)."""
    c = client_for(world["a"].key)
    unknown = c.post(WEAVE, {"session_key": "s", "turns": [{"text": "ok"}, {"text": "x", "foo": 1}]}, format="json")
    bad = c.post(WEAVE, {"session_key": "s", "turns": [{"text": "ok"}, {"text": "x", "occurred_at": "nope"}]},
                 format="json")
    repeat = c.post(WEAVE, {"session_key": "s", "turns": _turns("a", "b")}, format="json")
    for r in (unknown, bad, repeat):
        assert r.status_code == 400, r.content
        turns = r.json()["error"]["fields"]["turns"]
        assert isinstance(turns, dict) and list(turns) == ["1"], turns
