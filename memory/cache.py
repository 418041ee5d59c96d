"""Per-org engine cache: a TenantIndex per organisation, built lazily from Postgres and kept
current by catching up on rows whose ``txid`` is at or past the last sync's snapshot xmin.

Coherence across processes comes from Postgres itself: every process (web or worker) catches up
before it answers, so a write committed through any process is visible to the next resonate
everywhere. LRU eviction under ``NYLON_CACHE_MAX_BYTES`` among the indexes that fit under it; an
evicted org is rebuilt on demand. An org whose index alone is over the cap is not kept (nor does it
evict the others): it is remembered as oversized, with its node count and size, and served from
Postgres (``memory.fallback``) until its node count says it could fit again.

Admission (``NYLON_CACHE_ADMISSION=frequency``, the default). When the orgs in use each fit but
together need more than the cap, plain LRU rebuilt one on every switch between them (a build of a
20k-node org takes seconds). On the served path (``get_or_none``) a cold org whose build would
evict others is built only if it was requested more than ``ADMISSION_MARGIN`` (2) times as often
lately as all the indexes it would evict together (a request count per org, halved every
``FREQ_SAMPLE_PER_ENTRY`` requests per cached org: TinyLFU's counts with aging, exact instead of a
sketch since orgs are few); otherwise Postgres answers it, as it answers cold and oversized orgs.
The hot set stays built, a one-off request costs a Postgres query instead of a build plus the
rebuild of what it evicted, and an org whose traffic grows earns its place within a few requests.
The margin, not a bare "more than": under an even load two orgs' counts differ by noise, and a bare
comparison swapped them back and forth (a build each time); a build costs hundreds of queries.
``get`` (warm-ups, catch-ups, tools) still builds and admits unconditionally, evicting by recency.

The process-wide stem memo (``memory.engine.tokenize``, up to 50,000 words of at most 32 characters) is counted against the
same cap (``count_stem_cache``): the indexes get what it leaves.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import logging
import math
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date

import numpy as np
import psycopg
from django.conf import settings
from django.db import connection, transaction
from psycopg.types import TypeInfo

from .engine import NodeRecord, TenantIndex
from .engine.index import MAX_DAY_REFS
from .engine.tokenize import stem_cache_info, tokenize
from .engine.types import EdgeKind as EKind
from .engine.types import NodeKind as NKind
from .engine.types import Scope as EScope
from .engine.weave import lexical_document
from .models import EMBEDDING_DIM
from .vector_adapters import register_vector_adapters

log = logging.getLogger("nylon.cache")

KIND = {"leaf": NKind.LEAF, "fact": NKind.FACT, "bridge": NKind.BRIDGE, "persona": NKind.PERSONA,
        "scene": NKind.SCENE}
SCOPE = {"private": EScope.PRIVATE, "team": EScope.TEAM, "org": EScope.ORG, "restricted": EScope.RESTRICTED}
EDGE = {k.name.lower(): int(k) for k in EKind}
_I63 = (1 << 63) - 1
_EDGE_FALLBACK = int(EKind.EXPLICIT)  # a kind the engine does not know (an import): diffusion ignores kinds


def _edge_weights(w: np.ndarray) -> np.ndarray:
    """Edge weights as the engine accepts them. Rows are not validated on the way in (an import
    takes any float): a NaN or negative weight made Graph.add_edges raise, so every catch-up of
    the org failed, and the org's queries with it, until the row was fixed by hand. NaN and
    negative weights become 0 (an edge never walked), +inf and huge ones the largest float32."""
    w = np.nan_to_num(np.asarray(w, dtype=np.float64), nan=0.0, posinf=np.inf, neginf=0.0)
    return np.clip(w, 0.0, float(np.finfo(np.float32).max)).astype(np.float32)


_NODE_SQL = """
SELECT id, text, speaker, kind, visibility, coalesce(owner_agent_id * 2 + 1, owner_user_id * 2),
       coalesce(team_id, 0), t0, lam, extract(epoch from tension_updated_at)::float8, mentions,
       session_key, seq, extract(epoch from occurred_at)::float8, embedding,
       deleted_at IS NOT NULL OR valid_to IS NOT NULL, metadata->>'time_terms', time_refs
FROM memory_node WHERE org_id = %(org)s {cond} ORDER BY id
"""
# A node leaves the index when it is deleted or superseded (``valid_to``, set when a conflict is
# resolved in favour of another node): retrieval serves what is current. A superseded node stays in
# Postgres, listed by the nodes API with its validity and reached through its governance.
_EDGE_SQL = "SELECT src_id, dst_id, kind, weight FROM memory_edge WHERE org_id = %(org)s {cond} ORDER BY id"
# A build reads the org in pages by id (each a short statement of its own, no long-held snapshot) and
# indexes each page before reading the next: read whole, the rows, their records and the index
# stood in memory together, a peak of 3.5x the index (304 MiB for a 20k-node org of 86 MiB), and
# glibc kept most of it after (244 MiB resident). The sync position is read first, so a row that a
# page misses or reads in a later version is past it, and read again by the next catch-up; an edge
# whose node a page has not seen is skipped (``TenantIndex.add_edges``) only if that node is new
# since the position, and then the edge is too.
_NODE_PAGE_SQL = _NODE_SQL.format(cond="AND id > %(after)s") + " LIMIT %(limit)s"
_EDGE_PAGE_SQL = ("SELECT id, src_id, dst_id, kind, weight FROM memory_edge WHERE org_id = %(org)s AND id > %(after)s "
                  "ORDER BY id LIMIT %(limit)s")
BUILD_PAGE_ROWS = 4096
# A sync position is a snapshot's xmax plus the transactions still in progress in it (xip): every
# row a sync has not read was written by a transaction in that list or at/after xmax. (An xmin
# watermark would also be safe, but while any transaction of the database stays open it keeps
# matching rows already read, and every query would re-read them under the write lock.)
_CHANGED = """(txid >= %(xmax)s::text::xid8 OR txid = ANY(%(xip)s::text[]::xid8[]))"""
# The reading transaction's own xid (when it has written) counts as in progress too: its rows are
# visible to it but below xmax, and rows it writes after this sync carry the same xid, so without it
# a sync inside a writing transaction would never see that transaction's later writes.
_SNAPSHOT = """pg_snapshot_xmax(snap.s)::text::bigint,
    ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(snap.s) AS x
          UNION SELECT pg_current_xact_id_if_assigned()::text::bigint
          WHERE pg_current_xact_id_if_assigned() IS NOT NULL)"""
# One statement, so one snapshot: its position and whether any row of the org was written past the
# index's. Nothing new (the common case) costs this single round trip.
_PROBE_SQL = f"""
SELECT {_SNAPSHOT},
       EXISTS (SELECT 1 FROM memory_node WHERE org_id = %(org)s AND {_CHANGED})
       OR EXISTS (SELECT 1 FROM memory_edge WHERE org_id = %(org)s AND {_CHANGED})
FROM (SELECT pg_current_snapshot() AS s) AS snap
"""
# The probe with one more column: a caller's one-column query, answered from the same snapshot. The
# served read asks its ACL grants here (``EngineCache.get_or_none_with``), which saves it a round
# trip, ~0.7 ms of a warm resonate at 100k nodes on a busy 2-core machine.
_PROBE_ALSO_SQL = _PROBE_SQL.replace("\nFROM (SELECT pg_current_snapshot()",
                                     ",\n       ARRAY({also})\nFROM (SELECT pg_current_snapshot()")


@dataclass(frozen=True)
class Probed:
    """What a caller's query (``EngineCache.get_or_none_with``) read in the freshness probe, and the
    index position it was probed at. Its rows are no older than the index only while the index is
    still there: a concurrent catch-up may move it on before the caller takes the read lock (then a
    grant revoked meanwhile would still apply to rows written after the revoke)."""

    rows: list
    at: tuple[int, tuple[int, ...]]

    def current(self, index: TenantIndex) -> bool:
        """Call under the org's read lock: whether the index is still at the probed position."""
        return (index.watermark, index.watermark_pending) == self.at


def _position(index: TenantIndex, org_id: int) -> dict:
    return {"org": org_id, "xmax": index.watermark, "xip": [str(x) for x in index.watermark_pending]}


# pgvector's type info per psycopg connection (the vector OID differs between databases).
_vector_types: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _vector_info() -> TypeInfo:
    connection.ensure_connection()
    raw = connection.connection
    info = _vector_types.get(raw)
    if info is None:
        info = TypeInfo.fetch(raw, "vector")
        if info is None:
            raise RuntimeError("the vector type is missing: is the pgvector extension installed?")
        _vector_types[raw] = info
    return info


def _binary_cursor(info: TypeInfo) -> psycopg.Cursor:
    """A cursor on Django's connection (so inside its transaction) whose results come in binary,
    vectors through pgvector's binary loader: no text parsing of 384 floats per row. The loader
    is registered on this cursor only; Django's own cursors keep their adapters. (Not with
    pgvector's register_vector_info: it leaked two classes per call, so per catch-up.)"""
    cur = psycopg.Cursor(connection.connection)
    register_vector_adapters(cur, info)
    return cur


def _session_int(key: str) -> int:
    """Engine session keys are int64 and only ever compared for equality; a stable hash keeps
    "same session" comparable across processes. 63 bits, never 0 for a key: crc32 (32 bits) made
    two sessions of one org collide past a few ten thousand sessions ("plumless"/"buckeroo" do),
    and colliding sessions shared context windows, session scores and diversity penalties; a key
    hashing to 0 lost its session altogether."""
    if not key:
        return 0
    h = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little") & _I63
    return h or 1


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def _day_refs(refs) -> tuple[tuple[int, int], ...]:
    """The days a node's text refers to (``Node.time_refs``, resolved against the turn's time when
    it was written: "yesterday" on the 20th is the 19th) as the engine's (first, last) day counts.
    Rows are not validated on the way in (an import takes any JSON), so an entry that is not a
    ``{start, end}`` of ISO dates is skipped rather than failing every catch-up of the org. Most
    rows have none, and cost one test here."""
    if not refs or not isinstance(refs, list):
        return ()
    out = []
    for ref in refs[:MAX_DAY_REFS]:
        try:
            first = date.fromisoformat(ref["start"][:10]).toordinal() - _EPOCH_ORDINAL
            last = date.fromisoformat((ref.get("end") or ref["start"])[:10]).toordinal() - _EPOCH_ORDINAL
        except (TypeError, KeyError, ValueError, AttributeError):
            continue
        out.append((first, last))
    return tuple(out)


def _record(row) -> NodeRecord:
    (nid, text, speaker, kind, vis, owner, team, t0, lam, t_upd, mentions, skey, seq, occ, emb,
     gone, time_terms, time_refs) = row
    occ_days = (occ / 86400.0) if occ is not None else float("nan")
    from datetime import datetime

    occ_dt = datetime.fromtimestamp(occ, tz=UTC) if occ is not None else None
    doc = lexical_document(text, speaker=speaker, occurred_at=occ_dt, time_terms=time_terms or "")
    vec = emb.to_numpy() if emb is not None else np.empty(0, np.float32)
    return NodeRecord(
        node_id=nid, text=text, kind=KIND[kind], owner_key=owner, team_id=team, scope=SCOPE[vis],
        t0=t0, lam=lam, last_updated=t_upd / 86400.0, mentions=mentions, session_key=_session_int(skey),
        seq=seq, occurred_at=occ_days, vector=vec, tokens=tokenize(doc), speaker=speaker or "",
        day_refs=_day_refs(time_refs),
    ), gone


def _apply_nodes(index: TenantIndex, rows: list, phases: dict[str, float]) -> None:
    """Node rows into the index: new and changed ones upserted, deleted and superseded ones removed."""
    if not rows:
        return
    t = time.perf_counter()
    pairs = [_record(r) for r in rows]
    t1 = time.perf_counter()
    index.upsert_nodes([p[0] for p in pairs])
    gone = [p[0].node_id for p in pairs if p[1]]
    if gone:
        index.delete_nodes(gone)
    phases["records"] += (t1 - t) * 1000
    phases["nodes"] += (time.perf_counter() - t1) * 1000


def _edge_arrays(edges: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, weight, kind) arrays of ``(src, dst, kind, weight)`` edge rows."""
    n = len(edges)
    src = np.fromiter((e[0] for e in edges), np.int64, n)
    dst = np.fromiter((e[1] for e in edges), np.int64, n)
    kind = np.fromiter((EDGE.get(e[2], _EDGE_FALLBACK) for e in edges), np.uint8, n)
    w = _edge_weights(np.fromiter((e[3] for e in edges), np.float64, n))
    return src, dst, w, kind


def _find_malloc_trim():
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "malloc_trim", None)
    except OSError:  # no C library by that name: nothing to trim with
        return None


_malloc_trim = _find_malloc_trim()  # glibc only; None elsewhere (musl, macOS)


def release_freed_memory() -> float:
    """Hand the heap that a build or an eviction freed back to the OS; returns the ms it took.

    glibc keeps freed memory in its arenas for reuse and returns only the top of the heap by itself;
    after a build of a 20k-node org (an 86 MiB index) the process stayed 244 MiB over its start
    until ``malloc_trim``, then 75-121 MiB (``bench/cache_rss.py --build``). A few ms; not for the
    query path."""
    if _malloc_trim is None:
        return 0.0
    t = time.perf_counter()
    _malloc_trim(0)
    return (time.perf_counter() - t) * 1000


class OrgLock:
    """Readers share, a catch-up excludes them. Requests run in threads of their own and numpy
    releases the GIL for its large operations, so concurrent queries of one org overlap instead of
    queueing behind each other. Writer-preferring: a waiting catch-up blocks new readers, so a
    steady query load cannot starve it (and the queries that wait for it want its rows anyway)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


@dataclass
class Oversize:
    """An org whose index does not fit under the cap by itself, as last judged."""

    nodes: int  # the org's rows then
    nbytes: int  # its index's size then: measured when built, else the lower bound of its rows
    measured: bool
    checked_at: float  # time.monotonic()


# An oversized org is built again only once its predicted size is this far under the cap, so an org
# hovering at the cap is not built, found too big and dropped on every recheck.
OVERSIZE_HYSTERESIS = 0.9

ADMISSION_POLICIES = ("frequency", "lru")
# A cold org is built over others only when its recent requests outnumber theirs this many times
# (see the module docstring). 2 measured against 1 (TinyLFU's bare comparison) and 3 in a simulation
# of 20 equal orgs, cap 10, 4000 requests: builds under an even mix 300 / 59 / 29, under Zipf 130 /
# 45 / 33, with the same hit rate; 3 makes an org that turns hot wait longer for no gain.
ADMISSION_MARGIN = 2
# Request counts are halved once this many requests per cached org (at least FREQ_SAMPLE_MIN_ENTRIES)
# have been counted, so yesterday's hot org does not hold its place against today's (TinyLFU: a
# sample of 10x the cache's entries).
FREQ_SAMPLE_PER_ENTRY = 10
FREQ_SAMPLE_MIN_ENTRIES = 8
# /healthz reports the cache degraded while it refused an org or rebuilt one within this window.
PRESSURE_WINDOW_SECS = 300.0
# How long a measured size of the stem memo is used for the budget (it grows slowly, to its bound).
STEM_SIZE_TTL_SECS = 10.0
def stem_cache_size() -> dict:
    """Entries and bytes of the tokenizer's process-wide stem memo (``stem_cache_info``, counted as
    entries go in), with a status for ``info``/``health``."""
    return {"status": "ok", **stem_cache_info()}


class EngineCache:
    def __init__(self, max_bytes: int | None = None, *, oversize_recheck_secs: float | None = None,
                 build_page_rows: int = BUILD_PAGE_ROWS, admission: str | None = None,
                 count_stem_cache: bool = True):
        self.max_bytes = max_bytes or settings.NYLON_CACHE_MAX_BYTES
        self.admission = admission or settings.NYLON_CACHE_ADMISSION  # "frequency" or "lru"
        if self.admission not in ADMISSION_POLICIES:
            raise ValueError(f"admission {self.admission!r} is not one of {ADMISSION_POLICIES}")
        self.count_stem_cache = count_stem_cache  # the stem memo's bytes come off the indexes' share
        self.build_page_rows = max(int(build_page_rows), 1)
        self.oversize_recheck_secs = (
            oversize_recheck_secs if oversize_recheck_secs is not None
            else settings.NYLON_CACHE_OVERSIZE_RECHECK_SECS)  # how often an oversized org's rows are counted again
        self._indexes: OrderedDict[int, TenantIndex] = OrderedDict()
        self._locks: dict[int, OrgLock] = {}
        self._guard = threading.Lock()
        # admission_refused: requests served from Postgres because their org's build would have
        # evicted indexes asked for more often (cache pressure); admission_dropped: builds found
        # bigger than predicted, served once and not kept for that reason; admitted_free / admitted_over:
        # cold orgs built into free room / over others by frequency; building_fallbacks: requests
        # served from Postgres while their org builds in the background.
        self.stats = {"builds": 0, "syncs": 0, "evictions": 0, "last_build_ms": 0.0, "rebuilds": 0,
                      "oversize_builds": 0, "oversize_skips": 0, "admitted_free": 0, "admitted_over": 0,
                      "admission_refused": 0, "admission_dropped": 0, "building_fallbacks": 0, "freq_agings": 0}
        self._oversize: dict[int, Oversize] = {}
        self._building: set[int] = set()
        self._built: set[int] = set()  # orgs this cache has built before: another build is a rebuild
        self._freq: dict[int, int] = {}  # recent requests per org (get_or_none), halved by _touch
        self._freq_ops = 0
        self._measured: dict[int, tuple[int, int]] = {}  # org -> (nodes, nbytes) of its last index here
        self._refused: dict[int, tuple[float, int]] = {}  # org -> (last refusal, predicted nbytes)
        self._stem_measured: tuple[float, dict] = (-math.inf, {})  # (when, stem_cache_size()) of the memo
        self._rebuilt_at: deque[float] = deque(maxlen=1024)

    def _lock(self, org_id: int) -> OrgLock:
        with self._guard:
            lock = self._locks.get(org_id)
            if lock is None:
                lock = self._locks[org_id] = OrgLock()
            return lock

    def get(self, org_id: int) -> TenantIndex:
        """The org's index, caught up with everything committed so far.

        An index over the cap by itself (built, or grown by a catch-up) is still returned, for this
        caller's one use, but not kept, and it evicts nothing: the org is marked oversized
        (``oversize``), which ``get_or_none`` answers from Postgres. A cold org is built and kept
        whatever the admission policy (warm-ups and tools ask for it by name)."""
        return self._get(org_id, gated=False)[0]

    def _get(self, org_id: int, *, gated: bool, also: tuple[str, dict] | None = None) -> tuple[TenantIndex, Probed | None]:
        """``get``; ``gated`` (the served path): a build that turns out bigger than ``_admits``
        predicted is kept only if admission would let it evict what it has to (else it serves this
        one caller and is dropped, its size now known), so an underestimate never evicts an index
        asked for more often. ``also``: see ``get_or_none_with``."""
        index = self._indexes.get(org_id)
        changed, rows = (True, None) if index is None else self._probe(org_id, index, also)
        if not changed:
            # The common case: one probe, no lock, so queries of one org do not queue here. A
            # probe that misses a concurrent catch-up in flight sees its rows too (they are past
            # the watermark it read) and takes the write path below.
            with self._guard:
                if org_id in self._indexes:
                    self._indexes.move_to_end(org_id)
            return index, rows
        with self._lock(org_id).write():
            index = self._indexes.get(org_id)
            if index is None:
                with self._guard:
                    kept_before = org_id in self._built
                index = self._build(org_id)
                size = index.nbytes()
                if gated and size <= self._budget() and not self._admission(org_id, size, built=True):
                    with self._guard:
                        self._measured[org_id] = (index.n, size)
                        if not kept_before:  # never kept, so never evicted: its next build is no rebuild
                            self._built.discard(org_id)
                else:
                    self._admit(org_id, index, built=True)
                self.stats["last_trim_ms"] = release_freed_memory()  # the build's pages and rows
            elif self._sync(org_id, index)[0]:
                if index.dead_fraction() > 0.5:
                    index.compact()
                # An org that grew past the exact-search size gets its HNSW graph here, under the
                # write lock, not lazily inside a search that other readers run beside it.
                index.vectors.prepare()
                self._admit(org_id, index, built=False)  # the index grew: the cap holds after catch-ups too
            with self._guard:
                if org_id in self._indexes:  # another org's catch-up may have evicted it meanwhile
                    self._indexes.move_to_end(org_id)
            return index, None

    def _build(self, org_id: int) -> TenantIndex:
        t = time.perf_counter()
        index = TenantIndex(EMBEDDING_DIM)
        phases = self._load(org_id, index)
        t_post = time.perf_counter()
        index.compact()  # windows re-indexed as their sessions filled leave dead postings
        t_hnsw = time.perf_counter()
        index.vectors.prepare()  # the HNSW graph, if searches will use it: no query pays for it
        phases["compact"] = (t_hnsw - t_post) * 1000
        phases["hnsw"] = (time.perf_counter() - t_hnsw) * 1000
        with self._guard:
            self.stats["builds"] += 1
            rebuilt = org_id in self._built
            if rebuilt:
                self.stats["rebuilds"] += 1
                self._rebuilt_at.append(time.monotonic())
            self._built.add(org_id)
            self.stats["last_build_ms"] = (time.perf_counter() - t) * 1000
            self.stats["last_build_phases"] = phases
        if rebuilt:  # evicted before: orgs in use need more than the cap, and each switch pays a build
            log.info("org %s rebuilt in %.0f ms after an eviction (%d rebuilds so far): the orgs in use need more "
                     "than NYLON_CACHE_MAX_BYTES", org_id, self.stats["last_build_ms"], self.stats["rebuilds"])
        return index

    def _admit(self, org_id: int, index: TenantIndex, *, built: bool) -> None:
        """Keep a built or caught-up index if it fits under the cap by itself, evicting the least
        recently used others as needed; else drop it and remember the org as oversized. Evicting
        the others for an index that is then dropped anyway emptied the cache, and every org evicted
        so was rebuilt inside its next request."""
        size = index.nbytes()
        with self._guard:
            self._measured[org_id] = (index.n, size)
        if size > self._budget():
            with self._guard:
                self._indexes.pop(org_id, None)
                self._oversize[org_id] = Oversize(nodes=index.n, nbytes=size, measured=True,
                                                  checked_at=time.monotonic())
                self.stats["oversize_builds"] += 1
            log.warning("org %s: its index (%d nodes, %d bytes) is over the cache cap (%d bytes, %d of it for "
                        "indexes); it is not kept and the org is served from Postgres", org_id, index.n, size,
                        self.max_bytes, self._budget())
            return
        with self._guard:
            if not built and self._indexes.get(org_id) is not index:
                return  # evicted or dropped while it caught up: not brought back
            self._indexes[org_id] = index
            self._oversize.pop(org_id, None)
        self._evict(keep=org_id)

    def peek(self, org_id: int) -> TenantIndex | None:
        return self._indexes.get(org_id)

    @contextmanager
    def reading(self, org_id: int) -> Iterator[None]:
        """Hold while reading an org's index (visibility mask, resonate). A catch-up in ``get``
        appends to the same arrays, so it waits for the readers and they for it; readers of one
        org share the lock, other orgs are not blocked at all."""
        with self._lock(org_id).read():
            yield

    def _changed(self, org_id: int, index: TenantIndex) -> bool:
        """Whether any row of the org was written that the index has not read."""
        return self._probe(org_id, index, None)[0]

    def _probe(self, org_id: int, index: TenantIndex, also: tuple[str, dict] | None) -> tuple[bool, Probed | None]:
        """``_changed``, and the rows of ``also`` read by the same statement (None without it)."""
        at = (index.watermark, index.watermark_pending)
        sql, params = _PROBE_SQL, _position(index, org_id)
        if also is not None:
            sql = _PROBE_ALSO_SQL.replace("{also}", also[0])
            params = {**also[1], **params}
        with connection.cursor() as cur:
            cur.execute(sql, params)
            row = cur.fetchone()
        return bool(row[2]), (Probed(list(row[3]), at) if also is not None else None)

    def org_ids(self) -> list[int]:
        """Cached orgs, least recently used first."""
        with self._guard:
            return list(self._indexes)

    def nbytes(self) -> int:
        """What the cached indexes account for (``TenantIndex.nbytes``), the figure the cap bounds."""
        with self._guard:
            return sum(ix.nbytes() for ix in self._indexes.values())

    def drop(self, org_id: int | None = None) -> None:
        """Forget an org (every org when None): its index and whether it was oversized."""
        with self._guard:
            if org_id is None:
                self._indexes.clear()
                self._oversize.clear()
                self._built.clear()
                self._freq.clear()
                self._freq_ops = 0
                self._measured.clear()
                self._refused.clear()
                self._rebuilt_at.clear()
            else:
                self._indexes.pop(org_id, None)
                self._oversize.pop(org_id, None)
                self._built.discard(org_id)
                self._freq.pop(org_id, None)
                self._measured.pop(org_id, None)
                self._refused.pop(org_id, None)

    def oversize(self, org_id: int) -> Oversize | None:
        """Why the org is served from Postgres, if it is because its index cannot fit."""
        with self._guard:
            return self._oversize.get(org_id)

    def _budget(self) -> int:
        """The bytes the indexes may hold: the cap, less the stem memo when it is counted. The memo
        is measured at most every ``STEM_SIZE_TTL_SECS``: measuring walks its entries (~40 ms at
        50,000), and every catch-up after a write asks for the budget twice."""
        if not self.count_stem_cache:
            return self.max_bytes
        return self.max_bytes - int(self._stem_size().get("bytes") or 0)

    def _stem_size(self) -> dict:
        now = time.monotonic()
        at, size = self._stem_measured
        if now - at >= STEM_SIZE_TTL_SECS:
            size = stem_cache_size()
            self._stem_measured = (now, size)
        return size

    def _evict(self, keep: int) -> None:
        evicted = 0
        budget = self._budget()
        with self._guard:
            total = sum(ix.nbytes() for ix in self._indexes.values())
            while total > budget and len(self._indexes) > 1:
                org_id, ix = next(iter(self._indexes.items()))
                if org_id == keep:
                    self._indexes.move_to_end(org_id)
                    org_id, ix = next(iter(self._indexes.items()))
                total -= ix.nbytes()
                del self._indexes[org_id]
                self.stats["evictions"] += 1
                evicted += 1
        if evicted:
            release_freed_memory()  # what the evicted indexes held (unless a query still reads one)

    def _sync(self, org_id: int, index: TenantIndex) -> tuple[bool, dict[str, float]]:
        """Read what changed since the watermark into the index (a catch-up; ``_load`` builds);
        returns whether any row was read, and the time of each phase in ms."""
        # The position is read before the rows, so a transaction the row reads miss is in its
        # in-progress list or past its xmax, and is caught next time. REPEATABLE READ (when we own
        # the transaction) makes nodes and edges one snapshot, so no edge arrives before the node
        # it points to.
        t0 = time.perf_counter()
        info = _vector_info()
        outermost = not connection.in_atomic_block
        with connection.cursor() as cur:
            cur.execute(_PROBE_SQL, _position(index, org_id))
            xmax, xip, changed = cur.fetchone()
        if not changed:
            # Nothing visible past the old position, so whatever is unread is still running
            # or starts later: the probe's own snapshot is a valid, tighter position.
            index.watermark, index.watermark_pending = xmax, tuple(xip)
            self.stats["syncs"] += 1
            return False, {"fetch": (time.perf_counter() - t0) * 1000}
        with transaction.atomic():
            if outermost:
                with connection.cursor() as cur:
                    cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            with _binary_cursor(info) as cur:
                cur.execute(f"SELECT {_SNAPSHOT} FROM (SELECT pg_current_snapshot() AS s) AS snap", binary=True)
                xmax, xip = cur.fetchone()
                params = _position(index, org_id)
                cur.execute(_NODE_SQL.format(cond="AND " + _CHANGED), params, binary=True)
                rows = cur.fetchall()
                cur.execute(_EDGE_SQL.format(cond="AND " + _CHANGED), params, binary=True)
                edges = cur.fetchall()
        t1 = time.perf_counter()
        changed = bool(rows or edges)
        phases = {"fetch": (t1 - t0) * 1000, "records": 0.0, "nodes": 0.0, "edges": 0.0}
        _apply_nodes(index, rows, phases)
        del rows
        t3 = time.perf_counter()
        if edges:
            index.add_edges(*_edge_arrays(edges))
        phases["edges"] = (time.perf_counter() - t3) * 1000
        index.watermark, index.watermark_pending = xmax, tuple(xip)
        self.stats["syncs"] += 1
        return changed, phases

    def _load(self, org_id: int, index: TenantIndex) -> dict[str, float]:
        """Read the whole org into an empty index, a page at a time (``_NODE_PAGE_SQL``); returns
        the time of each phase in ms."""
        info = _vector_info()
        with connection.cursor() as cur:
            cur.execute(f"SELECT {_SNAPSHOT}, (SELECT count(*) FROM memory_node WHERE org_id = %(org)s) "
                        "FROM (SELECT pg_current_snapshot() AS s) AS snap", {"org": org_id})
            xmax, xip, count = cur.fetchone()
        index.reserve(int(count))
        phases = {"fetch": 0.0, "records": 0.0, "nodes": 0.0, "edges": 0.0}
        for rows in self._pages(info, _NODE_PAGE_SQL, org_id, phases):
            _apply_nodes(index, rows, phases)
        parts: list[tuple[np.ndarray, ...]] = []
        for edges in self._pages(info, _EDGE_PAGE_SQL, org_id, phases):
            t = time.perf_counter()
            parts.append(_edge_arrays([e[1:] for e in edges]))
            phases["edges"] += (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        if parts:
            # One call for all pages: the graph merges its CSR once, not once per page.
            index.add_edges(*(np.concatenate(cols) for cols in zip(*parts, strict=True)))
            del parts
        phases["edges"] += (time.perf_counter() - t) * 1000
        index.watermark, index.watermark_pending = xmax, tuple(xip)
        self.stats["syncs"] += 1
        return phases

    def _pages(self, info: TypeInfo, sql: str, org_id: int, phases: dict[str, float]) -> Iterator[list]:
        """The rows of ``sql`` (keyset by its first column, id) a page of ``build_page_rows`` at a
        time, each page its own short statement; the time spent fetching goes to ``phases``."""
        page, after = self.build_page_rows, 0
        while True:
            t = time.perf_counter()
            with _binary_cursor(info) as cur:
                cur.execute(sql, {"org": org_id, "after": after, "limit": page}, binary=True)
                rows = cur.fetchall()
            phases["fetch"] += (time.perf_counter() - t) * 1000
            if rows:
                after = rows[-1][0]
                yield rows
            if len(rows) < page:
                return
            del rows

    # -- cold and oversized orgs ------------------------------------------------------------
    def get_or_none(self, org_id: int) -> TenantIndex | None:
        """``get_or_none_with`` without a query of its own."""
        return self.get_or_none_with(org_id)[0]

    def get_or_none_with(self, org_id: int, also: tuple[str, dict] | None = None) -> tuple[TenantIndex | None, Probed | None]:
        """The caught-up index, or None while it cannot serve (the caller answers from Postgres).

        A cold org small enough builds now; a larger one builds in a background thread while
        queries fall back. An org whose index cannot fit under the byte cap by itself — by the
        lower bound of its row count (``TenantIndex.estimate_nbytes``) before any build, or as
        measured by a build or catch-up — is served from Postgres without being built again, until
        a recheck of its row count (every ``oversize_recheck_secs``) predicts that it fits.

        ``also``: a one-column query (sql, named params) whose values come
        back second (``Probed``), read by the freshness probe's statement when the index was caught
        up already; None when it was not (a build or catch-up ran: the caller asks it itself)."""
        self._touch(org_id)
        if org_id in self._indexes:
            index, rows = self._get(org_id, gated=False, also=also)
            return (None, None) if self.oversize(org_id) is not None else (index, rows)
        with self._guard:
            mark = self._oversize.get(org_id)
            if org_id in self._building or (mark is not None
                                            and time.monotonic() - mark.checked_at < self.oversize_recheck_secs):
                if mark is not None:
                    self.stats["oversize_skips"] += 1
                else:
                    self.stats["building_fallbacks"] += 1
                return None, None
        nodes, live = self._census(org_id)
        if not self._may_fit(org_id, nodes, live, mark):
            return None, None
        if not self._admits(org_id, nodes, live):
            return None, None
        if nodes <= settings.NYLON_CACHE_SYNC_BUILD_MAX_NODES:
            index = self._get(org_id, gated=True)[0]
            return (None if self.oversize(org_id) is not None else index), None
        with self._guard:
            self.stats["building_fallbacks"] += 1
            if org_id in self._building:
                return None, None
            self._building.add(org_id)
        threading.Thread(target=self._build_in_background, args=(org_id,), daemon=True,
                         name=f"nylon-cache-build-{org_id}").start()
        return None, None

    def _census(self, org_id: int) -> tuple[int, int]:
        """The org's rows and how many of them the index keeps searchable (not deleted or superseded)."""
        with connection.cursor() as cur:
            cur.execute("SELECT count(*), count(*) FILTER (WHERE deleted_at IS NULL AND valid_to IS NULL) "
                        "FROM memory_node WHERE org_id = %s", [org_id])
            nodes, live = cur.fetchone()
        return int(nodes), int(live)

    def _may_fit(self, org_id: int, nodes: int, live: int, mark: Oversize | None) -> bool:
        """Whether to build the org: its lower bound fits and, if it was found oversized, its size
        scaled to today's row count is under the cap with a margin. A no marks (or re-marks) it."""
        bound = TenantIndex.estimate_nbytes(nodes=nodes, live=live, dim=EMBEDDING_DIM)
        predicted = bound
        if mark is not None and mark.measured and mark.nodes:
            predicted = max(bound, mark.nbytes * nodes // mark.nodes)
        budget = self._budget()
        limit = budget * (OVERSIZE_HYSTERESIS if mark is not None else 1.0)
        if bound <= budget and predicted <= limit:
            with self._guard:
                self._oversize.pop(org_id, None)
            return True
        with self._guard:
            if mark is not None and mark.measured:
                mark.checked_at = time.monotonic()  # keep what was measured; the next recheck is later
            else:
                if mark is None:
                    log.warning("org %s: %d nodes need at least %d bytes of index, over the cache cap (%d "
                                "bytes, %d of it for indexes); served from Postgres without building it", org_id,
                                nodes, bound, self.max_bytes, budget)
                self._oversize[org_id] = Oversize(nodes=nodes, nbytes=bound, measured=False,
                                                  checked_at=time.monotonic())
            self.stats["oversize_skips"] += 1
        return False

    # -- admission under pressure ------------------------------------------------------------
    def _touch(self, org_id: int) -> None:
        """Count a request for the org; every ``FREQ_SAMPLE_PER_ENTRY`` requests per cached org
        (at least ``FREQ_SAMPLE_MIN_ENTRIES``), halve every count so they follow today's traffic."""
        with self._guard:
            self._freq[org_id] = self._freq.get(org_id, 0) + 1
            self._freq_ops += 1
            if self._freq_ops >= FREQ_SAMPLE_PER_ENTRY * max(len(self._indexes), FREQ_SAMPLE_MIN_ENTRIES):
                self._freq_ops = 0
                self._freq = {o: c >> 1 for o, c in self._freq.items() if c > 1}
                self.stats["freq_agings"] += 1

    def frequency(self, org_id: int) -> int:
        """The org's recent request count, as admission weighs it."""
        with self._guard:
            return self._freq.get(org_id, 0)

    def _predicted_nbytes(self, org_id: int, nodes: int, live: int) -> int:
        """The size the org's index will have: its last size here scaled to today's rows, else its
        lower bound. Low rather than high: an org never built here is judged to fit (or to evict
        fewer) by what it surely needs; if its build turns out larger, it evicts by recency once,
        and from then on its measured size is known."""
        bound = TenantIndex.estimate_nbytes(nodes=nodes, live=live, dim=EMBEDDING_DIM)
        with self._guard:
            measured = self._measured.get(org_id)
        if measured is not None and measured[0]:
            return max(bound, measured[1] * nodes // measured[0])
        return bound

    def _admits(self, org_id: int, nodes: int, live: int) -> bool:
        """Whether to build a cold org now. Always into free room (and always under ``lru``); over
        others only if its request count is more than ``ADMISSION_MARGIN`` times theirs together
        (the least recently used indexes that its predicted size would evict). A refusal is a
        request served from Postgres because of cache pressure (``admission_refused``)."""
        return self._admission(org_id, self._predicted_nbytes(org_id, nodes, live), built=False)

    def _admission(self, org_id: int, nbytes: int, *, built: bool) -> bool:
        """The admission rule for an index of ``nbytes`` (predicted, or measured when ``built``);
        a refusal is counted as ``admission_refused`` (served from Postgres) or, for a build the
        prediction let through, ``admission_dropped`` (served once by it, not kept). Admissions are
        counted when predicted (``built`` confirms one)."""
        predicted = nbytes
        budget = self._budget()
        with self._guard:
            room = budget - sum(ix.nbytes() for ix in self._indexes.values())
            if predicted <= room:
                if not built:
                    self.stats["admitted_free"] += 1
                self._refused.pop(org_id, None)
                return True
            victims, freed = [], 0
            for other, ix in self._indexes.items():  # least recently used first, as _evict takes them
                if freed >= predicted - room:
                    break
                victims.append(other)
                freed += ix.nbytes()
            mine = self._freq.get(org_id, 0)
            theirs = sum(self._freq.get(v, 0) for v in victims)
            if self.admission == "lru" or mine > ADMISSION_MARGIN * theirs:
                if not built:
                    self.stats["admitted_over"] += 1
                self._refused.pop(org_id, None)
                return True
            now = time.monotonic()
            last = self._refused.get(org_id)
            self._refused[org_id] = (now, predicted)
            self.stats["admission_dropped" if built else "admission_refused"] += 1
        if last is None or now - last[0] > PRESSURE_WINDOW_SECS:
            log.info("org %s %s: cache pressure (its index of ~%d bytes would evict %d indexes asked for %d "
                     "times lately, it %d; NYLON_CACHE_MAX_BYTES %d)", org_id,
                     "built once, not kept" if built else "served from Postgres", predicted, len(victims), theirs,
                     mine, self.max_bytes)
        return False

    def info(self) -> dict:
        """The counters (``stats``) with what the cache holds now: the cap, the indexes' bytes and
        share of it, the stem memo's size, the policy, and the pressure of the last
        ``PRESSURE_WINDOW_SECS``: orgs refused (and their predicted bytes), rebuilds."""
        stem = self._stem_size()
        now = time.monotonic()
        with self._guard:
            index_bytes = sum(ix.nbytes() for ix in self._indexes.values())
            refused = {o: b for o, (at, b) in self._refused.items() if now - at <= PRESSURE_WINDOW_SECS}
            rebuilds = sum(1 for at in self._rebuilt_at if now - at <= PRESSURE_WINDOW_SECS)
            stats = {k: round(v, 1) if isinstance(v, float) else v for k, v in self.stats.items()}
            cached = len(self._indexes)
        counted = int(stem.get("bytes") or 0) if self.count_stem_cache else 0
        return {
            "admission": self.admission, "cap_bytes": self.max_bytes, "orgs_cached": cached,
            "index_bytes": index_bytes, "index_budget_bytes": self.max_bytes - counted,
            "stem_cache": {**stem, "counted": self.count_stem_cache}, "stats": stats,
            "pressure": {"window_secs": PRESSURE_WINDOW_SECS, "orgs_refused": len(refused), "rebuilds": rebuilds,
                         # what the orgs in use would need: the cached, the refused (predicted), the memo
                         "working_set_bytes": index_bytes + sum(refused.values()) + counted},
        }

    def health(self) -> dict:
        """A /healthz check of this process's cache: ``info`` with a status, degraded while the
        orgs in use need more than the cap (an org refused or rebuilt within the window): requests
        are then served from Postgres (slower, one hop of diffusion) or wait for rebuilds."""
        out = info = self.info()
        pressure = info["pressure"]
        reasons = []
        if pressure["orgs_refused"]:
            reasons.append(f"{pressure['orgs_refused']} orgs served from Postgres as the cache is full of "
                           f"more requested ones")
        if pressure["rebuilds"]:
            reasons.append(f"{pressure['rebuilds']} indexes rebuilt after an eviction")
        if reasons:
            out = {"status": "degraded", "detail": (
                f"the orgs in use need ~{pressure['working_set_bytes']} bytes, over NYLON_CACHE_MAX_BYTES "
                f"({self.max_bytes}): " + "; ".join(reasons) + f" in the last {PRESSURE_WINDOW_SECS:.0f} s"), **info}
        return out

    def _build_in_background(self, org_id: int) -> None:
        from django.db import close_old_connections

        try:
            self._get(org_id, gated=True)  # kept if it fits and is admitted; else marked oversized, and dropped
        except Exception:  # the fallback keeps serving; the next query retries the build
            log.exception("background cache build for org %s failed", org_id)
        finally:
            with self._guard:
                self._building.discard(org_id)
            close_old_connections()


_cache: EngineCache | None = None


def get_cache() -> EngineCache:
    global _cache
    if _cache is None:
        _cache = EngineCache()
    return _cache


def now_days() -> float:
    return time.time() / 86400.0
