"""A live-feed publish runs in the request thread after the write commits: a Redis that accepts
connections and answers nothing must not hold the write's answer for the channel layer's socket
timeout (8 s), only for NYLON_EVENT_SEND_TIMEOUT_SECS, and the write is not failed by it."""

from __future__ import annotations

import logging
import socket
import time

from nylon_project import events
from nylon_project.channels_config import layer_config


def test_a_publish_to_a_silent_redis_gives_up_within_the_bound(settings, caplog):
    from channels.layers import channel_layers

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # connections complete in the backlog; nothing ever reads or answers
        port = silent.getsockname()[1]
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                               "CONFIG": layer_config(redis_url=f"redis://127.0.0.1:{port}/0",
                                                                      prefix="silent")}}
        channel_layers.backends.pop("default", None)
        try:
            t = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="nylon.events"):
                events.send_to_group("org.1", {"type": "org.event", "event": {"type": "t"}}, what="event publish")
            took = time.monotonic() - t
        finally:
            channel_layers.backends.pop("default", None)
    assert events.SEND_TIMEOUT_SECS <= took < events.SEND_TIMEOUT_SECS + 1.5, took
    assert "event publish not sent: the channel layer did not answer within" in caplog.text
