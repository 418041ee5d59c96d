"""With Redis down, sending a task fails fast so its caller falls back at once (a proxy write-back
writes in-process, a conflict check waits for the beat's sweep). Every send used to subscribe to
the task's result on the Redis result backend first, which retried 20 times (~19 s) before the
broker's refusal came."""

from __future__ import annotations

import socket
import time

import kombu.exceptions
import pytest
from celery import Celery


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_send_with_redis_down_fails_within_seconds():
    app = Celery("redis-down-probe")
    app.config_from_object("django.conf:settings", namespace="CELERY")  # the project's settings
    dead = f"redis://127.0.0.1:{_closed_port()}/0"
    app.conf.broker_url = app.conf.result_backend = dead

    @app.task(name="probe.noop")
    def noop():  # pragma: no cover - never runs: nothing takes the message
        return None

    started = time.monotonic()
    with pytest.raises(kombu.exceptions.OperationalError):
        noop.delay()
    assert time.monotonic() - started < 6
