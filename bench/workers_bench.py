"""Background work, measured: write-API latency with the worker idle vs busy, and task throughput
of one worker process (session abstraction + conflict detection, heuristic path, no LLM).

Starts a real uvicorn process and a real Celery worker (concurrency 1) on a queue of their own,
against the embedded database; writes through the HTTP API.

    .venv/bin/python bench/workers_bench.py [sessions_in_backlog] [writes_per_phase]
"""

from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

import _devdb  # noqa: E402  (bench/: Django set up, the dev database migrated)

_devdb.setup()

import httpx  # noqa: E402
import numpy as np  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402

from memory.models import MemorySession, Node  # noqa: E402
from nylon_project.celery import app  # noqa: E402
from nylon_project.live import start_live_server, start_worker  # noqa: E402
from teams import services as team_services  # noqa: E402
from teams.models import Agent, Organization  # noqa: E402

ORG = "bench-workers"
logging.getLogger("httpx").setLevel(logging.WARNING)
TOPICS = ["the billing service", "the staging cluster", "our onboarding doc", "the Q3 roadmap", "the on-call rota"]


def session_body(i: int, end: bool) -> dict:
    topic = TOPICS[i % len(TOPICS)]
    turns = [
        {"speaker": "Ana", "text": f"I moved {topic} to the new region yesterday ({i})."},
        {"speaker": "Ben", "text": f"Great. I will update the runbook for {topic} tomorrow."},
        {"speaker": "Ana", "text": f"We decided that {topic} is reviewed every Friday."},
        {"speaker": "Ben", "text": f"I don't think {topic} needs a second owner."},
        {"speaker": "Ana", "text": f"Priya approved the change to {topic} on Monday."},
    ]
    return {"session_key": f"bench-{i}", "turns": turns, "end_session": end}


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(xs, p))


def main() -> None:
    backlog = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    writes = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    Organization.objects.filter(slug=ORG).delete()
    owner, _ = get_user_model().objects.get_or_create(username="bench-workers-owner")
    org = team_services.organization_create(name="Workers bench", slug=ORG, owner=owner)
    agent = Agent.objects.create(org=org, name="bench-agent")
    _, key = team_services.api_key_create(actor=None, agent=agent)
    queue = f"bench-{uuid.uuid4().hex[:6]}"
    env = dict(os.environ, NYLON_CELERY_QUEUE=queue, NYLON_ENQUEUE_TASKS="1", NYLON_LLM_URL="")
    worker = start_worker(queue, env)
    server = start_live_server(NYLON_CELERY_QUEUE=queue, NYLON_ENQUEUE_TASKS="1", NYLON_LLM_URL="",
                               NYLON_RATE_LIMIT="100000/min")
    headers = {"Authorization": f"Bearer {key}"}
    try:
        while not app.control.ping(destination=[f"{queue}@{os.uname().nodename}"], timeout=0.5):
            time.sleep(0.2)
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as c:
            for i in range(3):  # warm-up: model load, cache build
                c.post("/api/v1/memories/weave-session", json=session_body(10_000 + i, False))
            idle = []
            for i in range(writes):
                t = time.perf_counter()
                assert c.post("/api/v1/memories/weave-session", json=session_body(20_000 + i, False)).status_code == 201
                idle.append((time.perf_counter() - t) * 1000)
            # let the conflict checks of the idle phase drain before loading the worker
            time.sleep(2)
            t_backlog = time.perf_counter()
            for i in range(backlog):
                c.post("/api/v1/memories/weave-session", json=session_body(i, True))
            busy = []
            for i in range(writes):
                t = time.perf_counter()
                assert c.post("/api/v1/memories/weave-session", json=session_body(30_000 + i, False)).status_code == 201
                busy.append((time.perf_counter() - t) * 1000)
            busy_while_draining = MemorySession.objects.filter(org=org, key__startswith="bench-",
                                                               abstraction_status="done").count() < backlog
            deadline = time.time() + 1800
            while time.time() < deadline:
                done = MemorySession.objects.filter(org=org, abstraction_status__in=["done", "failed"],
                                                    key__in=[f"bench-{i}" for i in range(backlog)]).count()
                if done >= backlog:
                    break
                time.sleep(0.5)
            drain_s = time.perf_counter() - t_backlog
        facts = Node.objects.filter(org=org, kind="fact").count()
    finally:
        server.stop()
        worker.terminate()
        worker.wait(timeout=30)
        Organization.objects.filter(slug=ORG).delete()

    tasks = backlog * 2 + writes  # an abstraction and a conflict check per backlog session, checks for busy writes
    print(f"weave-session (5 turns) latency, worker idle : p50 {pct(idle, 50):7.1f} ms  p95 {pct(idle, 95):7.1f} ms")
    print(f"weave-session (5 turns) latency, worker busy : p50 {pct(busy, 50):7.1f} ms  p95 {pct(busy, 95):7.1f} ms"
          f"  (backlog still draining during the phase: {busy_while_draining})")
    print(f"one worker (concurrency 1): {backlog} sessions abstracted + {tasks - backlog} conflict checks in "
          f"{drain_s:.1f} s -> {backlog / drain_s:.2f} sessions/s, ~{tasks / drain_s:.2f} tasks/s; {facts} facts written")


if __name__ == "__main__":
    main()
