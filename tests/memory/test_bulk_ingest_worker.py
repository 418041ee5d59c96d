"""A bulk write's deferred work, done by a real Celery worker after the commit."""

from __future__ import annotations

import time

import pytest

from memory.models import Edge, Node

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_a_worker_embeds_and_links_a_bulk_batch_after_commit(world, client_for, celery_worker_process):
    c = client_for(world["a"].key)
    earlier = c.post("/api/v1/memories/weave", {"text": "Ana planned the Lisbon offsite in May."},
                     format="json").json()["node_ids"][0]
    r = c.post("/api/v1/memories/bulk?embed=false", [{"session_key": "trip", "turns": [
        {"text": "The Lisbon offsite moved to June.", "event_id": "t1"},
        {"text": "Ben booked the flights.", "event_id": "t2"}]}], format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    deadline = time.time() + 120
    while time.time() < deadline:
        state = c.get(f"/api/v1/memories/bulk/{body['batch_id']}").json()
        if state["status"] != "pending":
            break
        time.sleep(0.5)
    assert state["status"] == "done" and state["embed_pending"] is False, state
    assert Node.objects.filter(id__in=body["node_ids"], embedded=True).count() == 2
    assert Edge.objects.filter(kind="entity", src_id=earlier, dst_id=body["node_ids"][0]).exists()
