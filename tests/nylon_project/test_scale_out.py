"""Scale-out on one database: two web processes (uvicorn) and two Celery workers on the test
database and one queue. A write through one web process is visible to the next resonate served by
the other (its engine cache catches up from Postgres, no invalidation message), and both workers
take background tasks, each exactly once, with no fact written twice."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from nylon_project.live import live_env, start_live_server, start_worker

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.worker]


def _workers(queue: str, names: list[str]) -> list[subprocess.Popen]:
    from nylon_project import embedded

    env = live_env(NYLON_CELERY_QUEUE=queue, NYLON_LLM_URL="")
    procs = []
    for name in names:
        with open(embedded.nylon_home() / f"worker-{name}.log", "w") as log:
            procs.append(start_worker(queue, env, name=name, loglevel="INFO", log=log, own_group=True))
    return procs


def _wait_ping(app, nodes: list[str], procs: list[subprocess.Popen]) -> None:
    deadline = time.time() + 90
    while time.time() < deadline:
        replies = app.control.ping(destination=nodes, timeout=1.0) or []
        if {n for r in replies for n in r} >= set(nodes):
            return
        assert all(p.poll() is None for p in procs), "a worker exited"
    raise AssertionError(f"workers {nodes} did not answer")


def _resonate(c: httpx.Client, query: str) -> dict:
    r = c.post("/api/v1/memories/resonate", json={"query": query, "reinforce": False})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.timeout(420)
def test_two_web_processes_and_two_workers_on_one_database(world):
    from django.db.models import Count

    from memory.models import MemorySession, Node
    from nylon_project.celery import app
    from reflection.models import SessionWork

    org = world["a"].org
    queue = f"scale-{uuid.uuid4().hex[:6]}"
    host = os.uname().nodename
    names = [f"{queue}-a", f"{queue}-b"]
    nodes = [f"{n}@{host}" for n in names]
    workers = _workers(queue, names)
    servers = []
    try:
        for _ in range(2):
            servers.append(start_live_server(NYLON_CELERY_QUEUE=queue, NYLON_ENQUEUE_TASKS="1", NYLON_LLM_URL="",
                                             NYLON_RATE_LIMIT="1000000/min"))
        _wait_ping(app, nodes, workers)
        headers = {"Authorization": f"Bearer {world['a'].key}"}
        web = [httpx.Client(base_url=s.url, headers=headers, timeout=120) for s in servers]

        # Coherence: both caches warm first, so what follows is a catch-up, not a cold build.
        for c in web:
            c.post("/api/v1/memories/weave", json={"text": "Warm-up note about the build farm."}).raise_for_status()
        for c in web:
            assert _resonate(c, "build farm")["served_by"] == "engine"
        for writer, reader in ((web[0], web[1]), (web[1], web[0])):
            token = f"quokka{uuid.uuid4().hex[:6]}"
            r = writer.post("/api/v1/memories/weave", json={"text": f"The {token} dashboard moved to Grafana."})
            assert r.status_code == 201, r.text
            node_id = r.json()["node_ids"][0]
            out = _resonate(reader, f"{token} dashboard")
            assert out["served_by"] == "engine"
            assert node_id in [h["node_id"] for h in out["hits"]], out

        # Background work through both web processes, taken by both workers.
        sessions = 10
        for i in range(sessions):
            body = {"session_key": f"scale-{i}", "end_session": True, "turns": [
                {"speaker": "Ana", "text": f"I moved the billing service to region {i} yesterday."},
                {"speaker": "Ben", "text": f"We decided that the staging cluster {i} is reviewed every Friday."},
                {"speaker": "Ana", "text": f"Priya approved the change to the onboarding doc {i} on Monday."}]}
            web[i % 2].post("/api/v1/memories/weave-session", json=body).raise_for_status()
        deadline = time.time() + 240
        keys = [f"scale-{i}" for i in range(sessions)]
        while time.time() < deadline:
            done = MemorySession.objects.filter(org=org, key__in=keys, abstraction_status="done").count()
            if done == sessions:
                break
            time.sleep(0.5)
        assert done == sessions
        stats = app.control.inspect(destination=nodes, timeout=3.0).stats() or {}
        totals = {n: stats.get(n, {}).get("total", {}) for n in nodes}
        per_worker = {n: sum(t.values()) for n, t in totals.items()}
        assert all(v > 0 for v in per_worker.values()), totals
        assert sum(t.get("reflection.abstract_session", 0) for t in totals.values()) == sessions, totals

        facts = Node.objects.filter(org=org, kind="fact", session_key__in=keys)
        assert not facts.values("text", "source_node_ids").annotate(n=Count("id")).filter(n__gt=1).exists()
        assert facts.count() == sum(SessionWork.objects.filter(session__key__in=keys, session__org=org)
                                    .values_list("facts", flat=True)) > 0
        for c in web:
            c.close()
    finally:
        for s in servers:
            s.stop()
        for p in workers:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(p.pid, signal.SIGKILL)
