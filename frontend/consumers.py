"""Live feed: one Channels group per org; services publish after commit (see nylon_project.events).

Every member of the org gets every event, so an event is filtered per recipient before it is sent:
node ids are opaque (``feed_nodes`` renders only the visible ones), but a session key names
someone's session and is readable only by those who may read one of the event's nodes (the API
shows a session key only on a node the actor can see, ``memory.apis``).

Access is decided at connect and again while the socket lives: a member removed from the org, or a
deactivated user, stops receiving within ``RECHECK_SECS`` and the socket is closed; a team or role
change shows in the session keys it is sent within the same time (the socket's ``Actor`` is
rebuilt after each re-check). The socket is opened with the console session only
(``AuthMiddlewareStack``; agent keys have no feed), and logging that session out closes it
(``frontend.signals``); the user's other logged-in browsers keep theirs. A login session that ends
with no message to its sockets (it expired, its key was rotated by a password change, the password
was changed elsewhere, or a logout's message was missed) is found by the same re-check.

Group membership lives in the channel layer (Redis) and is dropped by ``group_discard`` or, for a
consumer that never ran it (its process was killed, its channel receive raised on a Redis error),
when it is ``group_expiry`` old (``nylon_project.channels_config``). A live socket therefore
re-adds itself several times per expiry (a heartbeat), and leaving tolerates Redis failing: the
expiry is the fallback, not the 24 h channels_redis defaults to."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from importlib import import_module

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY
from django.utils.crypto import constant_time_compare

from memory.selectors import visible_nodes
from teams.auth import SESSION_ORG_KEY, Actor, actor_for_user, resolve_user_org
from teams.models import Membership, Organization

log = logging.getLogger("nylon.events")

# How long a socket trusts its last membership and session check, and the Actor (role, teams) built
# after it. Each check is two index lookups (the unique (org, user) membership index joined to
# the user, and the session row), and the actor two queries when an event next needs it, so a burst
# of events (a bulk import's chunks) costs a connection these few queries per second, not per event,
# while a removed member, a deactivated user, an ended login session or a member who left a team
# gets at most this long of further events.
RECHECK_SECS = 1.0
# Application close codes (4000-4999): the same as a refused connect.
CLOSE_UNAUTHENTICATED = 4401  # the user was deactivated (or deleted), or the session logged out
CLOSE_NOT_MEMBER = 4403  # the user is no longer a member of the socket's org
# The socket's login session no longer holds the user (expired, key rotated, password changed,
# logged out): the browser reconnects (console.js retries any code but the two above), and that
# connect decides with the cookie the browser has now, refusing with 4401 if it is signed out.
CLOSE_RECONNECT = 4000

# A live socket re-adds itself to its groups this many times per group expiry, so three beats in a
# row may fail (a Redis blip) before its membership lapses.
HEARTBEATS_PER_EXPIRY = 4
# How long a leaving socket waits for Redis to drop it from a group: a socket that leaves because
# Redis is unreachable must not hang on it; its entry then lapses with the group expiry.
LEAVE_TIMEOUT_SECS = 2.0

_clock = time.monotonic  # a module attribute so tests can move time


def _session_holds(key: str, user) -> bool:
    """Whether login session ``key`` still signs ``user`` in, as a new connect would find it
    (``channels.auth.get_user``): not logged out, expired or replaced by a new key, and signed with
    the user's current password. The session engine's own load, so an expired row counts as gone
    (``exists()`` does not look at the expiry, and a signed-cookie session never "exists")."""
    data = import_module(settings.SESSION_ENGINE).SessionStore(key).load()
    if data.get(SESSION_KEY) != user._meta.pk.value_to_string(user):
        return False
    if not hasattr(user, "get_session_auth_hash"):
        return True
    session_hash = data.get(HASH_SESSION_KEY)
    return bool(session_hash) and constant_time_compare(session_hash, user.get_session_auth_hash())


@database_sync_to_async
def _still_allowed(user_id: int, org_id: int, session_key: str | None) -> int | None:
    """None while the user is an active member of the org and the socket's login session still
    signs them in, else the close code."""
    row = list(Membership.objects.filter(org_id=org_id, user_id=user_id).select_related("user")[:1])
    if not row:
        return CLOSE_NOT_MEMBER  # removed from the org (or the user, or the org, deleted)
    user = row[0].user  # fresh: a password change since the connect shows in its session hash
    if not user.is_active:
        return CLOSE_UNAUTHENTICATED
    if session_key and not _session_holds(session_key, user):
        return CLOSE_RECONNECT
    return None

# Payload fields that name a session's content rather than point at rows filtered later.
_SESSION_FIELDS = ("session_key",)


@database_sync_to_async
def _org_for(user, slug: str | None) -> Organization | None:
    """The console's org, by the rule of the API and the console pages (``resolve_user_org``):
    the session's org while the user is still a member of it, else their oldest membership; None
    for a user in no org. (The socket's copy of the session is not written back.)"""
    return resolve_user_org(user, {SESSION_ORG_KEY: slug} if slug else {})


def session_group(session_key: str) -> str:
    """The channel-layer group of one login session's sockets. Hashed: group names are stored in
    the channel layer's Redis, and a session key is a credential."""
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


_session_still_holds = database_sync_to_async(_session_holds)


def _event_node_ids(event: dict) -> list[int]:
    raw = list(event.get("node_ids") or [])
    if event.get("node_id") is not None:
        raw.append(event["node_id"])
    return [i for i in raw if isinstance(i, int) and not isinstance(i, bool)][:200]


@database_sync_to_async
def _actor_for(user, org: Organization) -> Actor | None:
    return actor_for_user(user, org)


@database_sync_to_async
def _sees_any(actor: Actor, ids: list[int]) -> bool:
    """Whether the actor may read at least one of the nodes (one query)."""
    return visible_nodes(actor=actor).filter(id__in=ids).exists()


_UNKNOWN = object()  # the socket's actor is (re)built on the next event that needs it


class EventsConsumer(AsyncJsonWebsocketConsumer):
    _heartbeat: asyncio.Task | None = None
    _left_cleanly = True  # False once a group_discard failed: the entry lapses only with the expiry

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            # disconnect() runs only for a websocket.disconnect message. A consumer whose channel
            # receive raised (Redis timed out or restarted) or that was cancelled ends here without
            # one, and would stay in its groups, its heartbeat still beating, for as long as the
            # process lives. The exception itself still reaches the server, which closes the socket.
            await self._leave_group()
            self._forget_buffered()

    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not user.is_active:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        session = self.scope.get("session") or {}
        org = await _org_for(user, session.get("org_slug"))
        if org is None:
            await self.close(code=CLOSE_NOT_MEMBER)
            return
        self.org = org
        self.group = f"org.{org.id}"
        self.checked_at = _clock()  # _org_for just found the membership (and the login an active user)
        self.actor = _UNKNOWN
        self.revoked = False
        await self.channel_layer.group_add(self.group, self.channel_name)
        key = getattr(session, "session_key", None)
        self.session_key = key or None  # re-checked with the membership (_allowed)
        if key:
            self.session_group = session_group(key)
            await self.channel_layer.group_add(self.session_group, self.channel_name)
            # A logout between the session being read for this socket and the join above sent its
            # close to a group this socket was not yet in: the session row tells. (A logout whose
            # message goes out before its session row is deleted, as Django's does, can still slip
            # through here: the first re-check closes that socket.)
            if not await _session_still_holds(key, user):
                await self._leave_group()
                await self.close(code=CLOSE_UNAUTHENTICATED)
                return
        every = self._heartbeat_secs()
        if every is not None:
            self._heartbeat = asyncio.ensure_future(self._beat(every))
        await self.accept()

    async def disconnect(self, code):
        await self._leave_group()

    def _groups(self) -> list[str]:
        return [g for g in (getattr(self, "group", None), getattr(self, "session_group", None)) if g]

    def _heartbeat_secs(self) -> float | None:
        """The layer's own expiry, not a constant: a beat slower than the expiry the publishers
        apply would let live sockets lapse."""
        expiry = getattr(self.channel_layer, "group_expiry", None)
        return expiry / HEARTBEATS_PER_EXPIRY if expiry and expiry > 0 else None

    async def _beat(self, every: float) -> None:
        """Re-adds the socket to its groups: ``group_add`` re-scores the entry with the current
        time, which is what keeps it from expiring."""
        failing = False
        while True:
            await asyncio.sleep(every)
            try:
                for group in self._groups():
                    await asyncio.wait_for(self.channel_layer.group_add(group, self.channel_name), every)
            except Exception as exc:
                if not failing:  # once per outage, not once per beat
                    log.warning("live feed heartbeat failed (%s: %s); the socket stops receiving events if "
                                "it keeps failing for %.0f s", type(exc).__name__, exc,
                                every * HEARTBEATS_PER_EXPIRY)
                failing = True
            else:
                if failing:
                    log.info("live feed heartbeat works again")
                failing = False

    async def _stop_heartbeat(self) -> None:
        task, self._heartbeat = self._heartbeat, None
        if task is not None:
            task.cancel()
            # asyncio.wait, not await task: this consumer's own cancellation must not be swallowed
            await asyncio.wait([task])

    async def _leave_group(self) -> None:
        await self._stop_heartbeat()  # first: a beat landing after the discard would re-join
        groups = self._groups()
        for attr in ("group", "session_group"):
            if hasattr(self, attr):
                delattr(self, attr)
        if groups:
            await asyncio.gather(*(self._discard(group) for group in groups))

    async def _discard(self, group: str) -> None:
        try:
            await asyncio.wait_for(self.channel_layer.group_discard(group, self.channel_name), LEAVE_TIMEOUT_SECS)
        except Exception as exc:  # the socket is going anyway; its entry lapses with the expiry
            self._left_cleanly = False
            log.warning("live feed socket not removed from group %s (%s: %s); it drops out when its entry "
                        "expires (group_expiry %s s)", group, type(exc).__name__, exc,
                        getattr(self.channel_layer, "group_expiry", "?"))

    def _forget_buffered(self) -> None:
        """Drops what channels_redis buffered in this process for the ended channel.

        The layer hands every message it reads from the process's shared Redis key to a buffer per
        local channel (``receive_buffer``), and nothing removes the buffer of a channel no one
        receives on any more (django/channels_redis#384): up to its capacity of events per dead
        socket, for the life of the process. Events can still arrive after the leave (a
        ``group_send`` that read the members just before it, or any event until the entry
        expires when the discard failed), each waiting in Redis up to the layer's message expiry,
        so the buffer is dropped again once none can."""
        layer = getattr(self, "channel_layer", None)
        buffers = getattr(layer, "receive_buffer", None)
        name = getattr(self, "channel_name", None)
        if not isinstance(buffers, dict) or name is None:
            return  # another layer (in-memory) or none: nothing kept per channel
        buffers.pop(name, None)
        later = float(getattr(layer, "expiry", 60)) + 1
        if not self._left_cleanly:
            later += float(getattr(layer, "group_expiry", 0))
        asyncio.get_running_loop().call_later(later, buffers.pop, name, None)

    async def _allowed(self) -> bool:
        """Is the user still an active member of the socket's org? Asked again once the last
        answer is ``RECHECK_SECS`` old; on a no the socket leaves the group and is closed."""
        if self.revoked:
            return False  # events already queued for a closed socket are dropped
        if _clock() - self.checked_at < RECHECK_SECS:
            return True
        try:
            code = await _still_allowed(self.scope["user"].pk, self.org.id, self.session_key)
        except Exception as exc:  # fail closed: drop this event, ask again on the next one
            log.warning("live feed membership check failed: %s", exc)
            return False
        if code is None:
            self.checked_at = _clock()
            self.actor = _UNKNOWN  # teams and role may have changed too: rebuilt when next needed
            return True
        self.revoked = True
        await self._leave_group()
        await self.close(code=code)
        return False

    async def _for_recipient(self, event: dict) -> dict:
        """The event as this recipient may see it: session fields only for a reader of its nodes.

        The actor (role, teams) is built once per re-check window, not per event: a burst costs
        one visibility query per event carrying a session key, and the actor's few per window."""
        if not any(event.get(f) for f in _SESSION_FIELDS):
            return event  # nothing to hide: no query per recipient
        ids = _event_node_ids(event)
        try:
            if self.actor is _UNKNOWN:
                self.actor = await _actor_for(self.scope["user"], self.org)
            allowed = self.actor is not None and bool(ids) and await _sees_any(self.actor, ids)
        except Exception as exc:  # fail closed: a feed line without the key beats a leaked key
            log.warning("live feed visibility check failed: %s", exc)
            self.actor = _UNKNOWN
            allowed = False
        if allowed:
            return event
        return {k: v for k, v in event.items() if k not in _SESSION_FIELDS}

    async def org_event(self, message):
        if await self._allowed():
            await self.send_json(await self._for_recipient(message["event"]))

    async def session_logout(self, message):
        """The socket's login session was logged out (``frontend.signals``)."""
        self.revoked = True
        await self._leave_group()
        await self.close(code=CLOSE_UNAUTHENTICATED)
