"""Live feed: one Channels group per org; services publish after commit (see nylon_project.events)."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from teams.models import Organization


@database_sync_to_async
def _org_for(user, slug: str | None) -> int | None:
    """The console's org (frontend.console.console_actor): the session's org while the user is
    still a member of it, else their first org; None for a user in no org."""
    orgs = Organization.objects.filter(memberships__user=user)
    org = orgs.filter(slug=slug).first() if slug else None
    if org is None:
        org = orgs.order_by("id").first()
    return org.id if org else None


class EventsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        session = self.scope.get("session") or {}
        org_id = await _org_for(user, session.get("org_slug"))
        if org_id is None:
            await self.close(code=4403)
            return
        self.group = f"org.{org_id}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def org_event(self, message):
        await self.send_json(message["event"])
