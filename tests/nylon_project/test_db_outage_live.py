"""Postgres stopped under a live server, end to end: a write answers a retryable 503 with
Retry-After (not a 500, not a hang) — the first after the connection pool's wait, the next ones at
once through the circuit breaker — and once Postgres is back the same write (same ``event_id``)
succeeds within seconds and is stored once.

Private instances only, as in test_faults.py: a scratch PostgreSQL 18 + pgvector cluster
(bench/faults.py's ``PrivatePostgres``, in a temporary directory) and a uvicorn process
(``nylon_project.live``) bound to it; the suite's own database is never stopped."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]

MAKE_KEY = """
from django.contrib.auth import get_user_model
from teams import services
from teams.models import Agent
owner = get_user_model().objects.create_user(username="outage-owner")
org = services.organization_create(name="Outage", slug="outage", owner=owner)
_, key = services.api_key_create(actor=None, agent=Agent.objects.create(org=org, name="outage-agent"))
print("KEY=" + key)
"""


def _bench_faults():
    """bench/faults.py (a script, not a package), loaded once under a name of its own."""
    if "bench_faults" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_faults", ROOT / "bench" / "faults.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_faults"] = module  # its dataclasses look their module up while loading
        spec.loader.exec_module(module)
    return sys.modules["bench_faults"]


def _manage(env: dict, *args: str) -> str:
    proc = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


def _start(pg) -> None:
    """Start the stopped cluster as pgserver did: unix socket only, in the directory its URL names."""
    socket_dir = parse_qs(urlsplit(pg.url).query)["host"][0]
    pg._pg_ctl(["-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(pg.pgdata / "log"), "start"])


@pytest.fixture
def private_server():
    """A migrated private Postgres with one agent key, and a live server bound to it: (pg, url, key)."""
    from nylon_project.live import start_live_server

    work = Path(tempfile.mkdtemp(prefix="nylon-dbdown-"))
    work.chmod(0o755)  # the postgres system user (when run as root) must traverse it
    pg = server = None
    try:
        pg = _bench_faults().PrivatePostgres(work / "pg")
        env = {k: v for k, v in os.environ.items() if not k.startswith("NYLON_")}
        env.update({"DATABASE_URL": pg.url, "DJANGO_SETTINGS_MODULE": "nylon_project.settings",
                    "NYLON_HOME": str(work / "home")})
        _manage(env, "migrate", "--verbosity", "0")
        key = _manage(env, "shell", "-c", MAKE_KEY).split("KEY=", 1)[1].strip()
        server = start_live_server(log_name="uvicorn-dbdown", DATABASE_URL=pg.url, NYLON_LLM_URL="")
        yield pg, server.url, key
    finally:
        if server is not None:
            server.stop()
        if pg is not None:
            pg.stop()
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.timeout(420)
def test_a_write_while_postgres_is_down_is_a_quick_503_and_succeeds_once_it_is_back(private_server):
    pg, url, key = private_server
    body = {"session_key": "outage", "turns": [{"text": "The nightly backup moved to 02:00.", "event_id": "e1"}]}
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
        warm = c.post("/api/v1/memories/weave-session", json={**body, "turns": [
            {"text": "The staging cluster runs on Postgres 18.", "event_id": "e0"}]})
        assert warm.status_code == 201, warm.text  # embedder loaded, pool warm: the outage is all we time

        pg.stop()
        answers = []
        for _ in range(5):  # a client honouring Retry-After
            started = time.monotonic()
            r = c.post("/api/v1/memories/weave-session", json=body)
            answers.append((r.status_code, r.headers.get("Retry-After"), round(time.monotonic() - started, 1)))
            assert r.status_code == 503, (answers, r.text)
            assert r.json()["error"]["code"] == "unavailable", r.text
            time.sleep(float(r.headers.get("Retry-After", "1")))
        assert all(retry == "1" for _, retry, _ in answers), answers
        # The first write finds the pool's idle connection dead and waits out NYLON_DB_POOL_TIMEOUT
        # (10 s by default) while the pool fails to reconnect: bounded, never a hang. The breaker has
        # then seen the server unreachable, so every later write is answered at once (a probe's
        # own connect attempt included).
        assert answers[0][2] < 12, answers
        assert max(secs for _, _, secs in answers[1:]) <= 3, answers

        _start(pg)
        back = time.monotonic()
        deadline = back + 60
        while True:  # the same client
            r = c.post("/api/v1/memories/weave-session", json=body)
            if r.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(float(r.headers.get("Retry-After", "1")))
        recovered = time.monotonic() - back
        assert r.status_code == 201, r.text
        assert r.json()["created"] == 1
        print(f"while down (status, Retry-After, s): {answers}; write ok {recovered:.1f} s after start")
        # A probe per breaker window (2 s) notices the restart; the pool then connects at once instead
        # of after its reconnect back-off.
        assert recovered <= 5, recovered
        again = c.post("/api/v1/memories/weave-session", json=body)  # the retried write is stored once
        assert again.status_code == 200 and again.json()["created"] == 0  # a replay: 200, not 201
        assert again.json()["node_ids"] == r.json()["node_ids"]
