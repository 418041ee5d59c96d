"""The database circuit breaker (nylon_project/postgresql/breaker.py): a pool that is merely busy
keeps waiting its timeout, an unreachable server is reported at once, and one probe per window
notices the server back. Real pools and the suite's real Postgres; "unreachable" is a socket
directory with no server in it, and "back" a link there to the real server's socket."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest
from django.db import OperationalError, connections
from psycopg_pool import ConnectionPool, PoolTimeout

from nylon_project.errors import exception_handler
from nylon_project.postgresql.base import DatabaseWrapper
from nylon_project.postgresql.breaker import (
    FAIL,
    PASS,
    PROBE,
    Breaker,
    BreakerConnection,
    DatabaseUnreachable,
    breaker_for,
    guard,
    is_unreachable,
)

pytestmark = pytest.mark.django_db


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_state_machine_fails_fast_only_after_an_unreachable_server_and_probes_once_per_window():
    clock = Clock()
    b = Breaker(window=2.0, clock=clock)
    assert b.admit(idle=0) == PASS  # nothing known: wait for the pool as usual (a busy pool too)
    b.record(reachable=True)
    assert b.admit(idle=0) == PASS

    b.record(reachable=False)
    assert b.admit(idle=0) == FAIL
    assert b.admit(idle=1) == PASS  # an idle connection: the pool checks it, no waiting involved
    clock.now += 1.9
    assert b.admit(idle=0) == FAIL

    clock.now += 0.2  # the window passed: one request probes, the others keep failing fast
    assert b.admit(idle=0) == PROBE
    assert b.admit(idle=0) == FAIL
    b.record(reachable=False)  # the probe found it still down: a new window
    clock.now += 1.0
    assert b.admit(idle=0) == FAIL
    clock.now += 1.0
    assert b.admit(idle=0) == PROBE
    b.record(reachable=True)  # the probe (or any connect of the pool) found it back
    assert b.admit(idle=0) == PASS and b.failed_at is None


def _params() -> dict:
    return connections["default"].get_connection_params() | {"autocommit": True}


def _real_socket(params: dict) -> Path:
    host = params.get("host") or ""
    if not host.startswith("/"):
        pytest.skip("the suite's Postgres is not on a unix socket")
    return Path(host) / f".s.PGSQL.{params.get('port') or 5432}"


def test_connect_errors_are_told_apart(tmp_path):
    params = _params()
    with pytest.raises(psycopg.OperationalError) as no_server:
        psycopg.connect(**{**params, "host": str(tmp_path)})
    assert is_unreachable(no_server.value), no_server.value
    with pytest.raises(psycopg.OperationalError) as no_database:  # a running server that answered
        psycopg.connect(**{**params, "dbname": "nylon_no_such_database"})
    assert not is_unreachable(no_database.value), no_database.value
    assert not is_unreachable(psycopg.OperationalError("FATAL:  sorry, too many clients already"))
    assert not is_unreachable(PoolTimeout("couldn't get a connection after 10.00 sec"))


def test_a_busy_pool_waits_its_timeout_and_does_not_trip_the_breaker():
    pool = ConnectionPool(kwargs=_params(), connection_class=BreakerConnection, min_size=1, max_size=1,
                          timeout=0.5, open=True)
    try:
        held = pool.getconn()
        guard(pool)  # the server answers: nothing to fail fast on
        started = time.monotonic()
        with pytest.raises(PoolTimeout):
            pool.getconn()
        assert time.monotonic() - started >= 0.45  # it waited for a connection to come back
        guard(pool)
        assert breaker_for(pool.conninfo, pool.kwargs).failed_at is None
        pool.putconn(held)
    finally:
        pool.close()


def test_an_unreachable_server_is_a_503_at_once_and_a_probe_finds_it_back(tmp_path, monkeypatch):
    """Through Django's backend as the API uses it: the first request waits the pool out (the
    breaker learns during it), the next ones fail in milliseconds; once the server is back, the
    first request after the window gets a connection."""
    monkeypatch.setenv("NYLON_DB_BREAKER_SECS", "0.5")  # read when this server's breaker is made
    real = connections["default"].settings_dict
    options = {**real["OPTIONS"], "pool": {**real["OPTIONS"]["pool"], "timeout": 2.0, "reconnect_timeout": 1.0}}
    db = DatabaseWrapper({**real, "HOST": str(tmp_path), "OPTIONS": options}, alias="breaker-test")
    connections["breaker-test"] = db  # django.contrib.postgres looks the alias up on connect
    try:
        started = time.monotonic()
        with pytest.raises(OperationalError):
            db.ensure_connection()
        assert time.monotonic() - started >= 1.9  # nothing known yet: the pool's whole wait

        for _ in range(3):
            started = time.monotonic()
            with pytest.raises(OperationalError) as fast:
                db.ensure_connection()
            assert time.monotonic() - started < 0.3
            assert isinstance(fast.value.__cause__, DatabaseUnreachable), fast.value
        response = exception_handler(fast.value, {})
        assert response.status_code == 503 and response["Retry-After"] == "1"

        (tmp_path / _real_socket(db.get_connection_params()).name).symlink_to(
            _real_socket(_params()))  # the server is back
        time.sleep(0.6)  # past the window: the next request probes
        started = time.monotonic()
        db.ensure_connection()
        with db.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
        assert time.monotonic() - started < 1.5, "the pool connected at once, not after its back-off"
        assert breaker_for(db.pool.conninfo, db.pool.kwargs).failed_at is None
    finally:
        db.close()
        db.close_pool()
        del connections["breaker-test"]
