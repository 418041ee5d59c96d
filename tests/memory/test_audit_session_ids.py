"""The audit entry of a session write names the session by its row id, not its key. The key went
into ``object_id`` (and, past 64 characters, into ``detail``), so an org admin reading
``/api/v1/audit`` or the console's audit page saw the keys of members' private sessions, which the
live feed deliberately shows only to readers of the session's nodes (``frontend.consumers``). The
writer still finds its entry: by the session's id and by the request id its answer carried."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from assets.models import AuditEvent
from memory.models import MemorySession

pytestmark = pytest.mark.django_db

PRIVATE_KEY = "ana-therapy-notes-2024-11"
LONG_KEY = "agent-run-" + "x" * 80  # past the 64 characters of object_id: went into detail whole


def _weave_session(client, key: str, text: str):
    r = client.post("/api/v1/memories/weave-session", {"session_key": key, "visibility": "private",
                                                       "turns": [{"speaker": "ana", "text": text}]}, format="json")
    assert r.status_code == 201, r.content
    return r


def test_an_admin_reading_the_audit_never_sees_a_private_session_key(world, client_for):
    a = world["a"]
    by_member = _weave_session(client_for(a.member), PRIVATE_KEY, "I have a doctor's appointment on Friday.")
    by_agent = _weave_session(client_for(a.key), LONG_KEY, "Deploy checklist reviewed.")

    for r, owner in ((by_member, {"owner_user": a.member}), (by_agent, {"owner_agent": a.agent})):
        session = MemorySession.objects.get(org=a.org, key=r.json()["session_key"], **owner)
        entry = AuditEvent.objects.get(org=a.org, action="memory.weave", request_id=r["X-Request-Id"])
        # the writer's correlation: its own answer's request id leads to the entry, which names the session's row
        assert (entry.object_type, entry.object_id) == ("session", str(session.id))
        assert entry.detail == {"nodes": 1, "edges": 0}

    admin = client_for(a.admin)
    body = admin.get("/api/v1/audit", {"action": "memory.weave"})
    assert body.status_code == 200 and len(body.json()["results"]) == 2
    listed = json.dumps(admin.get("/api/v1/audit").json())
    assert PRIVATE_KEY not in listed and "x" * 60 not in listed

    console = Client()
    console.force_login(a.admin)
    html = console.get("/console/audit/").content.decode()
    assert "memory.weave" in html
    assert PRIVATE_KEY not in html and "x" * 60 not in html


def test_a_write_without_a_session_is_recorded_as_before(world, client_for):
    a = world["a"]
    r = client_for(a.member).post("/api/v1/memories/weave", {"text": "No session here."}, format="json")
    assert r.status_code == 201, r.content
    entry = AuditEvent.objects.get(org=a.org, action="memory.weave", request_id=r["X-Request-Id"])
    assert r.json()["session_key"] == "" and (entry.object_type, entry.object_id) == ("session", "-")


def test_the_abstraction_entry_names_the_session_by_its_id_too(world, client_for):
    from reflection.services import abstract_session

    a = world["a"]
    _weave_session(client_for(a.member), PRIVATE_KEY, "We decided to move the offsite to March 14.")
    session = MemorySession.objects.get(org=a.org, key=PRIVATE_KEY, owner_user=a.member)
    abstract_session(session_id=session.id)
    entry = AuditEvent.objects.get(org=a.org, action="memory.abstract")
    assert entry.object_id == str(session.id)
    assert PRIVATE_KEY not in json.dumps(client_for(a.admin).get("/api/v1/audit").json())
