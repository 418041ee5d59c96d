"""The engine alone (no Django, no Postgres) on the synthetic tenant of ``bench/resonate_scale.py``:
per-stage time of warm ``resonate`` calls, a cProfile of them, or an interleaved old-vs-new
comparison that also checks the two engines return the same results.

The tenant is the scale benchmark's (same generator, read from that file: sessions of 8-32 turns,
Zipf text calibrated on LoCoMo, clustered vectors, ~10 edges per node, its 60/25/14.5/0.5% org /
team / private / restricted split), built straight into a ``TenantIndex`` as the cache builds one;
queries are its questions, asked as its actor (the first agent) with the router's depth.

    .venv/bin/python bench/engine_profile.py --nodes 30000 --stages
    .venv/bin/python bench/engine_profile.py --nodes 30000 --profile
    .venv/bin/python bench/engine_profile.py --compare /tmp/old   # a copy of an older memory/engine

``--compare DIR``: DIR holds an older ``memory/engine`` (e.g. ``mkdir -p /tmp/old && git archive
HEAD~3 memory/engine | tar -x -C /tmp/old``, or a ``git worktree``); both engines build their
own index of the same tenant and answer the same queries, alternately, query by query; it prints
p50/p95/mean of each and fails if any query's hits (ids, order, scores) or seeds differ.
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import gc
import importlib
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC
from pathlib import Path
from types import ModuleType

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memory.engine.router import route  # noqa: E402
from memory.engine.weave import lexical_document  # noqa: E402

_GENERATOR_NAMES = {"pseudo_words", "generate", "make_queries"}


def scale_generator() -> ModuleType:
    """``generate`` of bench/resonate_scale.py with its constants, without importing that module
    (it sets up Django and attaches to Postgres at import)."""
    src = (ROOT / "bench" / "resonate_scale.py").read_text()
    tree = ast.parse(src)
    keep: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in _GENERATOR_NAMES:
            keep.append(node)
        elif isinstance(node, ast.Assign) and all(
            n.id.isupper() and n.id != "ROOT"
            for t in node.targets
            for n in ast.walk(t)
            if isinstance(n, ast.Name)
        ):
            keep.append(node)
    mod = ModuleType("scale_generator")
    mod.__dict__.update(np=np, EMBEDDING_DIM=384, UTC=UTC)
    from datetime import datetime, timedelta

    mod.__dict__.update(datetime=datetime, timedelta=timedelta)
    body = ast.Module(body=keep, type_ignores=[])
    exec(compile(body, "bench/resonate_scale.py", "exec"), mod.__dict__)  # noqa: S102
    return mod


def load_engine(pkg_dir: Path | None) -> ModuleType:
    """``memory.engine`` itself, or the copy under ``pkg_dir/memory/engine`` as its own package."""
    if pkg_dir is None:
        return importlib.import_module("memory.engine")
    src = pkg_dir / "memory" / "engine"
    tmp = Path(tempfile.mkdtemp(prefix="engine_copy_"))
    name = f"engine_copy_{len([m for m in sys.modules if m.startswith('engine_copy_') and '.' not in m])}"
    dst = tmp / name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    for f in dst.glob("*.py"):  # absolute self-imports would load the current engine's modules
        f.write_text(f.read_text().replace("from memory.engine.", "from ."))
    sys.path.insert(0, str(tmp))
    return importlib.import_module(name)


def build(eng: ModuleType, gen: ModuleType, data: dict, *, hnsw: bool = True):
    """The tenant into ``eng.TenantIndex`` as ``memory.cache`` builds it (pages of 4,096 rows)."""
    from datetime import datetime

    n = data["n"]
    idx = eng.TenantIndex(384)
    idx.reserve(n)
    kinds = {"leaf": 0, "fact": 1, "bridge": 2, "persona": 3, "scene": 4}
    scopes = {"private": 0, "team": 1, "org": 2, "restricted": 3}
    now = datetime.now(UTC).timestamp() / 86400.0
    recs = []
    for i in range(n):
        s = int(data["sess_of"][i])
        o = int(data["s_owner"][s])
        vis = str(data["s_vis"][s])
        team = (
            int(data["s_team"][s]) + 1
            if vis == "team"
            else ((o - gen.N_USERS) % gen.N_TEAMS + 1 if o >= gen.N_USERS else 0)
        )
        occ: datetime = data["occurred"][i]
        kind = str(data["kind"][i])
        doc = lexical_document(data["texts"][i], speaker=data["speakers"][i], occurred_at=occ)
        recs.append(
            eng.NodeRecord(
                node_id=1_000_000 + i,
                text=data["texts"][i],
                kind=kinds[kind],
                owner_key=o + 1,
                team_id=team,
                scope=scopes[vis],
                t0=1.0 if kind != "bridge" else 0.6,
                lam=0.01,
                last_updated=min(occ.timestamp() / 86400.0, now),
                mentions=int(data["mentions"][i]),
                session_key=s + 1,
                seq=int(data["seq"][i]),
                occurred_at=occ.timestamp() / 86400.0,
                vector=data["vecs"][i],
                tokens=eng.tokenize(doc),
                speaker=data["speakers"][i],
            )
        )
    for i in range(0, n, 4096):
        idx.upsert_nodes(recs[i : i + 4096])
    edge_kinds = np.asarray([0, 4, 5, 3, 2], dtype=np.int64)  # temporal, derived, bridge, similar, entity
    idx.add_edges_local(data["e_src"], data["e_dst"], data["e_w"], edge_kinds[data["e_kind"]])
    idx.compact()
    if hnsw:
        idx.vectors.prepare()
    return idx


def actor_mask(idx, gen: ModuleType) -> np.ndarray:
    """The first agent: owner key N_USERS + 1, team 1 (as in resonate_scale.py)."""
    return idx.visibility_mask(owner_keys=[gen.N_USERS + 1], team_ids=[1])


# Parameter sets and callers the identity check cycles through besides the defaults: other
# fusions, final orderings, feedback sources and targets, depths, diversification, no vector.
VARIANTS: list[dict] = [
    {},
    {"depth": 0},
    {"depth": 3, "combine": "max"},
    {"fusion": "weighted", "w_lex": 0.5},
    {"final": "blend"},
    {"prf_source": "own", "prf_target": "turn"},
    {"w_wvec_as": "win", "n_wvec": 10},
    {"div_adj": 0.5, "div_session": 0.7, "k": 25},
    {"n_win": 0, "w_vprf": 0.0, "w_ent": 0.5},
    {"n_prf": 0, "w_rank_cos": 0.5, "w_rank_sess": 0.0},
    {"no_vector": True},
    {"k": 100, "max_activated": 16, "tension_threshold": 0.2},
]
# (owner keys, team ids): the first agent, a user of another team, an owner with no team, nobody.
ACTORS: list[tuple[list[int], list[int]]] = [([11], [1]), ([3], [4]), ([25], []), ([], [])]


def run(eng: ModuleType, idx, allowed, q: str, qv: np.ndarray | None, now: float, **over):
    if over.pop("no_vector", False):
        qv = None
    over = {"k": 10, "depth": route(q).depth, **over}
    params = eng.ResonateParams(**over)
    return eng.resonate(
        idx,
        query_text=q,
        query_tokens=eng.tokenize(q),
        query_vec=qv,
        allowed=allowed,
        params=params,
        now_days=now,
    )


def same(a, b) -> str | None:
    """None if two results agree (ids, order, scores to 1e-9, seeds, explanations), else why not."""
    if a.node_ids != b.node_ids:
        return f"hits {a.node_ids} vs {b.node_ids}"
    for x, y in zip(a.hits, b.hits, strict=True):
        if not np.isclose(x.score, y.score, rtol=1e-9, atol=0):
            return f"score of {x.node_id}: {x.score!r} vs {y.score!r}"
        ex, ey = x.explanation, y.explanation
        if (ex.channels, ex.seed, ex.path, ex.hops) != (ey.channels, ey.seed, ey.path, ey.hops):
            return f"explanation of {x.node_id}"
        for key, v in ex.parts.items():
            w = ey.parts[key]
            if (v is None) != (w is None) or (v is not None and not np.isclose(v, w, rtol=1e-9, atol=0)):
                return f"part {key} of {x.node_id}: {v} vs {w}"
    if a.seed_ids != b.seed_ids:
        return "seeds"
    if not np.allclose([s.activation for s in a.seeds], [s.activation for s in b.seeds], rtol=1e-9, atol=0):
        return "seed activations"
    if (a.activated_count, a.hops_done) != (b.activated_count, b.hops_done):
        return "activated"
    return None


def patch_stages(eng: ModuleType, spent: dict[str, float]) -> list[tuple[object, str, object]]:
    """A CPU-time (process) timer around each stage of ``eng`` adding into ``spent`` (nested stages overlap: BM25 queries
    also run inside the window and feedback passes); returns what ``unpatch`` restores."""
    res_mod = importlib.import_module(eng.__name__ + ".resonance")
    bm25_mod = importlib.import_module(eng.__name__ + ".bm25")
    vec_mod = importlib.import_module(eng.__name__ + ".vectors")
    win_mod = importlib.import_module(eng.__name__ + ".windows")
    patched: list[tuple[object, str, object]] = []

    def timed(owner, name: str, label: str) -> None:
        fn = getattr(owner, name, None)
        if fn is None:
            return

        def wrapped(*a, **kw):
            t = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - t

        patched.append((owner, name, fn))
        setattr(owner, name, wrapped)

    for name in (
        "window_vector_top",
        "window_cosine",
        "_prf_list",
        "_vector_feedback",
        "diffuse",
        "_rank_final",
        "_session_scores",
        "_speaker_match",
        "fuse_seeds",
        "_date_focus",
    ):
        timed(res_mod, name, name.lstrip("_"))
    for cls, name in (
        (bm25_mod.BM25Index, "query"),
        (bm25_mod.BM25Query, "top"),
        (vec_mod.VectorIndex, "search"),
        (win_mod.ContextWindows, "query"),
        (bm25_mod.BM25Index, "query_top"),
        (vec_mod.VectorIndex, "cosine"),
    ):
        timed(cls, name, f"{cls.__name__}.{name}")
    return patched


def unpatch(patched: list[tuple[object, str, object]]) -> None:
    for owner, name, fn in reversed(patched):
        setattr(owner, name, fn)


def print_stages(spent: dict[str, float], n: int, other: dict[str, float] | None = None) -> None:
    for label, secs in sorted(spent.items(), key=lambda x: -x[1]):
        line = f"  {label:28s} {secs / n * 1000:6.2f} ms"
        if other is not None:
            line = f"  {label:28s} old {other.get(label, 0.0) / n * 1000:6.2f}  new {secs / n * 1000:6.2f} ms"
        print(line)


def stages(eng: ModuleType, idx, allowed, queries, now: float) -> None:
    spent: dict[str, float] = {}
    patched = patch_stages(eng, spent)
    try:
        for q, qv in queries[:20]:
            run(eng, idx, allowed, q, qv, now)
        spent.clear()
        total = 0.0
        for q, qv in queries:
            total += run(eng, idx, allowed, q, qv, now).elapsed_ms
    finally:
        unpatch(patched)
    n = len(queries)
    print(
        f"stages, mean per query over {n} warm queries: engine {total / n:.2f} ms wall (timers included); CPU time per stage:"
    )
    print_stages(spent, n)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=0, help="default 10 per node")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument(
        "--compare", type=Path, default=None, help="root of an older checkout (holds memory/engine)"
    )
    ap.add_argument(
        "--new", type=Path, default=None, help="root of the checkout to compare it with (default: this one)"
    )
    args = ap.parse_args()

    gen = scale_generator()
    t = time.perf_counter()
    data = gen.generate(args.nodes, args.edges or 10 * args.nodes, args.seed)
    queries = data["queries"][: args.queries]
    print(
        f"generated {data['n']:,} nodes, {data['e_src'].size:,} edges in {time.perf_counter() - t:.1f}s; "
        f"{os.cpu_count()} cores, load avg {os.getloadavg()[0]:.1f}"
    )
    now = time.time() / 86400.0
    new = load_engine(args.new)
    t = time.perf_counter()
    idx = build(new, gen, data)
    allowed = actor_mask(idx, gen)
    print(f"built in {time.perf_counter() - t:.1f}s; visible {int(allowed.sum()):,} of {idx.n:,}")
    if args.compare is not None:
        old = load_engine(args.compare)
        t = time.perf_counter()
        idx_old = build(old, gen, data, hnsw=False)
        # One HNSW graph for both: usearch builds with several threads, so two builds of the same
        # vectors differ, and so would the candidates they propose.
        idx_old.vectors._hnsw = idx.vectors._hnsw.copy()
        allowed_old = actor_mask(idx_old, gen)
        print(f"old engine ({args.compare}) built in {time.perf_counter() - t:.1f}s")
        del data
        gc.collect()
        bad = 0
        for q, qv in queries:
            why = same(run(old, idx_old, allowed_old, q, qv, now), run(new, idx, allowed, q, qv, now))
            if why:
                bad += 1
                if bad <= 5:
                    print(f"DIFFERENT on {q!r}: {why}")
        print(f"identity: {len(queries) - bad} of {len(queries)} queries the same")
        # Then other callers (masks) and parameter sets, each query under one of each.
        masks = [
            (idx_old.visibility_mask(owner_keys=o, team_ids=t), idx.visibility_mask(owner_keys=o, team_ids=t))
            for o, t in ACTORS
        ]
        bad_v = 0
        for j, (q, qv) in enumerate(queries):
            m_old, m_new = masks[j % len(masks)]
            over = VARIANTS[(j // len(masks)) % len(VARIANTS)]
            why = same(run(old, idx_old, m_old, q, qv, now, **over), run(new, idx, m_new, q, qv, now, **over))
            if why:
                bad_v += 1
                if bad_v <= 5:
                    print(f"DIFFERENT on {q!r} with {over} as caller {j % len(masks)}: {why}")
        print(
            f"identity under {len(ACTORS)} callers x {len(VARIANTS)} parameter sets: "
            f"{len(queries) - bad_v} of {len(queries)} queries the same"
        )
        bad += bad_v
        # Wall and CPU (process) time of each call: on a shared machine the CPU time is the steadier.
        walls: dict[str, list[float]] = {"old": [], "new": []}
        cpus: dict[str, list[float]] = {"old": [], "new": []}
        for r in range(args.rounds):
            cur = {"old": ([], []), "new": ([], [])}
            for j, (q, qv) in enumerate(queries):
                pair = (("old", old, idx_old, allowed_old), ("new", new, idx, allowed))
                for label, eng, ix, al in pair if (j + r) % 2 == 0 else pair[::-1]:
                    c = time.process_time()
                    t = time.perf_counter()
                    run(eng, ix, al, q, qv, now)
                    cur[label][0].append((time.perf_counter() - t) * 1000)
                    cur[label][1].append((time.process_time() - c) * 1000)
            print(
                f"round {r + 1}, load avg {os.getloadavg()[0]:.1f}: "
                + " | ".join(
                    f"{lb} wall p50 {pct(w, 0.5):.2f} p95 {pct(w, 0.95):.2f} mean {statistics.fmean(w):.2f}, "
                    f"cpu mean {statistics.fmean(c):.2f} ms"
                    for lb, (w, c) in cur.items()
                )
            )
            for lb, (w, c) in cur.items():
                walls[lb] += w
                cpus[lb] += c
        for lb in ("old", "new"):
            w, c = walls[lb], cpus[lb]
            print(
                f"all {lb}: wall p50 {pct(w, 0.5):.2f} p95 {pct(w, 0.95):.2f} mean {statistics.fmean(w):.2f}; "
                f"cpu p50 {pct(c, 0.5):.2f} p95 {pct(c, 0.95):.2f} mean {statistics.fmean(c):.2f} ms"
            )
        print(
            f"new/old: wall mean {statistics.fmean(walls['new']) / statistics.fmean(walls['old']):.3f}, "
            f"wall p50 {pct(walls['new'], 0.5) / pct(walls['old'], 0.5):.3f}, "
            f"cpu mean {statistics.fmean(cpus['new']) / statistics.fmean(cpus['old']):.3f}"
        )
        if args.stages:
            s_old: dict[str, float] = {}
            s_new: dict[str, float] = {}
            patched = patch_stages(old, s_old) + patch_stages(new, s_new)
            try:
                for j, (q, qv) in enumerate(queries):
                    pair = ((old, idx_old, allowed_old), (new, idx, allowed))
                    for eng, ix, al in pair if j % 2 == 0 else pair[::-1]:
                        run(eng, ix, al, q, qv, now)
            finally:
                unpatch(patched)
            print(f"stages (CPU, mean per query over {len(queries)}, interleaved):")
            print_stages(s_new, len(queries), s_old)
        if bad:
            sys.exit(1)
        return
    del data
    gc.collect()
    if args.stages:
        stages(new, idx, allowed, queries, now)
    if args.profile:
        for q, qv in queries[:20]:
            run(new, idx, allowed, q, qv, now)
        pr = cProfile.Profile()
        pr.enable()
        for q, qv in queries:
            run(new, idx, allowed, q, qv, now)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(40)
    if not (args.stages or args.profile):
        times = []
        for _ in range(args.rounds):
            for q, qv in queries:
                t = time.perf_counter()
                run(new, idx, allowed, q, qv, now)
                times.append((time.perf_counter() - t) * 1000)
        print(f"p50 {pct(times, 0.5):.2f} p95 {pct(times, 0.95):.2f} mean {statistics.fmean(times):.2f} ms")


if __name__ == "__main__":
    main()
