"""Concurrent requests of one org on one web process: Django runs each request's sync view in a
thread of its own, so a resonate can be reading the org's engine index while another request's
catch-up appends the rows a concurrent weave just committed. Every call must still answer 2xx
(found by bench/load_run.py: an IndexError 500 once in a few hundred calls)."""

from __future__ import annotations

import threading
import time
from collections import Counter

import httpx
import pytest

from nylon_project.live import start_live_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TOPICS = ["billing service", "staging cluster", "onboarding doc", "Q3 roadmap", "on-call rota", "search index"]


def test_resonate_while_weaving_never_fails(world):
    key = world["a"].key
    server = start_live_server(NYLON_RATE_LIMIT="1000000/min")
    statuses: Counter = Counter()
    lock = threading.Lock()
    stop = threading.Event()

    def run(kind: str, idx: int) -> None:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
            i = 0
            while not stop.is_set():
                t = TOPICS[(idx + i) % len(TOPICS)]
                if kind == "weave":
                    r = c.post("/api/v1/memories/weave-session", json={"session_key": f"w{idx}", "turns": [
                        {"text": f"We moved the {t} to region {i} on Monday."},
                        {"text": f"The {t} is reviewed by team {idx} every Friday."}]})
                else:
                    r = c.post("/api/v1/memories/resonate", json={"query": f"who reviews the {t}?", "reinforce": False})
                with lock:
                    statuses[(kind, r.status_code)] += 1
                i += 1

    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
            for s in range(3):  # something to search, and a warm model and cache
                c.post("/api/v1/memories/weave-session", json={"session_key": f"seed{s}", "turns": [
                    {"text": f"Seed note {s}{j} about the {t}."} for j, t in enumerate(TOPICS)]}).raise_for_status()
            c.post("/api/v1/memories/resonate", json={"query": "seed"}).raise_for_status()
        threads = [threading.Thread(target=run, args=("weave", i)) for i in range(2)]
        threads += [threading.Thread(target=run, args=("resonate", i)) for i in range(4)]
        for th in threads:
            th.start()
        deadline = time.time() + 90  # at least 12 s, and enough calls even on a loaded machine
        time.sleep(12)
        while time.time() < deadline and (statuses[("resonate", 200)] < 30 or statuses[("weave", 201)] < 8):
            time.sleep(0.5)
        stop.set()
        for th in threads:
            th.join(timeout=90)
    finally:
        server.stop()
    bad = {k: v for k, v in statuses.items() if not 200 <= k[1] < 300}
    assert statuses[("resonate", 200)] >= 10 and statuses[("weave", 201)] >= 3, statuses
    assert not bad, (statuses, server.log()[-4000:])
