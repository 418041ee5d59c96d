"""Logging out closes the live-feed sockets of that login session (and only those: the user's other
browsers stay logged in, and so do their feeds)."""

from __future__ import annotations

from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver

from nylon_project.events import send_to_group

from .consumers import session_group


@receiver(user_logged_out, dispatch_uid="frontend.close_feeds_on_logout")
def close_feeds_on_logout(sender, request=None, user=None, **kwargs) -> None:
    # Sent before Django flushes the session, so the key is still the one the sockets joined with.
    key = getattr(getattr(request, "session", None), "session_key", None)
    if not key:
        return
    send_to_group(session_group(key), {"type": "session.logout"},
                  what="the close of a logged-out session's live-feed sockets")
