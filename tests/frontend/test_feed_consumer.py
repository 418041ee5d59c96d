"""The live feed's websocket consumer: every org member is in the org's group, so what each one is
sent must not name sessions they may not read."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from frontend import consumers
from frontend.consumers import EventsConsumer
from frontend.routing import websocket_urlpatterns
from memory.models import MemorySession, Visibility
from nylon_project import events
from reflection import services as reflection_services
from teams import services as team_services
from teams.models import Membership, TeamMembership

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


# --- access re-checked while the socket lives ----------------------------------------------------------

# The feed's promise: a member removed from the org, or a deactivated user, is sent nothing once
# this long has passed (frontend.consumers.RECHECK_SECS).
REVOCATION_WITHIN = 1.0


def _publish_sync(org_id: int, *types: str) -> None:
    for t in types:
        events.publish(org_id, t, {"node_ids": [1]})


async def _publish(org_id: int, *types: str, capture) -> None:
    def run():
        with capture(execute=True):
            _publish_sync(org_id, *types)

    await database_sync_to_async(run)()


async def _close(*comms: ApplicationCommunicator) -> None:
    for c in comms:
        await c.send_input({"type": "websocket.disconnect", "code": 1000})
        await c.wait(timeout=2)


async def _types(comm: ApplicationCommunicator) -> list[str]:
    got = [(await _receive(comm))["type"]]
    while not await comm.receive_nothing(timeout=0.1):
        got.append((await _receive(comm))["type"])
    return got


def _revoked_socket_gets_nothing(world, capture, revoke, close_code: int) -> None:
    """Member and owner connected, both get an event; ``revoke`` runs on the member; once
    REVOCATION_WITHIN has passed, two events: the owner gets both, the member's socket is closed
    with ``close_code`` and carries neither."""
    a = world["a"]

    async def run():
        member, owner = await _connect(a.member), await _connect(a.owner)
        try:
            await _publish(a.org.id, "memory.woven", capture=capture)
            assert await _types(member) == ["memory.woven"] and await _types(owner) == ["memory.woven"]

            await database_sync_to_async(revoke)()
            await asyncio.sleep(REVOCATION_WITHIN)
            await _publish(a.org.id, "conflict.detected", "memory.woven", capture=capture)

            out = await member.receive_output(timeout=2)
            assert out["type"] == "websocket.close" and out["code"] == close_code, out
            assert await member.receive_nothing(timeout=0.3)  # nothing after the close either
            assert await _types(owner) == ["conflict.detected", "memory.woven"]
        finally:
            await _close(member, owner)

    async_to_sync(run)()


def test_a_removed_member_gets_no_further_events_and_the_socket_closes(world, django_capture_on_commit_callbacks):
    a = world["a"]

    def remove():
        m = Membership.objects.get(org=a.org, user=a.member)
        team_services.member_remove(actor=actor(a.owner, a.org), membership=m)

    _revoked_socket_gets_nothing(world, django_capture_on_commit_callbacks, remove, 4403)


def test_a_deactivated_user_gets_no_further_events_and_the_socket_closes(world, django_capture_on_commit_callbacks):
    a = world["a"]

    def deactivate():
        type(a.member).objects.filter(pk=a.member.pk).update(is_active=False)

    _revoked_socket_gets_nothing(world, django_capture_on_commit_callbacks, deactivate, 4401)


def test_a_member_keeps_receiving_and_is_rechecked_at_most_once_per_window(world, django_capture_on_commit_callbacks,
                                                                            monkeypatch):
    """The cost bound: a burst of events inside one RECHECK_SECS window costs no membership query,
    the first event after it one; a member who is still a member keeps getting everything."""
    a = world["a"]
    now = [1000.0]
    monkeypatch.setattr(consumers, "_clock", lambda: now[0])
    checks: list[int] = []
    real_check = consumers._still_allowed

    async def counted(user_id, *rest):
        checks.append(user_id)
        return await real_check(user_id, *rest)

    monkeypatch.setattr(consumers, "_still_allowed", counted)

    async def run():
        member = await _connect(a.member)
        try:
            await _publish(a.org.id, *["memory.woven"] * 5, capture=django_capture_on_commit_callbacks)
            assert await _types(member) == ["memory.woven"] * 5 and checks == []  # just checked at connect
            for _ in range(2):
                now[0] += consumers.RECHECK_SECS + 0.1
                await _publish(a.org.id, "conflict.detected", "memory.woven", "memory.woven",
                               capture=django_capture_on_commit_callbacks)
                assert await _types(member) == ["conflict.detected", "memory.woven", "memory.woven"]
            assert checks == [a.member.pk, a.member.pk]  # one query per window, not one per event
        finally:
            await _close(member)

    async_to_sync(run)()


# --- the cost of session keys: the actor once per window, not per event -------------------------------

def _frozen_clock(monkeypatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(consumers, "_clock", lambda: now[0])
    return now


async def _queries_of(step) -> list[str]:
    """The SQL run on the test's connection while ``step`` (a coroutine function) runs: the
    consumer's database calls run there (thread-sensitive), so they are what is counted."""
    ctx = CaptureQueriesContext(connection)  # entered and read in the connection's own thread
    await database_sync_to_async(ctx.__enter__)()
    try:
        await step()
    finally:
        await database_sync_to_async(ctx.__exit__)(None, None, None)
    return await database_sync_to_async(lambda: [q["sql"] for q in ctx.captured_queries])()


def _tenancy(queries: list[str]) -> int:
    """Queries that build an actor or re-check a membership (not the per-event visibility check)."""
    tables = ('"teams_membership"', '"teams_teammembership"')
    return sum(1 for sql in queries if any(t in sql.split(" WHERE ")[0] for t in tables))


def test_a_burst_of_session_events_builds_the_actor_once_per_window(world, django_capture_on_commit_callbacks,
                                                                      monkeypatch):
    """N events naming a session cost N visibility checks plus one actor per RECHECK_SECS window,
    not an actor per event (~4 queries each); and every event still gets its answer."""
    a = world["a"]
    node = weave(actor(a.owner, a.org), "The offsite is on March 14.", session_key="offsite-plan")[0]
    now = _frozen_clock(monkeypatch)
    burst = 20

    async def publish_burst() -> None:
        def run():
            with django_capture_on_commit_callbacks(execute=True):
                for _ in range(burst):
                    events.publish(a.org.id, "memory.woven", {"node_ids": [node], "session_key": "offsite-plan"})

        await database_sync_to_async(run)()

    async def run():
        member = await _connect(a.member)
        try:
            got: list[dict] = []

            async def burst_received() -> None:
                await publish_burst()
                got[:] = [await _receive(member) for _ in range(burst)]
                assert await member.receive_nothing(timeout=0.1)

            first = await _queries_of(burst_received)
            assert [e.get("session_key") for e in got] == ["offsite-plan"] * burst
            assert _tenancy(first) == 2  # the actor: membership and team memberships, once
            assert len(first) <= burst + 2  # beyond it, one visibility check per event

            now[0] += consumers.RECHECK_SECS + 0.1
            second = await _queries_of(burst_received)
            assert [e.get("session_key") for e in got] == ["offsite-plan"] * burst
            assert _tenancy(second) == 3  # the window's re-check, then the actor rebuilt once
            assert len(second) <= burst + 3
        finally:
            await _close(member)

    async_to_sync(run)()


def test_a_member_who_leaves_a_team_loses_its_session_keys_within_the_window(world, monkeypatch,
                                                                              django_capture_on_commit_callbacks):
    """The cached actor is not trusted past RECHECK_SECS: once the member is out of the team, the
    team-scoped session is no longer named to them (the event itself, opaque ids, still comes);
    its owner keeps seeing it."""
    a = world["a"]
    node = weave(actor(a.owner, a.org), "The core team picked Alfama.", visibility=Visibility.TEAM, team=a.team,
                 session_key="core-venue")[0]
    now = _frozen_clock(monkeypatch)

    async def publish_one() -> None:
        def run():
            with django_capture_on_commit_callbacks(execute=True):
                events.publish(a.org.id, "memory.woven", {"node_ids": [node], "session_key": "core-venue"})

        await database_sync_to_async(run)()

    async def run():
        member, owner = await _connect(a.member), await _connect(a.owner)
        try:
            await publish_one()
            assert (await _receive(member)).get("session_key") == "core-venue"  # a member of the team
            assert (await _receive(owner)).get("session_key") == "core-venue"

            await database_sync_to_async(
                TeamMembership.objects.filter(team=a.team, user=a.member).delete)()
            now[0] += consumers.RECHECK_SECS + 0.1
            await publish_one()
            left = await _receive(member)
            assert left["type"] == "memory.woven" and left["node_ids"] == [node] and "session_key" not in left
            assert (await _receive(owner)).get("session_key") == "core-venue"
        finally:
            await _close(member, owner)

    async_to_sync(run)()


# --- logout closes that session's sockets --------------------------------------------------------------

def _browser(user) -> Client:
    """A logged-in browser: a real session row, as the login view leaves it."""
    c = Client()
    c.force_login(user)
    return c


def _socket_scope(browser: Client) -> dict:
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"
    return {"type": "websocket", "path": "/ws/events/", "headers": [(b"cookie", cookie.encode())],
            "subprotocols": []}


async def _open(app, scope: dict) -> tuple[ApplicationCommunicator, dict]:
    comm = ApplicationCommunicator(app, scope)
    await comm.send_input({"type": "websocket.connect"})
    return comm, await comm.receive_output(timeout=2)


def test_logging_out_closes_that_sessions_feed_and_not_the_users_other_browsers(
        world, django_capture_on_commit_callbacks):
    a = world["a"]
    here, elsewhere = _browser(a.member), _browser(a.member)
    app = AuthMiddlewareStack(URLRouter(websocket_urlpatterns))  # the feed as asgi.py mounts it

    async def run():
        mine, first = await _open(app, _socket_scope(here))
        other, second = await _open(app, _socket_scope(elsewhere))
        assert first["type"] == second["type"] == "websocket.accept"
        try:
            await _publish(a.org.id, "memory.woven", capture=django_capture_on_commit_callbacks)
            assert await _types(mine) == ["memory.woven"] and await _types(other) == ["memory.woven"]

            response = await database_sync_to_async(here.post)(reverse("frontend:logout"))
            assert response.status_code == 302
            out = await mine.receive_output(timeout=2)
            assert out["type"] == "websocket.close" and out["code"] == 4401, out

            await _publish(a.org.id, "conflict.detected", capture=django_capture_on_commit_callbacks)
            assert await _types(other) == ["conflict.detected"]  # the other browser is still logged in
            assert await mine.receive_nothing(timeout=0.3)
        finally:
            await _close(mine, other)

    async_to_sync(run)()


def test_a_logout_while_the_socket_connects_still_closes_it(world):
    """The logout lands after the socket's session was read but before it joined its session
    group, so the close message finds nobody: the socket finds the session gone and refuses."""
    a = world["a"]
    browser = _browser(a.member)

    async def logout_then_feed(scope, receive, send):
        response = await database_sync_to_async(browser.post)(reverse("frontend:logout"))
        assert response.status_code == 302
        return await EventsConsumer.as_asgi()(scope, receive, send)

    async def run():
        comm, out = await _open(AuthMiddlewareStack(logout_then_feed), _socket_scope(browser))
        assert out["type"] == "websocket.close" and out["code"] == 4401, out
        await comm.wait(timeout=2)

    async_to_sync(run)()


# --- a login session that ends with no message to its sockets ------------------------------------------

def _session_key(browser: Client) -> str:
    return browser.cookies[settings.SESSION_COOKIE_NAME].value


def _expire(browser: Client) -> None:
    Session.objects.filter(session_key=_session_key(browser)).update(
        expire_date=timezone.now() - timedelta(seconds=1))


def _drop(browser: Client) -> None:
    # What Django's logout does after sending user_logged_out: a socket that joined in between, or
    # missed the message (a channel layer that was down), was told nothing.
    Session.objects.filter(session_key=_session_key(browser)).delete()


def _password_changed_elsewhere(browser: Client) -> None:
    user = get_user_model().objects.get(pk=Session.objects.get(
        session_key=_session_key(browser)).get_decoded()["_auth_user_id"])
    user.set_password("a-new-Passphrase-2026")
    user.save()


@pytest.mark.parametrize("end", [_expire, _drop, _password_changed_elsewhere],
                         ids=["expired", "deleted-without-message", "password-changed-elsewhere"])
def test_a_socket_whose_login_session_ended_gets_nothing_more(world, monkeypatch, end,
                                                              django_capture_on_commit_callbacks):
    """The session is re-checked with the membership: once the window has passed, the socket is
    closed before the next event (the browser reconnects, and is refused as signed out); the
    user's other browser keeps its feed."""
    a = world["a"]
    here, elsewhere = _browser(a.member), _browser(a.member)
    app = AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
    now = _frozen_clock(monkeypatch)
    capture = django_capture_on_commit_callbacks

    async def run():
        (mine, first), (other, second) = await _open(app, _socket_scope(here)), await _open(app, _socket_scope(elsewhere))
        assert first["type"] == second["type"] == "websocket.accept"
        try:
            await _publish(a.org.id, "memory.woven", capture=capture)
            assert await _types(mine) == ["memory.woven"] and await _types(other) == ["memory.woven"]

            await database_sync_to_async(end)(here)
            now[0] += consumers.RECHECK_SECS + 0.1
            await _publish(a.org.id, "conflict.detected", capture=capture)
            out = await mine.receive_output(timeout=2)
            assert out["type"] == "websocket.close" and out["code"] == consumers.CLOSE_RECONNECT, out
            assert await mine.receive_nothing(timeout=0.3)
            if end is _password_changed_elsewhere:  # Django signs every other session out with it
                out = await other.receive_output(timeout=2)
                assert out["type"] == "websocket.close" and out["code"] == consumers.CLOSE_RECONNECT, out
            else:
                assert await _types(other) == ["conflict.detected"]

            again, refused = await _open(app, _socket_scope(here))  # what the browser does next
            assert refused["type"] == "websocket.close" and refused["code"] == 4401, refused
            await again.wait(timeout=2)
        finally:
            await _close(mine, other)

    async_to_sync(run)()


def test_a_password_change_in_this_browser_moves_its_feed_to_the_new_session_key(
        world, monkeypatch, django_capture_on_commit_callbacks):
    """Changing one's password rotates the session key (``update_session_auth_hash``): the socket
    joined with the old key would miss that session's logout. It is closed at the re-check; the
    browser's reconnect joins with the new key, and logging out closes that one."""
    a = world["a"]
    type(a.member).objects.filter(pk=a.member.pk).update(is_staff=True)  # the admin's password page
    browser = _browser(a.member)
    old_key = _session_key(browser)
    app = AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
    now = _frozen_clock(monkeypatch)
    capture = django_capture_on_commit_callbacks

    async def run():
        old, first = await _open(app, _socket_scope(browser))
        assert first["type"] == "websocket.accept"
        new = None
        try:
            response = await database_sync_to_async(browser.post)("/admin/password_change/", {
                "old_password": "pw-member-123", "new_password1": "a-new-Passphrase-2026",
                "new_password2": "a-new-Passphrase-2026"})
            assert response.status_code == 302, response.content
            assert _session_key(browser) != old_key  # still logged in, under a new key

            now[0] += consumers.RECHECK_SECS + 0.1
            await _publish(a.org.id, "memory.woven", capture=capture)
            out = await old.receive_output(timeout=2)
            assert out["type"] == "websocket.close" and out["code"] == consumers.CLOSE_RECONNECT, out

            new, accepted = await _open(app, _socket_scope(browser))
            assert accepted["type"] == "websocket.accept"
            await _publish(a.org.id, "conflict.detected", capture=capture)
            assert await _types(new) == ["conflict.detected"]

            response = await database_sync_to_async(browser.post)(reverse("frontend:logout"))
            assert response.status_code == 302
            out = await new.receive_output(timeout=2)
            assert out["type"] == "websocket.close" and out["code"] == 4401, out
        finally:
            await _close(old, *([new] if new else []))

    async_to_sync(run)()
