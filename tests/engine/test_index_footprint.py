"""The index's own byte accounting (``TenantIndex.nbytes``, what the cache's cap bounds) against what
the process holds, and the lower bound the cache judges an unbuilt org by (``estimate_nbytes``)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from memory.engine import NodeRecord, Scope, TenantIndex
from memory.engine.sizing import measured_nbytes

ROOT = Path(__file__).resolve().parents[2]
WORDS = ("deploy budget meeting customer review roadmap incident ticket sprint design feature billing staging "
         "cluster backup vendor invoice release pager audit garden guitar marathon podcast").split()
CJK = "我们昨天在北京讨论了预算和发布计划客户说下周二再开会评审设计"


def _turn(rng: random.Random, cjk: bool) -> str:
    if cjk:
        return "".join(rng.choice(CJK) for _ in range(rng.randint(10, 120)))
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 40)))


def _records(n: int, *, seed: int, dim: int, cjk_share: float = 0.0, no_vector_share: float = 0.0,
             session_len: int = 12) -> list[NodeRecord]:
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        vec = np.empty(0, np.float32) if rng.random() < no_vector_share else nrng.standard_normal(dim)
        out.append(NodeRecord(node_id=10 * i + 7, text=_turn(rng, rng.random() < cjk_share), scope=Scope.ORG,
                              owner_key=rng.randint(1, 3), session_key=1 + i // session_len, seq=i % session_len,
                              vector=vec.astype(np.float32)))
    return out


def _build(records: list[NodeRecord], dim: int, *, deleted: float, edges: int, seed: int,
           batch: int | None = None, exact_below: int = 20_000) -> TenantIndex:
    """Built as the cache builds (one batch, edges, deletions, compaction, HNSW if due), or written in
    batches of ``batch`` as catch-ups write."""
    rng = random.Random(seed)
    idx = TenantIndex(dim, vector_opts={"exact_below": exact_below})
    step = batch or len(records) or 1
    for i in range(0, len(records), step):
        idx.upsert_nodes(records[i: i + step])
    ids = [r.node_id for r in records]
    if ids and edges:
        src = np.array([rng.choice(ids) for _ in range(edges)])
        dst = np.array([rng.choice(ids) for _ in range(edges)])
        idx.add_edges(src, dst, 0.5, 1)
    idx.delete_nodes([i for i in ids if rng.random() < deleted])
    if batch is None:
        idx.compact()
    idx.vectors.prepare()
    return idx


CASES = [  # n, dim, cjk share, share without vector, share deleted, edges, written in batches of
    (0, 8, 0.0, 0.0, 0.0, 0, None),
    (1, 8, 0.0, 0.0, 0.0, 0, None),
    (300, 384, 0.0, 0.0, 0.0, 900, None),
    (300, 384, 1.0, 0.0, 0.0, 0, None),
    (300, 16, 0.5, 0.5, 0.3, 2000, None),
    (500, 32, 0.0, 1.0, 1.0, 100, None),
    (400, 384, 0.2, 0.1, 0.1, 800, 3),
    (1200, 24, 0.0, 0.0, 0.0, 3000, None),
]


@pytest.mark.parametrize(("n", "dim", "cjk", "novec", "deleted", "edges", "batch"), CASES)
def test_estimate_is_a_lower_bound_of_the_built_index(n, dim, cjk, novec, deleted, edges, batch) -> None:
    records = _records(n, seed=n + dim, dim=dim, cjk_share=cjk, no_vector_share=novec)
    idx = _build(records, dim, deleted=deleted, edges=edges, seed=n, batch=batch, exact_below=1000)
    live = int(n - np.count_nonzero(idx.col("deleted")))
    bound = TenantIndex.estimate_nbytes(nodes=n, live=live, dim=dim)
    assert bound <= idx.nbytes()
    # Also below the walk of what the index really holds: the bound never refuses an org that fits.
    assert bound <= measured_nbytes(idx)[0]


def test_estimate_is_close_enough_to_judge_conversation_turns() -> None:
    """On turns of conversation with 384-d vectors the bound is well over half of the built index,
    so an org refused by it is far over the cap, and one built to find out is at most ~1.6x over."""
    records = _records(1500, seed=3, dim=384)
    idx = _build(records, 384, deleted=0.0, edges=3000, seed=3)
    bound = TenantIndex.estimate_nbytes(nodes=1500, dim=384)
    assert 0.6 <= bound / idx.nbytes() <= 1.0, (bound, idx.nbytes())


def test_reserved_index_written_in_pages_holds_what_one_write_holds() -> None:
    """A build read in pages reserves the org's row count first: written page by page, the columns,
    the vector matrix and the windows' rows would otherwise grow by doubling, to up to twice the
    rows (3,000 rows in pages of 100 end with room for 3,200, and a copy of the matrix at each step)."""
    records = _records(3000, seed=9, dim=64)
    one = TenantIndex(64)
    one.reserve(len(records))
    one.upsert_nodes(records)
    paged = TenantIndex(64)
    paged.reserve(len(records))
    for i in range(0, len(records), 100):
        paged.upsert_nodes(records[i: i + 100])
    one.compact()
    paged.compact()  # page boundaries re-index some windows twice: dead postings, compacted away
    assert paged.nbytes() <= one.nbytes()
    assert paged.vectors.nbytes() == one.vectors.nbytes() == 3000 * (64 * 4 + 1)
    unreserved = TenantIndex(64)
    for i in range(0, len(records), 100):
        unreserved.upsert_nodes(records[i: i + 100])
    unreserved.compact()
    assert unreserved.vectors.nbytes() == 3200 * 64 * 4 + unreserved.vectors._has.nbytes  # what reserving saves
    assert unreserved.nbytes() > one.nbytes()


def test_text_bytes_follow_the_stored_width() -> None:
    """CPython keeps a CJK text at 2 bytes a character; counting characters (the old accounting)
    under-counted an org of CJK turns' texts by half."""
    text = "预算" * 500
    base, cjk, ascii_ = TenantIndex(4), TenantIndex(4), TenantIndex(4)
    base.upsert_nodes([NodeRecord(1, "", tokens=[])])
    cjk.upsert_nodes([NodeRecord(1, text, tokens=[])])
    ascii_.upsert_nodes([NodeRecord(1, "x" * len(text), tokens=[])])
    assert cjk.nbytes() - base.nbytes() == sys.getsizeof(text) - sys.getsizeof("")
    # 2 bytes a character instead of 1 (and a larger header)
    assert cjk.nbytes() - ascii_.nbytes() == sys.getsizeof(text) - sys.getsizeof("x" * len(text)) > len(text)
    # An update to another text moves the count by the difference, both ways.
    cjk.upsert_nodes([NodeRecord(1, "x" * len(text), tokens=[])])
    assert cjk.nbytes() == ascii_.nbytes()


_RSS_PROBE = textwrap.dedent("""
    import ctypes, gc, json, os, random, sys
    sys.path.insert(0, {root!r})
    import numpy as np
    from tests.engine.test_index_footprint import _build, _records
    from memory.engine import TenantIndex
    from memory.engine.tokenize import tokenize

    def rss():
        gc.collect()
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    records = _records({n}, seed=5, dim=384, cjk_share={cjk})
    for r in records:  # tokens and vectors are the caller's (the cache's rows), not the index's
        r.tokens = tokenize(r.text)
    _build(records[:64], 384, deleted=0.0, edges=64, seed=1)  # code paths and caches warmed up
    before = rss()
    idx = _build(records, 384, deleted=0.0, edges=2 * {n}, seed=5)
    print(json.dumps({{"rss": rss() - before, "nbytes": idx.nbytes()}}))
""")


@pytest.mark.parametrize("cjk", [0.0, 1.0])
def test_nbytes_matches_the_rss_a_fresh_build_adds(cjk) -> None:
    """Held against the process itself: the resident memory a build of 6,000 turns adds (in a fresh
    interpreter, after handing freed heap back) is within 25% of what the index claims."""
    code = _RSS_PROBE.format(root=str(ROOT), n=6000, cjk=cjk)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert 0.8 <= got["rss"] / got["nbytes"] <= 1.25, got
