"""The web process's memory under reads only: RSS growth per 1,000 reads with repeated queries vs
queries that each carry a unique token, beside a baseline of the same run (the authenticated no-op
``GET /api/v1/ping`` through the same server).

It starts one uvicorn process on the dev database (embedded Postgres or DATABASE_URL; no worker, no
background tasks), creates a fresh org with an agent key, weaves ``--seed-turns`` turns through the
API, warms up (model, engine cache, connections, both query kinds), and then sends only reads, from
``--concurrency`` client threads, in phases of ``--reads`` requests each (``--phases``):

- ``ping``: ``GET /api/v1/ping`` (authentication, middleware, DRF; no memory read);
- ``repeat``: ``--endpoint`` with one of 20 fixed questions, in turn;
- ``unique``: the same questions, each with a token never sent before (a name-like ``Zq<hex>``, so
  the router and the tokenizer see a new word every time, as the SRE run's queries did).

``--endpoint`` is ``resonate`` (``POST memories/resonate``, k 10) or ``context`` (``POST context``).
RSS is read from ``/proc/<pid>/status`` every ``--every`` requests, after the requests in flight
have finished. With ``--diag`` the server runs under a small wrapper that answers SIGUSR1 with the
process's own view (glibc's ``mallinfo2``: heap in use vs free; the stem cache; ``re``'s pattern
cache; Python's allocated blocks; optionally the top ``tracemalloc`` growth with ``--tracemalloc``):
what grew, Python objects or the allocator's free lists. ``--server-env K=V`` passes settings to the
server only (e.g. ``MALLOC_ARENA_MAX=2``).

    .venv/bin/python bench/read_rss.py                      # resonate, phases ping,repeat,unique,unique,repeat
    .venv/bin/python bench/read_rss.py --endpoint context --reads 1000
    .venv/bin/python bench/read_rss.py --diag --server-env MALLOC_ARENA_MAX=2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

import httpx  # noqa: E402

KiB = 1024
MiB = 1024 * 1024
TOPICS = ["billing service", "staging cluster", "onboarding doc", "Q3 roadmap", "on-call rota", "search index",
          "data warehouse", "mobile release", "security review", "design system", "pricing page", "SLA report"]
PEOPLE = ["Ana", "Ben", "Priya", "Chen", "Lola", "Omar"]
QUESTIONS = ["When did {p} move the {t}?", "Who approved the change to the {t}?", "What did we decide about the {t}?",
             "Is the {t} reviewed every Friday?", "What does {p} think of the {t}?", "{t} owner"]

# Run inside the server process before uvicorn (``--diag``): SIGUSR1 writes the process's own
# figures to the file named by READ_RSS_DIAG. Kept to the standard library and ctypes.
DIAG_WRAPPER = r'''
import ctypes, gc, json, os, re, signal, sys, tracemalloc

_out = os.environ["READ_RSS_DIAG"]
_trace = os.environ.get("READ_RSS_TRACEMALLOC") == "1"
if _trace:
    tracemalloc.start(12)
_libc = ctypes.CDLL("libc.so.6")

class _MI2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

_libc.mallinfo2.restype = _MI2
_state = {"snap": None}

def _rss():
    with open("/proc/self/status") as fh:
        return {k: int(v.split()[0]) for k, v in (l.split(":", 1) for l in fh) if k in ("VmRSS", "RssAnon", "RssFile")}

def _stem_cache():
    mod = sys.modules.get("memory.engine.tokenize")
    info = getattr(mod, "stem_cache_info", None)
    if info is not None:
        d = info()
        return {"entries": d["entries"], "bytes": d["bytes"]}
    cache = getattr(mod, "_STEM_CACHE", None)
    if cache is None:
        return None
    return {"entries": len(cache), "bytes": sys.getsizeof(cache)
            + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in list(cache.items()))}

def _dump(signum, frame):
    gc.collect()  # count what is held, not garbage a later collection frees
    mi = _libc.mallinfo2()
    out = {"rss_kb": _rss(), "malloc": {"arena_kb": mi.arena // 1024, "mmap_kb": mi.hblkhd // 1024,
           "in_use_kb": mi.uordblks // 1024, "free_kb": mi.fordblks // 1024},
           "py_blocks": sys.getallocatedblocks(), "gc_objects": len(gc.get_objects()),
           "re_cache": len(getattr(re, "_cache", {})), "stem_cache": _stem_cache()}
    if _trace:
        snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        out["traced_kb"] = tracemalloc.get_traced_memory()[0] // 1024
        if _state["snap"] is not None:
            stats = snap.compare_to(_state["snap"], "traceback")[:8]
            out["top_growth"] = [{"kb": s.size_diff // 1024, "count": s.count_diff,
                                  "where": [f"{f.filename.rsplit('/site-packages/', 1)[-1]}:{f.lineno}"
                                            for f in list(s.traceback)[-6:]]} for s in stats]
        _state["snap"] = snap
    _write(out)

def _write(out):
    tmp = _out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(out, fh)
    os.replace(tmp, _out)

def _trim(signum, frame):
    before = _rss()
    _libc.malloc_trim(0)
    _write({"trim": {"before": before, "after": _rss()}})

signal.signal(signal.SIGUSR1, _dump)
signal.signal(signal.SIGUSR2, _trim)
import runpy
sys.argv = ["uvicorn"] + sys.argv[1:]
runpy.run_module("uvicorn", run_name="__main__", alter_sys=True)
'''


def rss_kb(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/status") as fh:
        return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in fh)
                if k in ("VmRSS", "RssAnon", "RssFile", "Threads")}


def smaps_kb(pid: int) -> dict[str, int]:
    """Resident KiB by kind of mapping: glibc's main heap, 1 MiB anonymous maps (CPython's pymalloc
    arenas), 8 MiB ones (thread stacks), other anonymous maps (glibc's thread arenas, large
    mallocs, numpy buffers) and file-backed ones. The anonymous split is approximate: the kernel
    merges neighbouring anonymous maps of the same flags into one."""
    out = {"heap": 0, "py_arenas": 0, "stacks": 0, "anon_other": 0, "file": 0}
    kind = "file"
    with open(f"/proc/{pid}/smaps") as fh:
        for line in fh:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                size_kb = (hi - lo) // 1024
                name = head[5] if len(head) > 5 else ""
                if name == "[heap]":
                    kind = "heap"
                elif name:
                    kind = "file"
                elif size_kb == 1024:
                    kind = "py_arenas"
                elif size_kb == 8192:
                    kind = "stacks"
                else:
                    kind = "anon_other"
            elif head[0] == "Rss:":
                out[kind] += int(head[1])
    return out


def top_file_map(pid: int) -> tuple[str, int, int]:
    """The file-backed mapping with the most resident KiB: (path, resident, mapped). Clean file pages
    count in RSS but are the page cache's: shared by every process mapping the file, and dropped
    under memory pressure."""
    rss: dict[str, int] = {}
    size: dict[str, int] = {}
    name = ""
    with open(f"/proc/{pid}/smaps") as fh:
        for line in fh:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                name = head[5] if len(head) > 5 and head[5].startswith("/") else ""
            elif name and head[0] == "Rss:":
                rss[name] = rss.get(name, 0) + int(head[1])
            elif name and head[0] == "Size:":
                size[name] = size.get(name, 0) + int(head[1])
    top = max(rss, key=rss.get)
    return top, rss[top], size[top]


class Server:
    """One uvicorn process on the database this process uses, started as ``nylon_project.live`` does
    (so the settings are the served ones), optionally under the diagnostics wrapper."""

    def __init__(self, *, diag: bool, tracemalloc: bool, extra_env: dict[str, str]):
        from nylon_project import embedded
        from nylon_project.live import free_port, listening, live_env

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.diag_path = embedded.nylon_home() / f"read-rss-diag-{self.port}.json" if diag else None
        env = live_env(NYLON_CACHE_PREFIX=f"read-rss-{uuid.uuid4().hex[:8]}", NYLON_ENQUEUE_TASKS="0",
                       NYLON_RATE_LIMIT="10000000/min", NYLON_LLM_URL="", **extra_env)
        uv = ["nylon_project.asgi:application", "--host", "127.0.0.1", "--port", str(self.port), "--no-access-log",
              "--lifespan", "off"]
        if diag:
            env["READ_RSS_DIAG"] = str(self.diag_path)
            env["READ_RSS_TRACEMALLOC"] = "1" if tracemalloc else "0"
            args = [sys.executable, "-c", DIAG_WRAPPER, *uv]
        else:
            args = [sys.executable, "-m", "uvicorn", *uv]
        self.log_path = embedded.nylon_home() / f"read-rss-web-{self.port}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300  # tracemalloc on a loaded 2-core box: a slow start
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited:\n{self.log_path.read_text()[-3000:]}")
            if listening(self.port):
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("uvicorn did not listen in time")

    def diag(self, sig: int = signal.SIGUSR1) -> dict | None:
        """The server's own figures (SIGUSR1), or with SIGUSR2 its RSS before and after
        ``malloc_trim(0)``: what of the growth was free heap glibc kept."""
        if self.diag_path is None:
            return None
        before = self.diag_path.stat().st_mtime_ns if self.diag_path.exists() else 0
        os.kill(self.proc.pid, sig)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.diag_path.exists() and self.diag_path.stat().st_mtime_ns != before:
                return json.loads(self.diag_path.read_text())
            time.sleep(0.05)
        return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def make_org(slug: str) -> str:
    from django.contrib.auth import get_user_model

    from teams import services as team_services
    from teams.models import Agent

    owner, _ = get_user_model().objects.get_or_create(username=f"{slug}-owner")
    org = team_services.organization_create(name="Read RSS", slug=slug, owner=owner)
    agent = Agent.objects.create(org=org, name="read-rss-agent")
    _, key = team_services.api_key_create(actor=None, agent=agent)
    return key


def seed_turns(client: httpx.Client, turns: int, rng: random.Random) -> None:
    for s in range(0, turns, 20):
        body = {"session_key": f"seed-{s // 20}", "turns": []}
        for j in range(min(20, turns - s)):
            t, p, q = rng.choice(TOPICS), rng.choice(PEOPLE), rng.choice(PEOPLE)
            text = rng.choice([
                f"I moved the {t} to the new region yesterday, ticket {s + j}.",
                f"We decided that the {t} is reviewed every Friday by {q}.",
                f"{q} approved the change to the {t} on Monday ({s + j}).",
                f"I don't think the {t} needs a second owner; {q} disagrees.",
                f"The {t} budget went up by {rng.randint(2, 40)}% this quarter.",
            ])
            body["turns"].append({"speaker": p, "text": text})
        client.post("/api/v1/memories/weave-session", json=body).raise_for_status()


FIXED = [QUESTIONS[i % len(QUESTIONS)].format(p=PEOPLE[i % len(PEOPLE)], t=TOPICS[(i * 5) % len(TOPICS)])
         for i in range(20)]


def request_for(kind: str, endpoint: str, i: int) -> tuple[str, str, dict | None]:
    if kind == "ping":
        return "GET", "/api/v1/ping", None
    q = FIXED[i % len(FIXED)]
    if kind == "unique":
        q = f"{q.rstrip('?')} for Zq{uuid.uuid4().hex[:10]}?"
    if endpoint == "context":
        return "POST", "/api/v1/context", {"query": q, "k": 5}
    return "POST", "/api/v1/memories/resonate", {"query": q, "k": 10}


def run_phase(server: Server, client: httpx.Client, kind: str, endpoint: str, n: int, every: int,
              concurrency: int, trace: list, trim_probe: bool = False) -> dict:
    errors = 0
    counter = [0]
    lock = threading.Lock()

    def one(i: int) -> None:
        nonlocal errors
        method, path, body = request_for(kind, endpoint, i)
        r = client.request(method, path, json=body)
        if r.status_code != 200:
            with lock:
                errors += 1
                if errors <= 3:
                    print(f"  {kind}: {r.status_code} {r.text[:200]}", file=sys.stderr)

    start = rss_kb(server.proc.pid)
    m0 = smaps_kb(server.proc.pid)
    d0 = server.diag()
    t0 = time.perf_counter()
    points = [(0, start["VmRSS"])]
    with ThreadPoolExecutor(concurrency) as pool:
        for base in range(0, n, every):
            list(pool.map(one, range(base, min(n, base + every))))
            counter[0] = min(n, base + every)
            points.append((counter[0], rss_kb(server.proc.pid)["VmRSS"]))
    wall = time.perf_counter() - t0
    end = rss_kb(server.proc.pid)
    m1 = smaps_kb(server.proc.pid)
    d1 = server.diag()
    trim = server.diag(signal.SIGUSR2) if trim_probe else None
    out = {"kind": kind, "endpoint": endpoint if kind != "ping" else "ping", "reads": n, "errors": errors,
           "wall_s": round(wall, 1), "rss_start_kb": start["VmRSS"], "rss_end_kb": end["VmRSS"],
           "anon_delta_kb": end["RssAnon"] - start["RssAnon"],
           "per_1000_kib": round((end["VmRSS"] - start["VmRSS"]) * 1000 / n, 1), "points": points,
           "threads": end["Threads"], "maps_delta_kb": {k: m1[k] - m0[k] for k in m0}}
    if d0 and d1:
        out["diag"] = {"before": d0, "after": d1}
    if trim:
        out["trim_kb"] = {"before": trim["trim"]["before"]["VmRSS"], "after": trim["trim"]["after"]["VmRSS"]}
    trace.append(out)
    return out


def fmt_diag(d: dict) -> str:
    b, a = d["before"], d["after"]
    s = (f"    heap in use {b['malloc']['in_use_kb'] / KiB:.1f} -> {a['malloc']['in_use_kb'] / KiB:.1f} MiB, "
         f"heap free {b['malloc']['free_kb'] / KiB:.1f} -> {a['malloc']['free_kb'] / KiB:.1f} MiB, "
         f"arena {b['malloc']['arena_kb'] / KiB:.1f} -> {a['malloc']['arena_kb'] / KiB:.1f} MiB, "
         f"mmap {b['malloc']['mmap_kb'] / KiB:.1f} -> {a['malloc']['mmap_kb'] / KiB:.1f} MiB\n"
         f"    python blocks {b['py_blocks']} -> {a['py_blocks']}, gc objects {b['gc_objects']} -> "
         f"{a['gc_objects']}, re cache {b['re_cache']} -> {a['re_cache']}, stem cache {b['stem_cache']} -> "
         f"{a['stem_cache']}")
    if "traced_kb" in a:
        s += f"\n    tracemalloc traced {b.get('traced_kb', 0) / KiB:.1f} -> {a['traced_kb'] / KiB:.1f} MiB"
        for g in a.get("top_growth", [])[:5]:
            s += f"\n      {g['kb']:+6d} KiB {g['count']:+6d} blocks  " + " <- ".join(reversed(g["where"][-3:]))
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reads", type=int, default=1000, help="requests per phase")
    ap.add_argument("--phases", default="ping,repeat,unique,unique,repeat,ping")
    ap.add_argument("--endpoint", choices=("resonate", "context"), default="resonate")
    ap.add_argument("--every", type=int, default=100, help="RSS sample interval (requests)")
    ap.add_argument("--concurrency", type=int, default=4, help="client threads")
    ap.add_argument("--seed-turns", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=200, help="reads before the first phase (both query kinds)")
    ap.add_argument("--diag", action="store_true", help="server answers SIGUSR1 with its own figures")
    ap.add_argument("--tracemalloc", action="store_true", help="with --diag: top tracemalloc growth per phase")
    ap.add_argument("--trim-probe", action="store_true",
                    help="with --diag: malloc_trim(0) in the server after each phase, RSS before and after")
    ap.add_argument("--server-env", action="append", default=[], metavar="K=V")
    ap.add_argument("--json", help="write the phases here")
    ap.add_argument("--keep", action="store_true", help="keep the org (default: deleted at the end)")
    args = ap.parse_args(argv)
    extra_env = dict(kv.split("=", 1) for kv in args.server_env)

    import _devdb

    _devdb.setup()
    from teams.models import Organization

    slug = f"read-rss-{uuid.uuid4().hex[:6]}"
    key = make_org(slug)
    server = Server(diag=args.diag, tracemalloc=args.tracemalloc, extra_env=extra_env)
    rng = random.Random(7)
    phases: list[dict] = []
    try:
        limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120,
                          limits=limits) as client:
            t = time.perf_counter()
            seed_turns(client, args.seed_turns, rng)
            print(f"seeded {args.seed_turns} turns in {time.perf_counter() - t:.1f} s; server pid {server.proc.pid}"
                  f"{' env ' + str(extra_env) if extra_env else ''}", flush=True)
            warm: list = []
            for kind in ("repeat", "unique", "ping"):
                run_phase(server, client, kind, args.endpoint, max(args.warmup // 2, 20), args.every,
                          args.concurrency, warm)
            print(f"after warm-up: RSS {rss_kb(server.proc.pid)['VmRSS'] / KiB:.1f} MiB", flush=True)
            print(f"\n{'phase':8s} {'endpoint':9s} {'reads':>6s} {'s':>6s} {'RSS start':>10s} {'RSS end':>9s} "
                  f"{'growth/1000 reads':>18s}  trajectory (MiB every {args.every})")
            for kind in args.phases.split(","):
                p = run_phase(server, client, kind, args.endpoint, args.reads, args.every, args.concurrency, phases,
                              trim_probe=args.trim_probe)
                traj = " ".join(f"{kb / KiB:.1f}" for _, kb in p["points"][1:])
                print(f"{kind:8s} {p['endpoint']:9s} {p['reads']:6d} {p['wall_s']:6.1f} "
                      f"{p['rss_start_kb'] / KiB:8.1f}M {p['rss_end_kb'] / KiB:7.1f}M "
                      f"{p['per_1000_kib'] / KiB:+14.2f} MiB  {traj}"
                      f"{'  ERRORS ' + str(p['errors']) if p['errors'] else ''}", flush=True)
                print("    threads " + str(p["threads"]) + ", RSS change by mapping: "
                      + ", ".join(f"{k} {v / KiB:+.1f}" for k, v in p["maps_delta_kb"].items()) + " MiB")
                if "diag" in p:
                    print(fmt_diag(p["diag"]), flush=True)
                if "trim_kb" in p:
                    t = p["trim_kb"]
                    print(f"    malloc_trim(0) after the phase: RSS {t['before'] / KiB:.1f} -> {t['after'] / KiB:.1f} MiB "
                          f"({(t['after'] - t['before']) / KiB:+.1f}); the next phase starts from there", flush=True)
            path, res, mapped = top_file_map(server.proc.pid)
            print(f"\nlargest file-backed mapping: {Path(path).name}, {res / KiB:.1f} of {mapped / KiB:.1f} MiB resident "
                  f"(clean pages of the page cache, shared by every process that maps the file)")
        if args.json:
            Path(args.json).write_text(json.dumps(phases, indent=1))
        return 0 if all(p["errors"] == 0 for p in phases) else 1
    finally:
        server.stop()
        if not args.keep:
            Organization.objects.filter(slug=slug).delete()


if __name__ == "__main__":
    sys.exit(main())
