"""A body with a misspelt field ({"txt": "bad"}) was told only "txt: Unknown field.", not that
"text" is required: a client fixed one error to meet the next. Both come in one answer now, and
nothing is written."""

from __future__ import annotations

import pytest

from memory.models import Node

pytestmark = pytest.mark.django_db


def test_a_misspelt_field_and_the_missing_one_are_named_together(world, client_for):
    c = client_for(world["a"].key)
    r = c.post("/api/v1/memories/weave", {"txt": "bad"}, format="json")
    assert r.status_code == 400
    assert r.json()["error"]["fields"] == {"txt": ["Unknown field."], "text": ["This field is required."]}
    r = c.post("/api/v1/memories/weave-session", {"turns": [{"txt": "bad"}]}, format="json")
    assert r.status_code == 400
    assert r.json()["error"]["fields"]["turns"]["0"] == {"txt": ["Unknown field."], "text": ["This field is required."]}
    assert not Node.objects.filter(org=world["a"].org).exists()


def test_a_wrong_type_is_not_also_called_missing(world, client_for):
    r = client_for(world["a"].key).post("/api/v1/memories/weave", {"text": 5, "spekaer": "ana"}, format="json")
    assert r.status_code == 400
    assert r.json()["error"]["fields"] == {"text": ["Expected a string."], "spekaer": ["Unknown field."]}


def test_a_turn_dated_more_than_a_day_ahead_is_refused_on_weave_and_bulk(world, client_for):
    from datetime import timedelta

    from django.utils import timezone

    c = client_for(world["a"].key)
    ahead = (timezone.now() + timedelta(days=7)).isoformat()
    r = c.post("/api/v1/memories/weave", {"text": "Shipped.", "occurred_at": ahead}, format="json")
    assert r.status_code == 400 and "future" in r.json()["error"]["fields"]["occurred_at"][0]
    r = c.post("/api/v1/memories/bulk", [{"session_key": "s", "turns": [{"text": "Shipped.", "occurred_at": ahead}]}],
               format="json")
    assert r.status_code == 400
    assert "future" in r.json()["error"]["fields"]["sessions"]["0"]["turns"]["0"]["occurred_at"][0]
    assert not Node.objects.filter(org=world["a"].org).exists()
    # a few hours ahead (another zone's clock) is still taken
    soon = (timezone.now() + timedelta(hours=6)).isoformat()
    assert c.post("/api/v1/memories/weave", {"text": "Shipped.", "occurred_at": soon}, format="json").status_code == 201
