"""Live feed: one Channels group per org; services publish after commit (see nylon_project.events).

Every member of the org gets every event, so an event is filtered per recipient before it is sent:
node ids are opaque (``feed_nodes`` renders only the visible ones), but a session key names
someone's session and is readable only by those who may read one of the event's nodes (the API
shows a session key only on a node the actor can see, ``memory.apis``).

Access is decided at connect and again while the socket lives: a member removed from the org, or a
deactivated user, stops receiving within ``RECHECK_SECS`` and the socket is closed. The
socket is opened with the console session only (``AuthMiddlewareStack``; agent keys have no feed)."""

from __future__ import annotations

import logging
import time

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from memory.selectors import visible_nodes
from teams.auth import SESSION_ORG_KEY, actor_for_user, resolve_user_org
from teams.models import Membership, Organization

log = logging.getLogger("nylon.events")

# How long a socket trusts its last membership check. Each check is one query (the unique
# (org, user) membership index joined to the user's primary key), so a burst of events (a bulk
# import's chunks) costs a connection one query per second, not one per event, while a removed
# member or a deactivated user gets at most this long of further events.
RECHECK_SECS = 1.0
# Application close codes (4000-4999): the same as a refused connect.
CLOSE_UNAUTHENTICATED = 4401  # the user was deactivated (or deleted)
CLOSE_NOT_MEMBER = 4403  # the user is no longer a member of the socket's org

_clock = time.monotonic  # a module attribute so tests can move time


@database_sync_to_async
def _still_allowed(user_id: int, org_id: int) -> int | None:
    """None while the user is an active member of the org, else the close code."""
    active = Membership.objects.filter(org_id=org_id, user_id=user_id).values_list("user__is_active", flat=True)
    row = list(active[:1])
    if not row:
        return CLOSE_NOT_MEMBER  # removed from the org (or the user, or the org, deleted)
    return None if row[0] else CLOSE_UNAUTHENTICATED

# Payload fields that name a session's content rather than point at rows filtered later.
_SESSION_FIELDS = ("session_key",)


@database_sync_to_async
def _org_for(user, slug: str | None) -> int | None:
    """The console's org, by the rule of the API and the console pages (``resolve_user_org``):
    the session's org while the user is still a member of it, else their oldest membership; None
    for a user in no org. (The socket's copy of the session is not written back.)"""
    org = resolve_user_org(user, {SESSION_ORG_KEY: slug} if slug else {})
    return org.id if org else None


def _event_node_ids(event: dict) -> list[int]:
    raw = list(event.get("node_ids") or [])
    if event.get("node_id") is not None:
        raw.append(event["node_id"])
    return [i for i in raw if isinstance(i, int) and not isinstance(i, bool)][:200]


@database_sync_to_async
def _sees_any(user, org_id: int, ids: list[int]) -> bool:
    """Whether the user, as a member of the org now (teams may have changed since connect), may
    read at least one of the nodes."""
    org = Organization.objects.filter(pk=org_id).first()
    actor = actor_for_user(user, org) if org is not None else None
    return actor is not None and bool(ids) and visible_nodes(actor=actor).filter(id__in=ids).exists()


async def for_recipient(user, org_id: int, event: dict) -> dict:
    """The event as this recipient may see it: session fields only for a reader of its nodes."""
    if not any(event.get(f) for f in _SESSION_FIELDS):
        return event  # nothing to hide: no query per recipient
    try:
        allowed = await _sees_any(user, org_id, _event_node_ids(event))
    except Exception as exc:  # fail closed: a feed line without the key beats a leaked key
        log.warning("live feed visibility check failed: %s", exc)
        allowed = False
    if allowed:
        return event
    return {k: v for k, v in event.items() if k not in _SESSION_FIELDS}


class EventsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not user.is_active:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        session = self.scope.get("session") or {}
        org_id = await _org_for(user, session.get("org_slug"))
        if org_id is None:
            await self.close(code=CLOSE_NOT_MEMBER)
            return
        self.org_id = org_id
        self.group = f"org.{org_id}"
        self.checked_at = _clock()  # _org_for just found the membership (and the login an active user)
        self.revoked = False
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        await self._leave_group()

    async def _leave_group(self) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)
            del self.group

    async def _allowed(self) -> bool:
        """Is the user still an active member of the socket's org? Asked again once the last
        answer is ``RECHECK_SECS`` old; on a no the socket leaves the group and is closed."""
        if self.revoked:
            return False  # events already queued for a closed socket are dropped
        if _clock() - self.checked_at < RECHECK_SECS:
            return True
        try:
            code = await _still_allowed(self.scope["user"].pk, self.org_id)
        except Exception as exc:  # fail closed: drop this event, ask again on the next one
            log.warning("live feed membership check failed: %s", exc)
            return False
        if code is None:
            self.checked_at = _clock()
            return True
        self.revoked = True
        await self._leave_group()
        await self.close(code=code)
        return False

    async def org_event(self, message):
        if await self._allowed():
            await self.send_json(await for_recipient(self.scope["user"], self.org_id, message["event"]))
