"""Shared fixtures: two orgs, each with owner, admin, member and an agent (with a key); one
outsider user in neither. Integration tests use the real Postgres, Redis and Celery."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """A test database per pytest process: concurrent runs on one machine must not collide."""
    from django.conf import settings

    from nylon_project import namespace

    db = settings.DATABASES["default"]
    db.setdefault("TEST", {})["NAME"] = name = f"test_{db['NAME']}_{os.getpid()}"
    # The processes tests start name their things after the test database, whichever Redis the run
    # was given (a REDIS_URL of the developer's own keeps the old names by default).
    os.environ["NYLON_REDIS_NAMESPACE"] = "database"
    # This process and every process a test starts (live_env gives them the test database's URL)
    # then serve the test database: its namespace is theirs in Redis. Its own names (queue,
    # control exchange, cache and channel prefixes) keep the run apart from the dev instance and
    # from other runs on one Redis, and let tests ping and read the processes they start.
    namespace.adopt({**db, "NAME": name})


@pytest.fixture(autouse=True)
def _fast_passwords(request, settings):
    """The world fixture creates seven users, and PBKDF2 at full strength costs ~0.25 s each: most
    of a test's setup, and minutes of the suite. Tests whose server runs in another process keep the
    real hasher (that process verifies the passwords with its own settings)."""
    if "live_server_url" not in request.fixturenames:
        settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _background_tasks(request, settings):
    """Only tests that run a real worker enqueue background tasks; the others call the services."""
    if "celery_worker_process" not in request.fixturenames:
        settings.NYLON_ENQUEUE_TASKS = False


@dataclass
class OrgWorld:
    org: object
    owner: object
    admin: object
    member: object
    agent: object
    key: str
    team: object


def _make_org(slug: str) -> OrgWorld:
    from teams import services
    from teams.models import Agent, Membership, Role, Team, TeamMembership, TeamRole

    User = get_user_model()
    owner = User.objects.create_user(f"{slug}-owner", f"{slug}-owner@example.com", "pw-owner-123")
    admin = User.objects.create_user(f"{slug}-admin", f"{slug}-admin@example.com", "pw-admin-123")
    member = User.objects.create_user(f"{slug}-member", f"{slug}-member@example.com", "pw-member-123")
    org = services.organization_create(name=slug.upper(), slug=slug, owner=owner)
    Membership.objects.create(org=org, user=admin, role=Role.ADMIN)
    Membership.objects.create(org=org, user=member, role=Role.MEMBER)
    team = Team.objects.create(org=org, name=f"{slug} core", slug="core")
    TeamMembership.objects.create(org=org, team=team, user=member, role=TeamRole.MEMBER)
    agent = Agent.objects.create(org=org, name=f"{slug}-bot", team=team)
    _, key = services.api_key_create(actor=None, agent=agent, name="test")
    return OrgWorld(org=org, owner=owner, admin=admin, member=member, agent=agent, key=key, team=team)


@pytest.fixture
def fresh_cache():
    """An empty engine cache before and after the test: indexes of earlier tests' orgs (the test
    database reuses their ids) must not answer for this one's."""
    from memory.cache import get_cache

    get_cache().drop()
    yield
    get_cache().drop()


@pytest.fixture
def world(db):
    """Two independent orgs plus an outsider."""
    a = _make_org("alpha")
    b = _make_org("beta")
    outsider = get_user_model().objects.create_user("outsider", "outsider@example.com", "pw-out-123")
    return {"a": a, "b": b, "outsider": outsider}


@pytest.fixture
def client_for():
    """client_for(user_or_key) -> an APIClient acting as that user (session) or agent key."""

    def make(who) -> APIClient:
        c = APIClient()
        if who is None:
            return c
        if isinstance(who, str):
            c.credentials(HTTP_AUTHORIZATION=f"Bearer {who}")
        else:
            c.force_login(who)
        return c

    return make


def _spawn_worker(env: dict, queue: str, log):
    from nylon_project.live import start_worker

    # Its own process group, so a test can kill -9 the worker with its pool children.
    return start_worker(queue, env, concurrency=2, loglevel="INFO", log=log, own_group=True)


def _wait_for_worker(app, queue: str, proc, log) -> None:
    deadline = time.time() + 60
    while time.time() < deadline:
        replies = app.control.ping(destination=[f"{queue}@{os.uname().nodename}"], timeout=0.5)
        if replies:
            return
        if proc.poll() is not None:
            raise RuntimeError(f"worker exited: see {log.name}")
    _signal_group(proc, signal.SIGKILL)
    raise RuntimeError(f"worker did not start: see {log.name}")


def wait_until_worker_idle(queue: str, timeout: float = 30.0) -> None:
    """Until the test worker has nothing queued, reserved or running. A test whose last request
    leaves work behind (the proxy's write-back, then its conflict check) would otherwise end while
    the worker writes, and the teardown's TRUNCATE deadlocks with it (seen in a full run)."""
    import redis
    from django.conf import settings

    from nylon_project.celery import app

    name = f"{queue}@{os.uname().nodename}"
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if broker.llen(queue) == 0:
            inspect = app.control.inspect(destination=[name], timeout=1.0)
            busy = [*((inspect.active() or {}).get(name) or []), *((inspect.reserved() or {}).get(name) or [])]
            if not busy and broker.llen(queue) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"the test worker was still busy after {timeout:g} s")


def _signal_group(proc, sig) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker):
    """A real Celery worker process bound to the test database and a queue of its own.

    Yields a dict: proc, queue, log, env, and ``kill9()`` (SIGKILL to the worker and its pool,
    tasks in flight are lost to it) and ``restart()`` (start a fresh worker on the same queue).
    Unacknowledged tasks return to the queue after NYLON_CELERY_VISIBILITY_TIMEOUT (10 s here)."""
    from django.conf import settings

    from nylon_project import embedded
    from nylon_project.live import live_env

    queue = f"test-{uuid.uuid4().hex[:8]}"
    env = live_env()
    env["NYLON_CELERY_QUEUE"] = queue
    env["NYLON_TEST_WORKER"] = "1"
    env["NYLON_CELERY_VISIBILITY_TIMEOUT"] = "10"
    env["NYLON_CELERY_RESTORE_INTERVAL"] = "2"
    env["NYLON_CELERY_RESTORE_THROTTLE"] = "1"
    log = open(embedded.nylon_home() / f"worker-{queue}.log", "w")
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    from nylon_project.celery import app

    app.conf.task_default_queue = queue
    handle: dict = {"queue": queue, "log": log.name, "env": env, "proc": _spawn_worker(env, queue, log)}
    _wait_for_worker(app, queue, handle["proc"], log)

    def kill9() -> None:
        _signal_group(handle["proc"], signal.SIGKILL)
        handle["proc"].wait(timeout=20)

    def restart() -> None:
        if handle["proc"].poll() is None:
            kill9()
        handle["proc"] = _spawn_worker(env, queue, log)
        _wait_for_worker(app, queue, handle["proc"], log)

    handle["kill9"], handle["restart"] = kill9, restart
    yield handle
    _signal_group(handle["proc"], signal.SIGTERM)
    try:
        handle["proc"].wait(timeout=20)
    except subprocess.TimeoutExpired:
        _signal_group(handle["proc"], signal.SIGKILL)
    log.close()


@pytest.fixture(autouse=True)
def _worker_idle_before_flush(request):
    """Tests with the real worker end only when it has no task running, reserved or scheduled.

    The worker outlives each test (session scope); a task still in a transaction (a retry with
    back-off after an outage, say) deadlocks the TRUNCATE that resets the database after the test.
    This fixture is set up after the database one, so its teardown runs before that flush."""
    yield
    if "celery_worker_process" not in request.fixturenames:
        return
    from nylon_project.celery import app

    handle = request.getfixturevalue("celery_worker_process")
    # Ask this suite's worker only (other workers may share the Redis), and only as long as it answers.
    insp = app.control.inspect(destination=[f"{handle['queue']}@{os.uname().nodename}"], timeout=1.0, limit=1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if handle["proc"].poll() is not None:  # a test killed it: nothing can be in flight
            return
        busy = [insp.active() or {}, insp.reserved() or {}, insp.scheduled() or {}]
        if not any(tasks for state in busy for tasks in state.values()):
            return
        time.sleep(0.5)
    pytest.fail("the test worker still had tasks in flight 60 s after the test; the database reset would deadlock")
