"""Added latency of the memory proxy, against the upstream alone, in the same run.

A scripted OpenAI-compatible upstream on loopback answers at once; the same chat request is sent
N times straight to it and N times through Nylon's proxy (a real uvicorn process on the embedded
database, an agent with memories and a persona-free context). Prints p50/p95 of both, the
overhead, and the proxy's own per-agent stats (tokens injected, prefix stability).

    .venv/bin/python bench/proxy_overhead.py [N]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

import _devdb  # noqa: E402  (bench/: Django set up, the dev database migrated)

_devdb.setup()

import logging  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402

from memory import services as memory_services  # noqa: E402
from nylon_project.live import start_live_server  # noqa: E402
from teams import services as team_services  # noqa: E402
from teams.auth import actor_for_agent  # noqa: E402
from teams.models import Agent, Organization  # noqa: E402
from tests.proxy.upstream import ScriptedUpstream  # noqa: E402

ORG = "bench-proxy"
logging.getLogger("httpx").setLevel(logging.WARNING)


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(xs, p))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    Organization.objects.filter(slug=ORG).delete()
    owner, _ = get_user_model().objects.get_or_create(username="bench-proxy-owner")
    org = team_services.organization_create(name="Proxy bench", slug=ORG, owner=owner)
    agent = Agent.objects.create(org=org, name="bench-agent")
    _, key = team_services.api_key_create(actor=None, agent=agent)
    actor = actor_for_agent(agent, scopes=frozenset({"read", "write"}))
    memory_services.weave_session(actor=actor, session_key="s1", turns=[
        memory_services.TurnIn(text=t, speaker="user") for t in (
            "Our deploys happen on Tuesdays after the 10:00 standup.",
            "The staging cluster is called ember and runs in eu-west.",
            "Priya owns the billing service and prefers short design docs.",
        )])

    upstream = ScriptedUpstream(chunk_delay=0.0)
    server = start_live_server(NYLON_PROXY_OPENAI_UPSTREAM=f"{upstream.url}/v1", NYLON_ENQUEUE_TASKS="0")
    body = {"model": "toy", "messages": [{"role": "system", "content": "You are a helpful release bot."},
                                         {"role": "user", "content": "When do we deploy to ember?"}]}
    direct, proxied = [], []
    try:
        with httpx.Client(timeout=30) as c:
            for _ in range(5):  # warm both paths (first proxy call builds the org's cache)
                c.post(f"{upstream.url}/v1/chat/completions", json=body, headers={"Authorization": "Bearer sk"})
                c.post(f"{server.url}/proxy/openai/v1/chat/completions", json=body,
                       headers={"Authorization": "Bearer sk", "X-Nylon-Key": key})
            for _ in range(n):  # interleaved so both see the same machine noise
                t = time.perf_counter()
                r = c.post(f"{upstream.url}/v1/chat/completions", json=body, headers={"Authorization": "Bearer sk"})
                direct.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200
                t = time.perf_counter()
                r = c.post(f"{server.url}/proxy/openai/v1/chat/completions", json=body,
                           headers={"Authorization": "Bearer sk", "X-Nylon-Key": key})
                proxied.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, r.text
                injected = r.headers.get("X-Nylon-Memory")
            stats = c.get(f"{server.url}/api/v1/proxy/stats", headers={"Authorization": f"Bearer {key}"}).json()
    finally:
        server.stop()
        upstream.close()
        Organization.objects.filter(slug=ORG).delete()

    print(f"requests: {n} each, X-Nylon-Memory of the last: {injected}")
    print(f"upstream alone : p50 {pct(direct, 50):7.2f} ms   p95 {pct(direct, 95):7.2f} ms")
    print(f"through proxy  : p50 {pct(proxied, 50):7.2f} ms   p95 {pct(proxied, 95):7.2f} ms")
    print(f"added latency  : p50 {pct(proxied, 50) - pct(direct, 50):7.2f} ms   "
          f"p95 {pct(proxied, 95) - pct(direct, 95):7.2f} ms")
    print(f"proxy stats    : {stats}")


if __name__ == "__main__":
    main()
