"""Publish org events to the live feed after the transaction commits; never fail a write."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from django.db import transaction

log = logging.getLogger("nylon.events")


def send_to_group(group: str, message: dict, *, what: str) -> None:
    """Best effort: the live feed never fails the write or the logout that sends to it (and a
    channel layer that is down delivers nothing anyway); ``what`` names the message in the log."""
    try:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(group, message)
    except Exception as exc:
        log.warning("%s not sent: %s", what, exc)


def publish(org_id: int, event_type: str, payload: dict) -> None:
    transaction.on_commit(lambda: send_to_group(
        f"org.{org_id}", {"type": "org.event", "event": {"type": event_type, **payload}}, what="event publish"))
