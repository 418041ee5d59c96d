"""Logging out closes the live-feed sockets of that login session (and only those: the user's other
browsers stay logged in, and so do their feeds)."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver

from .consumers import session_group

log = logging.getLogger("nylon.events")


@receiver(user_logged_out, dispatch_uid="frontend.close_feeds_on_logout")
def close_feeds_on_logout(sender, request=None, user=None, **kwargs) -> None:
    # Sent before Django flushes the session, so the key is still the one the sockets joined with.
    key = getattr(getattr(request, "session", None), "session_key", None)
    if not key:
        return
    try:
        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(session_group(key), {"type": "session.logout"})
    except Exception as exc:  # the logout itself must not fail (and a layer that is down sends no events either)
        log.warning("live feed sockets of a logged-out session not closed: %s", exc)
