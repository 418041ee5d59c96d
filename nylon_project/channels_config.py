"""The live feed's channel layer (channels_redis) configuration: ``CHANNEL_LAYERS["default"]["CONFIG"]``.

Two settings keep dead sockets from piling up in the org groups:

- ``socket_timeout`` above channels_redis's blocking read. A consumer waits for its messages with
  ``BZPOPMIN … 5`` (``RedisChannelLayer.brpop_timeout``), which Redis answers after 5 s when nothing
  came. redis-py 8 made 5 s its default socket timeout, so that read times out first (measured:
  ``TimeoutError`` at 5.00 s every time, against a nil answer at 5.02-5.10 s with a longer timeout)
  and every socket idle for 5 s died with it, without leaving its groups: the browser reconnected
  and the dead channel stayed a member (django/channels_redis#422; one idle console tab left 6 org
  group entries in 31 s). Still finite, so a Redis that stops answering fails the layer's calls
  instead of hanging them, but no longer than needed: a publish to a frozen Redis
  (``nylon_project.events``, after a write's commit) waits the whole timeout (measured 5.0 s with
  redis-py's default, 10.0 s with 10).
- ``group_expiry``. channels_redis keeps a group as a Redis sorted set scored by the time each
  channel joined (``group_add``), and ``group_send`` first drops members scored older than the
  expiry. Only ``group_discard`` removes one sooner, and a consumer that dies without running it
  (its process killed, its receive raising on a Redis outage) stays a member until then: every
  event to the group is pushed to its dead channel, in Redis and into the memory of a web process
  still reading that channel's shared key (django/channels_redis#384). channels_redis's default is
  24 h. The feed's consumer (``frontend.consumers.EventsConsumer``) re-adds itself every quarter of
  the expiry while its socket lives, so a live socket never lapses and a dead one is dropped within
  this many seconds. Shorter costs more heartbeats (two groups × ZADD + EXPIRE per socket per beat:
  10,000 sockets make ~1,300 Redis commands/s at 120 s); longer keeps a dead member, with up to the
  layer's capacity of queued events, that much longer."""

from __future__ import annotations

GROUP_EXPIRY_SECS = 120
# channels_redis's BZPOPMIN waits 5 s (RedisChannelLayer.brpop_timeout); Redis answers it a few tens
# of milliseconds late, a slow link up to about a second (tests/frontend/test_live_group_expiry.py
# checks the margin).
SOCKET_TIMEOUT_SECS = 8


def layer_config(*, redis_url: str, prefix: str) -> dict:
    """The ``CONFIG`` of ``channels_redis.core.RedisChannelLayer``."""
    return {
        "hosts": [{"address": redis_url, "socket_timeout": SOCKET_TIMEOUT_SECS}],
        "prefix": prefix,
        "group_expiry": GROUP_EXPIRY_SECS,
    }
