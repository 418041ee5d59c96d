"""The live feed's websocket consumer: every org member is in the org's group, so what each one is
sent must not name sessions they may not read."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async

from frontend.consumers import EventsConsumer
from memory.models import MemorySession, Visibility
from reflection import services as reflection_services

from .conftest import actor, weave

pytestmark = pytest.mark.django_db

PRIVATE_KEY = "ben-salary-review-2024"  # session keys are often meaningful names


@pytest.fixture(autouse=True)
def _in_memory_layer(settings, monkeypatch):
    # database_sync_to_async closes "old" connections around each call; inside the test's
    # transaction that would close the one connection the test data lives in.
    monkeypatch.setattr("channels.db.close_old_connections", lambda: None)
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.NYLON_LLM_URL = ""  # abstraction by heuristics: no LLM server needed here


async def _connect(user) -> ApplicationCommunicator:
    # asgiref's communicator, not channels.testing's: that package imports daphne, not installed here
    scope = {"type": "websocket", "path": "/ws/events/", "headers": [], "subprotocols": [],
             "user": user, "session": {}}
    comm = ApplicationCommunicator(EventsConsumer.as_asgi(), scope)
    await comm.send_input({"type": "websocket.connect"})
    assert (await comm.receive_output(timeout=2))["type"] == "websocket.accept"
    return comm


async def _receive(comm: ApplicationCommunicator, timeout: float = 2) -> dict:
    out = await comm.receive_output(timeout=timeout)
    assert out["type"] == "websocket.send", out
    return json.loads(out["text"])


def _events_for(users, publish) -> list[list[dict]]:
    """Connects each user's feed, runs ``publish`` (sync, commit callbacks run), returns what each
    socket received."""

    async def run():
        comms = [await _connect(u) for u in users]
        try:
            await database_sync_to_async(publish)()
            got = []
            for c in comms:
                events = [await _receive(c)]
                while not await c.receive_nothing(timeout=0.1):
                    events.append(await _receive(c))
                got.append(events)
            return got
        finally:
            for c in comms:
                await c.send_input({"type": "websocket.disconnect", "code": 1000})
                await c.wait(timeout=2)

    return async_to_sync(run)()


def test_woven_event_names_a_private_session_only_to_its_owner(world, django_capture_on_commit_callbacks):
    a = world["a"]

    def publish():
        with django_capture_on_commit_callbacks(execute=True):
            weave(actor(a.member, a.org), "Ben asked for a 20% raise.", visibility=Visibility.PRIVATE,
                  session_key=PRIVATE_KEY)

    owner_feed, admin_feed, member_feed = _events_for([a.owner, a.admin, a.member], publish)
    for feed in (owner_feed, admin_feed):  # org owners and admins may not read private memories
        assert [e["type"] for e in feed] == ["memory.woven"]
        assert "session_key" not in feed[0] and PRIVATE_KEY not in str(feed)
    assert [e["type"] for e in member_feed] == ["memory.woven"]
    assert member_feed[0]["session_key"] == PRIVATE_KEY  # the owner's own feed keeps it
    assert member_feed[0]["node_ids"] == owner_feed[0]["node_ids"]  # ids stay: feed_nodes filters them


def test_org_sessions_are_still_named_to_every_member(world, django_capture_on_commit_callbacks):
    a = world["a"]

    def publish():
        with django_capture_on_commit_callbacks(execute=True):
            weave(actor(a.owner, a.org), "The offsite is on March 14.", session_key="offsite-plan")

    for feed in _events_for([a.owner, a.member], publish):
        assert [(e["type"], e["session_key"]) for e in feed] == [("memory.woven", "offsite-plan")]


def test_abstracted_event_names_a_private_session_only_to_its_owner(world, django_capture_on_commit_callbacks):
    a = world["a"]
    weave(actor(a.member, a.org), "I went to a pottery class yesterday.", visibility=Visibility.PRIVATE,
          session_key=PRIVATE_KEY)
    session = MemorySession.objects.get(org=a.org, key=PRIVATE_KEY)

    def publish():
        with django_capture_on_commit_callbacks(execute=True):
            assert reflection_services.abstract_session(session_id=session.id)["facts"] == 1

    owner_feed, member_feed = _events_for([a.owner, a.member], publish)
    assert [e["type"] for e in owner_feed] == ["memory.abstracted"] and "session_key" not in owner_feed[0]
    assert [(e["type"], e["session_key"]) for e in member_feed] == [("memory.abstracted", PRIVATE_KEY)]
