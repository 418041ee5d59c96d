"""One Celery beat per database (nylon_project/beat_lock.py): a second beat on the same database
waits as a standby and takes over when the first one stops; a holder that loses its lock exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import psycopg
import pytest

from nylon_project import beat_lock
from nylon_project.beat_lock import BeatLock

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def locks():
    made: list[BeatLock] = []

    def make(**kw) -> BeatLock:
        lock = BeatLock(beat_lock._conninfo(), **kw)
        made.append(lock)
        return lock

    yield make
    for lock in made:
        lock.close()


def test_second_lock_waits_until_the_first_is_released(locks):
    first, second = locks(), locks()
    assert first.try_acquire()
    assert not second.try_acquire()
    assert first.still_held() and not second.still_held()
    with psycopg.connect(beat_lock._conninfo(), autocommit=True) as conn:
        assert beat_lock.holder(conn) == first.name

    got = threading.Event()
    waiter = threading.Thread(target=lambda: second.acquire() and got.set(), daemon=True)
    second.poll_secs = 0.1
    waiter.start()
    time.sleep(0.5)
    assert not got.is_set(), "the standby took the lock while the first holder still had it"
    first.close()  # the session ends: Postgres releases the lock
    assert got.wait(10), "the standby did not take over after the holder's session ended"
    assert second.still_held()


def test_acquire_gives_up_when_told_to_stop(locks):
    first, second = locks(), locks(poll_secs=0.05)
    assert first.try_acquire()
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    assert second.acquire(stop=stop) is False


def test_holder_whose_session_is_killed_is_told(locks):
    lock = locks(watch_secs=0.1)
    assert lock.try_acquire()
    lost = threading.Event()
    lock.watch(lost.set)
    time.sleep(0.3)
    assert not lost.is_set()
    with psycopg.connect(beat_lock._conninfo(), autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                      (lock.name[:63],))
    assert lost.wait(5), "a holder whose database session ended still believed it held the lock"
    assert not lock.still_held()


def test_standby_survives_a_database_error_while_waiting(locks, monkeypatch):
    lock = locks(poll_secs=0.01)
    calls = {"n": 0}
    real = BeatLock.try_acquire

    def flaky(self):
        calls["n"] += 1
        if calls["n"] == 1:
            raise psycopg.OperationalError("connection refused (test)")
        return real(self)

    monkeypatch.setattr(BeatLock, "try_acquire", flaky)
    assert lock.acquire() is True
    assert calls["n"] == 2


def _beat(env: dict, schedule: str, log) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "nylon_project", "beat", "-l", "INFO", "--schedule", schedule],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )


def _wait_for(path, text: str, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in path.read_text(errors="replace"):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_two_real_beats_send_the_schedule_once_and_the_standby_takes_over(tmp_path):
    from nylon_project.live import live_env

    env = live_env(NYLON_CELERY_QUEUE=f"test-beat-{uuid.uuid4().hex[:8]}", NYLON_FOLLOWUP_SWEEP_SECS="1",
                   NYLON_BEAT_LOCK_POLL_SECS="0.2", NYLON_BEAT_LOCK_WATCH_SECS="1")
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    files = [open(p, "w") for p in logs]
    procs = [_beat(env, str(tmp_path / "a.schedule"), files[0])]
    try:
        assert _wait_for(logs[0], "holds the schedule lock", 60), logs[0].read_text()
        procs.append(_beat(env, str(tmp_path / "b.schedule"), files[1]))
        assert _wait_for(logs[1], "beat: standby", 60), logs[1].read_text()
        assert _wait_for(logs[0], "Sending due task followup-sweep", 30), logs[0].read_text()
        time.sleep(3)  # the standby's schedule would be due by now
        assert "Sending due task" not in logs[1].read_text(), "two beats sent the periodic tasks"
        assert f"pid {procs[0].pid}" in logs[1].read_text(), "the standby did not name the holder"

        os.killpg(procs[0].pid, signal.SIGKILL)  # a crash: no clean release, Postgres ends the session
        procs[0].wait(10)
        assert _wait_for(logs[1], "holds the schedule lock", 30), logs[1].read_text()
        assert _wait_for(logs[1], "Sending due task followup-sweep", 30), logs[1].read_text()

        # The holder's session ends under it (a Postgres restart, say): it stops sending and exits
        # for its supervisor to restart it, rather than go on beside a beat that took the lock.
        with psycopg.connect(beat_lock._conninfo(), autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE %s",
                         (f"% pid {procs[1].pid}",))
        assert procs[1].wait(20) == beat_lock.LOST_EXIT_CODE
        assert "lost the schedule lock" in logs[1].read_text()
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
        for f in files:
            f.close()
