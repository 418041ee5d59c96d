"""Publish org events to the live feed after the transaction commits; never fail a write."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from django.db import transaction

log = logging.getLogger("nylon.events")


def publish(org_id: int, event_type: str, payload: dict) -> None:
    def send() -> None:
        try:
            from channels.layers import get_channel_layer

            layer = get_channel_layer()
            if layer is not None:
                async_to_sync(layer.group_send)(
                    f"org.{org_id}", {"type": "org.event", "event": {"type": event_type, **payload}}
                )
        except Exception as exc:  # the live feed is best effort; the write already committed
            log.warning("event publish failed: %s", exc)

    transaction.on_commit(send)
