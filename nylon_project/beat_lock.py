"""One Celery beat per database: a Postgres advisory lock held for the beat's whole life.

Every periodic task (follow-up and ingest sweeps, reflection ticks, the LLM probe) must be sent by
one scheduler. ``nylon_run``'s ``run.lock`` covers one data dir; runs on several hosts (or data
dirs) sharing one ``DATABASE_URL`` each start a beat, and each would send every task. Here a beat
takes a session-level advisory lock on its own connection before it schedules anything; a second
beat waits as a standby and takes over when the holder's connection ends (its process died or
stopped). Postgres releases the lock with the session, so a kill -9 frees it too.

A holder that loses its connection (Postgres restart, network) no longer holds the lock: it exits
with ``LOST_EXIT_CODE`` so its supervisor (``nylon_run``, compose's restart policy) starts it
again, and it queues behind whichever beat took the lock meanwhile.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

import psycopg

from .env import env_float

log = logging.getLogger("nylon.beat")

# pg_advisory_lock(bigint) key: "nylonbt" in ASCII, a constant no other code here uses.
LOCK_KEY = 0x6E796C6F6E6274
LOST_EXIT_CODE = 3
APP_NAME_PREFIX = "nylon-beat"


def _conninfo() -> str:
    """The database Django uses (under pytest the test database), as a libpq URL."""
    from django.db import connection

    from . import embedded

    return embedded.url_with_database(embedded.database_url(), connection.settings_dict["NAME"])


def holder(conn: psycopg.Connection) -> str | None:
    """The application name of the session holding the lock (``nylon-beat <host> pid <n>``)."""
    row = conn.execute(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.database = "
        "(SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND ((l.classid::bigint << 32) | l.objid::bigint) = %s",
        (LOCK_KEY,),
    ).fetchone()
    return row[0] if row else None


class BeatLock:
    """The lock and the connection that holds it."""

    def __init__(self, conninfo: str | None = None, *, poll_secs: float = 2.0, watch_secs: float = 10.0) -> None:
        self.conninfo = conninfo
        self.poll_secs = poll_secs
        self.watch_secs = watch_secs
        self.conn: psycopg.Connection | None = None
        self.name = f"{APP_NAME_PREFIX} {socket.gethostname()} pid {os.getpid()}"

    def _connect(self) -> psycopg.Connection:
        return psycopg.connect(self.conninfo or _conninfo(), autocommit=True, application_name=self.name[:63],
                               connect_timeout=10)

    def try_acquire(self) -> bool:
        if self.conn is None or self.conn.closed:
            self.conn = self._connect()
        return bool(self.conn.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,)).fetchone()[0])

    def acquire(self, *, stop: threading.Event | None = None) -> bool:
        """Wait until this process holds the lock (True), or ``stop`` is set (False).

        A connection error while waiting is retried (the database may be starting): a standby
        must not die and lose its place for a database blip.
        """
        told = None
        while stop is None or not stop.is_set():
            try:
                if self.try_acquire():
                    log.info("beat: this process (%s) holds the schedule lock and sends the periodic tasks", self.name)
                    return True
                who = holder(self.conn) or "another beat"
                if who != told:
                    log.warning("beat: standby; %s sends the periodic tasks on this database, this beat takes "
                                "over when it stops", who)
                    told = who
            except psycopg.Error as exc:
                log.warning("beat: cannot reach the database for the schedule lock (%s); retrying", exc)
                self.close()
            if stop is not None:
                stop.wait(self.poll_secs)
            else:
                time.sleep(self.poll_secs)
        return False

    def still_held(self) -> bool:
        """True while the holding session is alive and still has the lock."""
        if self.conn is None or self.conn.closed:
            return False
        try:
            row = self.conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() "
                "AND ((classid::bigint << 32) | objid::bigint) = %s",
                (LOCK_KEY,),
            ).fetchone()
        except psycopg.Error:
            return False
        return bool(row and row[0])

    def watch(self, on_lost) -> threading.Thread:
        """Check the lock every ``watch_secs`` in a daemon thread; call ``on_lost()`` once if it is gone."""

        def loop() -> None:
            while True:
                time.sleep(self.watch_secs)
                if not self.still_held():
                    on_lost()
                    return

        t = threading.Thread(target=loop, name="beat-lock-watch", daemon=True)
        t.start()
        return t

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg.Error:
                pass
            self.conn = None


def _lost() -> None:
    log.error("beat: lost the schedule lock (database connection ended); exiting so the supervisor restarts "
              "this beat, which then waits its turn")
    logging.shutdown()
    os._exit(LOST_EXIT_CODE)


def hold_for_beat() -> BeatLock:
    """Called from Celery's ``beat_init``: block until this beat holds the lock, then watch it."""
    lock = BeatLock(poll_secs=env_float("NYLON_BEAT_LOCK_POLL_SECS", 2.0),
                    watch_secs=env_float("NYLON_BEAT_LOCK_WATCH_SECS", 10.0))
    lock.acquire()
    lock.watch(_lost)
    return lock
