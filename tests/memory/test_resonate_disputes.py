"""/memories/resonate marks the hits in an open conflict (``disputed_by``), as /context does: an agent
reading the raw list (the SDK README's first example) got "We use Postgres 15" first, unmarked, while
its conflict with "we moved to Postgres 16" waited for someone to resolve it."""

from __future__ import annotations

import pytest

from reflection.models import Conflict

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]


def _weave(client, text: str, at: str, visibility: str = "org") -> int:
    r = client.post("/api/v1/memories/weave", {"text": text, "occurred_at": at, "visibility": visibility},
                    format="json")
    assert r.status_code == 201, r.content
    return r.json()["node_ids"][0]


def _hits(client, query: str) -> dict[int, dict]:
    r = client.post("/api/v1/memories/resonate", {"query": query, "reinforce": False}, format="json")
    assert r.status_code == 200, r.content
    return {h["node_id"]: h for h in r.json()["hits"]}


def test_both_sides_of_an_open_conflict_name_each_other(world, client_for):
    a = world["a"]
    c = client_for(a.key)
    old = _weave(c, "The orders database runs Postgres 15.", "2026-11-02T10:00:00Z")
    new = _weave(c, "We moved the orders database to Postgres 16.", "2026-11-20T10:00:00Z")
    calm = _weave(c, "The orders database backups run nightly.", "2026-11-03T10:00:00Z")
    Conflict.objects.filter(org=a.org).delete()  # whatever the rules found: this test's own conflict
    conflict = Conflict.objects.create(org=a.org, node_a_id=old, node_b_id=new, reason="different version",
                                       detector="rule")

    hits = _hits(c, "Which Postgres version does the orders database run?")
    assert {old, new, calm} <= set(hits)
    assert hits[old]["disputed_by"] == [{"node_id": new, "occurred_at": "2026-11-20T10:00:00Z"}]
    assert hits[new]["disputed_by"] == [{"node_id": old, "occurred_at": "2026-11-02T10:00:00Z"}]
    assert hits[calm]["disputed_by"] == []
    from nylon_sdk.types import Hit  # the SDK reads it

    assert Hit.from_json(hits[old]).disputed_by == [{"node_id": new, "occurred_at": "2026-11-20T10:00:00Z"}]

    conflict.status = Conflict.Status.KEPT_BOTH  # resolved: no longer a dispute
    conflict.save(update_fields=["status"])
    assert [h["disputed_by"] for h in _hits(c, "Which Postgres version does the orders database run?").values()] \
        == [[]] * len(hits)


def test_a_side_the_caller_may_not_read_is_not_named(world, client_for):
    a = world["a"]
    old = _weave(client_for(a.key), "The orders database runs Postgres 15.", "2026-11-02T10:00:00Z")
    secret = _weave(client_for(a.member), "We moved the orders database to Postgres 16.", "2026-11-20T10:00:00Z",
                    visibility="private")
    Conflict.objects.filter(org=a.org).delete()
    Conflict.objects.create(org=a.org, node_a_id=old, node_b_id=secret, reason="different version", detector="rule")

    hits = _hits(client_for(a.key), "Which Postgres version does the orders database run?")
    assert secret not in hits and hits[old]["disputed_by"] == []
    hits = _hits(client_for(a.member), "Which Postgres version does the orders database run?")
    assert [d["node_id"] for d in hits[old]["disputed_by"]] == [secret]
