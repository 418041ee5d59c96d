"""Publish org events to the live feed after the transaction commits; never fail a write."""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import async_to_sync
from django.db import transaction

from .env import env_float

log = logging.getLogger("nylon.events")

# A publish runs in the request thread once the write has committed, so it delays the answer. A
# Redis that accepts connections and answers nothing (frozen, failing over) would hold it for the
# layer's whole socket timeout (8 s, nylon_project/channels_config.py); the feed is best effort.
SEND_TIMEOUT_SECS = max(0.05, env_float("NYLON_EVENT_SEND_TIMEOUT_SECS", 1.0))


async def _send(layer, group: str, message: dict) -> None:
    await asyncio.wait_for(layer.group_send(group, message), SEND_TIMEOUT_SECS)


def send_to_group(group: str, message: dict, *, what: str) -> None:
    """Best effort: the live feed never fails the write or the logout that sends to it (and a
    channel layer that is down delivers nothing anyway), and waits at most ``SEND_TIMEOUT_SECS``;
    ``what`` names the message in the log."""
    try:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(_send)(layer, group, message)
    except TimeoutError:
        log.warning("%s not sent: the channel layer did not answer within %g s", what, SEND_TIMEOUT_SECS)
    except Exception as exc:
        log.warning("%s not sent: %s", what, exc)


def publish(org_id: int, event_type: str, payload: dict) -> None:
    transaction.on_commit(lambda: send_to_group(
        f"org.{org_id}", {"type": "org.event", "event": {"type": event_type, **payload}}, what="event publish"))
