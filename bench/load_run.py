"""Load: a fixed-rate, open-loop mix of resonate and weave against the ASGI server on loopback.

Open loop: request i is due at t0 + i / rate whatever happened to the earlier ones (an asyncio
generator with httpx; nothing waits for a response before sending the next request), and its
latency is measured from that *scheduled* time, so a stalled server is charged for the requests
it delayed (no coordinated omission). The run is bounded in time (--duration) and in count
(--max-requests), and in-flight requests are capped (--max-inflight; beyond it a request is
counted as an error, never silently skipped).

Unless --url is given, it starts uvicorn (--web-workers processes) and one Celery worker on a
private queue against the dev database (embedded Postgres or DATABASE_URL), creates a fresh org
with an agent key, seeds it with conversation turns through the API, warms up, then runs.

    .venv/bin/python bench/load_run.py --rate 8 --duration 180
    .venv/bin/python bench/load_run.py --saturate 4,8,12,16,24 --duration 30   # a step per rate
    .venv/bin/python bench/load_run.py --url http://127.0.0.1:8000 --rate 5     # a running server

Prints p50/p95/p99 per endpoint (from the scheduled time; the service time beside it), errors by
kind, the achieved rate and how late the generator itself dispatched (its own health check).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

import httpx  # noqa: E402
import numpy as np  # noqa: E402

logging.getLogger("httpx").setLevel(logging.WARNING)

TOPICS = ["billing service", "staging cluster", "onboarding doc", "Q3 roadmap", "on-call rota", "search index",
          "data warehouse", "mobile release", "security review", "design system", "pricing page", "SLA report"]
PEOPLE = ["Ana", "Ben", "Priya", "Chen", "Lola", "Omar"]
QUESTIONS = ["When did {p} move the {t}?", "Who approved the change to the {t}?", "What did we decide about the {t}?",
             "Is the {t} reviewed every Friday?", "What does {p} think of the {t}?", "{t} owner"]


def turn(rng: random.Random, i: int) -> dict:
    t, p, q = rng.choice(TOPICS), rng.choice(PEOPLE), rng.choice(PEOPLE)
    text = rng.choice([
        f"I moved the {t} to the new region yesterday, ticket {i}.",
        f"We decided that the {t} is reviewed every Friday by {q}.",
        f"{q} approved the change to the {t} on Monday ({i}).",
        f"I don't think the {t} needs a second owner; {q} disagrees.",
        f"The {t} budget went up by {rng.randint(2, 40)}% this quarter.",
    ])
    return {"speaker": p, "text": text}


def question(rng: random.Random) -> str:
    return rng.choice(QUESTIONS).format(p=rng.choice(PEOPLE), t=rng.choice(TOPICS))


@dataclass
class Sample:
    op: str
    scheduled: float
    sent: float
    done: float
    status: str  # HTTP status or exception class

    @property
    def ok(self) -> bool:
        return self.status.isdigit() and 200 <= int(self.status) < 300


@dataclass
class RunResult:
    rate: float
    duration: float
    samples: list[Sample] = field(default_factory=list)
    refused: int = 0  # over --max-inflight


async def open_loop(url: str, key: str, rate: float, duration: float, max_requests: int, resonate_share: float,
                    max_inflight: int, timeout: float, seed: int, run_id: str) -> RunResult:
    rng = random.Random(seed)
    n = min(max_requests, int(rate * duration))
    result = RunResult(rate=rate, duration=n / rate)
    limits = httpx.Limits(max_connections=max_inflight, max_keepalive_connections=max_inflight)
    headers = {"Authorization": f"Bearer {key}"}
    inflight = 0
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=timeout, limits=limits) as client:

        async def one(i: int, op: str, body: dict, scheduled: float) -> None:
            nonlocal inflight
            sent = time.perf_counter()
            path = "/api/v1/memories/resonate" if op == "resonate" else "/api/v1/memories/weave"
            try:
                r = await client.post(path, json=body)
                status = str(r.status_code)
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            finally:
                inflight -= 1
            result.samples.append(Sample(op, scheduled, sent, time.perf_counter(), status))

        tasks = []
        t0 = time.perf_counter() + 0.05
        for i in range(n):
            op = "resonate" if rng.random() < resonate_share else "weave"
            body = ({"query": question(rng), "k": 10} if op == "resonate"
                    else {**turn(rng, i), "session_key": f"load-{run_id}-{i // 20}", "event_id": f"{run_id}-{i}"})
            scheduled = t0 + i / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if inflight >= max_inflight:
                result.refused += 1
                result.samples.append(Sample(op, scheduled, scheduled, time.perf_counter(), "over-max-inflight"))
                continue
            inflight += 1
            tasks.append(asyncio.create_task(one(i, op, body, scheduled)))
        await asyncio.gather(*tasks)
    return result


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(xs, p)) if xs else float("nan")


def summarise(res: RunResult) -> dict:
    out: dict = {"target_rate": res.rate, "requests": len(res.samples), "refused_over_inflight": res.refused}
    first = min((s.scheduled for s in res.samples), default=0.0)
    last = max((s.done for s in res.samples), default=0.0)
    oks = [s for s in res.samples if s.ok]
    out["errors"] = len(res.samples) - len(oks)
    kinds: dict[str, int] = {}
    for s in res.samples:
        if not s.ok:
            kinds[f"{s.op}:{s.status}"] = kinds.get(f"{s.op}:{s.status}", 0) + 1
    out["error_kinds"] = kinds
    out["achieved_rate"] = round(len(oks) / (last - first), 2) if last > first else 0.0
    out["wall_s"] = round(last - first, 1)
    lag = [(s.sent - s.scheduled) * 1000 for s in res.samples if s.status != "over-max-inflight"]
    out["dispatch_lag_ms_p99"] = round(pct(lag, 99), 1)
    for op in ("resonate", "weave"):
        lat = [(s.done - s.scheduled) * 1000 for s in oks if s.op == op]
        svc = [(s.done - s.sent) * 1000 for s in oks if s.op == op]
        out[op] = {"n": sum(1 for s in res.samples if s.op == op), "ok": len(lat),
                   **{f"p{p}_ms": round(pct(lat, p), 1) for p in (50, 95, 99)},
                   "max_ms": round(max(lat), 1) if lat else None,
                   "service_p50_ms": round(pct(svc, 50), 1), "service_p99_ms": round(pct(svc, 99), 1)}
    return out


def print_summary(s: dict) -> None:
    print(f"\ntarget {s['target_rate']:g} req/s for {s['wall_s']} s: {s['requests']} requests, achieved "
          f"{s['achieved_rate']} ok/s, errors {s['errors']} {s['error_kinds'] or ''}, generator dispatch lag "
          f"p99 {s['dispatch_lag_ms_p99']} ms")
    print(f"{'endpoint':9s} {'n':>5s} {'ok':>5s}  {'p50':>8s} {'p95':>8s} {'p99':>8s} {'max':>8s}   "
          f"(service time p50 / p99)")
    for op in ("resonate", "weave"):
        e = s[op]
        print(f"{op:9s} {e['n']:5d} {e['ok']:5d}  {e['p50_ms']:6.1f}ms {e['p95_ms']:6.1f}ms {e['p99_ms']:6.1f}ms "
              f"{(e['max_ms'] or 0):6.1f}ms   ({e['service_p50_ms']:.1f} / {e['service_p99_ms']:.1f} ms)")


# -- the service under test ------------------------------------------------------------------


class Stack:
    """uvicorn (N processes) + one Celery worker on a private queue, on the dev database."""

    def __init__(self, web_workers: int):
        from nylon_project import embedded
        from nylon_project.live import live_env, start_live_server, start_worker

        self.queue = f"load-{uuid.uuid4().hex[:6]}"
        self.app_name = f"nylon-{self.queue}"  # libpq application_name: to count our DB connections
        env = dict(PGAPPNAME=self.app_name, NYLON_CELERY_QUEUE=self.queue, NYLON_ENQUEUE_TASKS="1", NYLON_LLM_URL="",
                   NYLON_RATE_LIMIT="10000000/min", NYLON_CACHE_PREFIX=f"load-{self.queue}",
                   NYLON_CHANNEL_PREFIX=f"load-{self.queue}")
        worker_log = embedded.nylon_home() / f"load-worker-{self.queue}.log"
        with open(worker_log, "w") as log:
            self.worker = start_worker(self.queue, live_env(**env), log=log)
        try:
            self.server = start_live_server(workers=web_workers, log_name="load-web", **env)
        except RuntimeError:
            self.worker.terminate()
            raise
        self.web = self.server.proc
        self.url = self.server.url
        self.logs = [self.server.log_path, worker_log]

    def connections(self) -> int:
        from django.db import connection

        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [self.app_name])
            return cur.fetchone()[0]

    def stop(self) -> None:
        for p in (self.web, self.worker):
            if p.poll() is None:
                p.terminate()
        for p in (self.web, self.worker):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def sample_connections(stack: Stack, peak: list[int], done: threading.Event) -> None:
    from django.db import connection

    while not done.wait(1.0):
        try:
            peak[0] = max(peak[0], stack.connections())
        except Exception as exc:  # a sample lost is not a reason to stop the run
            print(f"(connection sample failed: {exc})", file=sys.stderr)
    connection.close()


def make_org(slug: str) -> tuple[int, str]:
    from django.contrib.auth import get_user_model

    from teams import services as team_services
    from teams.models import Agent

    owner, _ = get_user_model().objects.get_or_create(username=f"{slug}-owner")
    org = team_services.organization_create(name="Load run", slug=slug, owner=owner)
    agent = Agent.objects.create(org=org, name="load-agent")
    _, key = team_services.api_key_create(actor=None, agent=agent)
    return org.id, key


def seed(url: str, key: str, turns: int, rng: random.Random) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as c:
        for s in range(0, turns, 20):
            body = {"session_key": f"seed-{s // 20}", "turns": [turn(rng, s + j) for j in range(min(20, turns - s))]}
            r = c.post("/api/v1/memories/weave-session", json=body)
            r.raise_for_status()
        for _ in range(10):  # warm-up: model, cache, connections
            c.post("/api/v1/memories/resonate", json={"query": question(rng)}).raise_for_status()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="target a running server (its DB must be the one this process sees)")
    ap.add_argument("--key", help="with --url: an agent key to use instead of creating an org")
    ap.add_argument("--rate", type=float, default=8.0, help="requests per second (all endpoints)")
    ap.add_argument("--duration", type=float, default=180.0, help="seconds per rate")
    ap.add_argument("--max-requests", type=int, default=20_000, help="hard cap on requests per rate")
    ap.add_argument("--resonate-share", type=float, default=0.7)
    ap.add_argument("--saturate", help="comma list of rates: one step each, then a table")
    ap.add_argument("--web-workers", type=int, default=1, help="uvicorn processes (when starting the server)")
    ap.add_argument("--max-inflight", type=int, default=256)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--seed-turns", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", help="write the summaries here")
    ap.add_argument("--keep", action="store_true", help="keep the org (default: deleted at the end)")
    args = ap.parse_args(argv)

    import _devdb

    _devdb.setup()
    from teams.models import Organization

    rng = random.Random(args.seed)
    stack = None
    slug = None
    try:
        if args.url and args.key:
            url, key = args.url.rstrip("/"), args.key
        else:
            slug = f"load-{uuid.uuid4().hex[:6]}"
            org_id, key = make_org(slug)
            if args.url:
                url = args.url.rstrip("/")
            else:
                stack = Stack(args.web_workers)
                url = stack.url
            t = time.perf_counter()
            seed(url, key, args.seed_turns, rng)
            print(f"seeded {args.seed_turns} turns in {time.perf_counter() - t:.1f} s; load average "
                  f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
        rates = [float(r) for r in args.saturate.split(",")] if args.saturate else [args.rate]
        summaries = []
        for i, rate in enumerate(rates):
            load_before = os.getloadavg()[0]
            peak = [0]
            done = threading.Event()
            sampler = threading.Thread(target=sample_connections, args=(stack, peak, done), daemon=True)
            if stack is not None:
                sampler.start()
            res = asyncio.run(open_loop(url, key, rate, args.duration, args.max_requests, args.resonate_share,
                                        args.max_inflight, args.timeout, args.seed + i, uuid.uuid4().hex[:6]))
            done.set()
            s = summarise(res)
            s["peak_db_connections"] = peak[0] if stack is not None else None
            s["load_avg_before"], s["load_avg_after"] = round(load_before, 1), round(os.getloadavg()[0], 1)
            s["web_workers"] = args.web_workers if stack else None
            summaries.append(s)
            print_summary(s)
            if stack is not None:
                print(f"peak Postgres connections of the web and worker processes: {peak[0]}")
            print(f"(load average {s['load_avg_before']} -> {s['load_avg_after']})", flush=True)
        if len(summaries) > 1:
            print("\nrate  achieved  errors  resonate p50/p99 ms   weave p50/p99 ms")
            for s in summaries:
                print(f"{s['target_rate']:4g}  {s['achieved_rate']:8.2f}  {s['errors']:6d}  "
                      f"{s['resonate']['p50_ms']:8.1f} / {s['resonate']['p99_ms']:<8.1f}  "
                      f"{s['weave']['p50_ms']:8.1f} / {s['weave']['p99_ms']:<8.1f}")
        if slug:  # what one process holds for this org after the run (a cold build in this process)
            from memory.cache import EngineCache

            index = EngineCache().get(org_id)
            per_node = index.nbytes() / max(index.n, 1)
            print(f"\nengine index of the org: {index.n} nodes, {index.nbytes() / 1e6:.1f} MB "
                  f"({per_node / 1024:.1f} KiB per node, embeddings included)")
            for s in summaries:
                s["index_nodes"], s["index_bytes"] = index.n, index.nbytes()
        if args.json:
            Path(args.json).write_text(json.dumps(summaries, indent=2))
        return 0 if all(s["errors"] == 0 for s in summaries) else 1
    finally:
        if stack is not None:
            stack.stop()
        if slug and not args.keep:
            Organization.objects.filter(slug=slug).delete()


if __name__ == "__main__":
    sys.exit(main())
