"""Resonance retrieval: hybrid seeds -> graph diffusion -> scoring -> rerank.

Visibility is enforced at every stage by the caller's ``allowed`` mask:
hidden nodes do not enter corpus statistics, cannot seed, cannot be entered
by diffusion (so they are not even a path), and cannot be returned.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .graph import Graph
from .index import TenantIndex
from .tokenize import tokenize
from .types import (
    MAX_K,
    Explanation,
    Hit,
    NodeKind,
    ResonateParams,
    ResonateResult,
    Seed,
)
from .windows import window_cosine, window_vector_top

__all__ = ["resonate", "diffuse", "fuse_seeds", "Activation"]


@dataclass(frozen=True, slots=True)
class Activation:
    """Every node reached by diffusion (seeds included), in reach order."""

    locals: np.ndarray  # int64
    act: np.ndarray  # float64
    hop: np.ndarray  # int32 (0 = seed)
    parent: np.ndarray  # int64 local of the best predecessor, -1 for seeds
    hops_done: int
    truncated: bool


def diffuse(
    graph: Graph,
    seed_locals: np.ndarray,
    seed_act: np.ndarray,
    allowed: np.ndarray,
    *,
    depth: int,
    hop_decay: float = 0.5,
    combine: str = "sum",
    max_activated: int = 64,
    deadline: float | None = None,
) -> Activation:
    """Spread activation ``depth`` hops out from the seeds.

    Each hop only the nodes reached *at that hop* pass activation on
    (a_i * w_ij * hop_decay, summed or maxed per target). A node is activated
    once, at the first hop that reaches it: re-entering visited nodes would
    let activation echo back and forth along every edge and inflate hubs.
    Targets must be allowed; the ``max_activated`` strongest survive per hop.
    """
    seeds = np.asarray(seed_locals, dtype=np.int64)
    acts = np.asarray(seed_act, dtype=np.float64)
    parts_l = [seeds]
    parts_a = [acts]
    parts_h = [np.zeros(seeds.size, dtype=np.int32)]
    parts_p = [np.full(seeds.size, -1, dtype=np.int64)]
    visited = np.zeros(allowed.shape[0], dtype=bool)
    visited[seeds] = True
    frontier, f_act = seeds, acts
    hops_done = 0
    truncated = False
    for hop in range(1, depth + 1):
        if frontier.size == 0:
            break
        if deadline is not None and time.perf_counter() > deadline:
            truncated = True
            break
        src_pos, nbr, w, _kind = graph.neighbors(frontier)
        keep = (w > 0) & allowed[nbr] & ~visited[nbr]
        hops_done = hop
        if not keep.any():
            break
        src_pos, nbr, w = src_pos[keep], nbr[keep], w[keep]
        contrib = f_act[src_pos] * w.astype(np.float64) * hop_decay
        src = frontier[src_pos]
        # Canonical order (target, strongest first, lowest source) makes the
        # result independent of how neighbours happen to be stored (CSR vs
        # delta, insertion order) - needed for rebuild-identical results.
        order = np.lexsort((src, -contrib, nbr))
        nbr, contrib, src = nbr[order], contrib[order], src[order]
        starts = np.flatnonzero(np.concatenate(([True], nbr[1:] != nbr[:-1])))
        targets = nbr[starts]
        if combine == "sum":
            agg = np.add.reduceat(contrib, starts)
        elif combine == "max":
            agg = contrib[starts]
        else:
            raise ValueError(f"unknown combine {combine!r}")
        parent = src[starts]
        if targets.size > max_activated:
            sel = np.lexsort((targets, -agg))[:max_activated]
            sel.sort()
            targets, agg, parent = targets[sel], agg[sel], parent[sel]
        visited[targets] = True
        parts_l.append(targets)
        parts_a.append(agg)
        parts_h.append(np.full(targets.size, hop, dtype=np.int32))
        parts_p.append(parent)
        frontier, f_act = targets, agg
    return Activation(
        np.concatenate(parts_l),
        np.concatenate(parts_a),
        np.concatenate(parts_h),
        np.concatenate(parts_p),
        hops_done,
        truncated,
    )


def fuse_seeds(
    lex_ids: np.ndarray,
    lex_scores: np.ndarray,
    vec_ids: np.ndarray,
    vec_scores: np.ndarray,
    params: ResonateParams,
    win_ids: np.ndarray | None = None,
    win_scores: np.ndarray | None = None,
    *,
    raw: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Merge the channels into seed (locals, activation in (0, 1]).

    Channels are the turn-level lexical list, the vector list and (optionally) the
    context-window lexical list, each weighted (w_lex, w_vec, w_win). ``raw`` returns the
    un-normalised fused score instead of the floored activation.
    """
    if win_ids is None:
        win_ids = np.empty(0, np.int64)
        win_scores = np.empty(0, np.float64)
    channels = (
        (lex_ids, lex_scores, params.w_lex),
        (vec_ids, vec_scores, params.w_vec),
        (win_ids, win_scores, params.w_win),
    )
    ids = np.union1d(np.union1d(lex_ids, vec_ids), win_ids).astype(np.int64)
    if ids.size == 0:
        return ids, np.empty(0, dtype=np.float64)
    fused = np.zeros(ids.size, dtype=np.float64)
    if params.fusion == "rrf":
        for ch_ids, _sc, wt in channels:
            if ch_ids.size:
                pos = np.searchsorted(ids, ch_ids)
                fused[pos] += wt / (params.rrf_k + np.arange(1, ch_ids.size + 1))
    elif params.fusion == "weighted":
        for ch_ids, ch_sc, wt in channels:
            if ch_ids.size:
                s = np.asarray(ch_sc, dtype=np.float64)
                lo, hi = s.min(), s.max()
                norm = (s - lo) / (hi - lo) if hi > lo else np.ones_like(s)
                fused[np.searchsorted(ids, ch_ids)] += wt * norm
    else:
        raise ValueError(f"unknown fusion {params.fusion!r}")
    if raw:
        order = np.lexsort((ids, -fused))
        return ids[order], fused[order]
    top = fused.max()
    act = fused / top if top > 0 else np.ones_like(fused)
    act = np.maximum(act, params.seed_floor)
    order = np.lexsort((ids, -act))
    return ids[order], act[order]


def resonate(
    index: TenantIndex,
    *,
    query_text: str = "",
    query_tokens: list[str] | None = None,
    query_vec: np.ndarray | None = None,
    allowed: np.ndarray,
    params: ResonateParams | None = None,
    now_days: float,
) -> ResonateResult:
    params = params or ResonateParams()
    t_start = time.perf_counter()
    deadline = t_start + params.time_budget_ms / 1000.0
    n = index.n
    k = max(0, min(int(params.k), MAX_K))

    allowed = np.asarray(allowed, dtype=bool)
    vis = np.zeros(n, dtype=bool)
    m = min(n, allowed.shape[0])
    vis[:m] = allowed[:m]
    vis &= ~index.col("deleted")
    seedable = vis & index.seedable_mask(now_days, params.tension_threshold)

    tokens = query_tokens if query_tokens is not None else tokenize(query_text)
    bm = index.bm25.query(tokens, vis)
    lex_ids, lex_sc = bm.top(params.n_lex, seedable)
    qvec = None
    if query_vec is not None:
        qvec = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if not np.all(np.isfinite(qvec)) or not qvec.any():
            qvec = None
    if qvec is not None and params.n_vec > 0:
        vec_ids, vec_sc = index.vectors.search(qvec, params.n_vec, seedable)
    else:
        vec_ids, vec_sc = np.empty(0, np.int64), np.empty(0, np.float32)

    if params.n_win > 0:
        wq = index.windows.query(tokens, vis)
        win_ids, win_sc = wq.top(params.n_win, seedable)
    else:
        win_ids, win_sc = np.empty(0, np.int64), np.empty(0, np.float64)
    if params.n_wvec > 0 and qvec is not None:
        wv_ids, wv_sc = window_vector_top(index.windows, index.vectors, qvec, params.n_wvec, vis, seedable)
        if params.w_wvec_as == "vec":
            vec_ids, vec_sc = wv_ids, wv_sc
        else:
            win_ids, win_sc = _merge_lists(win_ids, win_sc, wv_ids, wv_sc)

    seed_l, seed_a = fuse_seeds(lex_ids, lex_sc, vec_ids, vec_sc, params, win_ids, win_sc)
    lex_rank = {int(x): r for r, x in enumerate(lex_ids.tolist(), 1)}
    vec_rank = {int(x): r for r, x in enumerate(vec_ids.tolist(), 1)}
    node_id_col = index.col("node_id")
    seeds = tuple(
        Seed(int(node_id_col[s]), int(s), float(a), lex_rank.get(int(s)), vec_rank.get(int(s)))
        for s, a in zip(seed_l.tolist(), seed_a.tolist(), strict=True)
    )

    actv = diffuse(
        index.graph,
        seed_l,
        seed_a,
        vis,
        depth=max(0, int(params.depth)),
        hop_decay=params.hop_decay,
        combine=params.combine,
        max_activated=params.max_activated,
        deadline=deadline,
    )

    # Bridges carry activation but are never answers.
    kinds = index.col("kind")
    keep = kinds[actv.locals] != NodeKind.BRIDGE
    cand = actv.locals[keep]
    act = actv.act[keep]
    ten = index.tension(cand, now_days)
    ctx = 1.0 + params.w_ctx * bm.match_fraction(cand)
    score = act * ten * ctx
    cos = np.full(cand.size, np.nan)
    final = score
    if params.final == "rank" and cand.size:
        final, cos = _rank_final(
            index, cand, score, qvec, params, (lex_ids, lex_sc, vec_ids, vec_sc, win_ids, win_sc), vis
        )
    elif params.rerank and qvec is not None and params.w_rerank > 0 and cand.size:
        cos = index.vectors.cosine(cand, qvec)
        top = score.max()
        base = score / top if top > 0 else score
        w = params.w_rerank
        final = np.where(np.isnan(cos), base, (1.0 - w) * base + w * np.nan_to_num(cos))
    order = np.lexsort((cand, -final))[:k]

    parent_of = dict(zip(actv.locals.tolist(), actv.parent.tolist(), strict=True))
    hop_of = dict(zip(actv.locals.tolist(), actv.hop.tolist(), strict=True))
    hits: list[Hit] = []
    dropped = 0
    budget = int(params.max_chars)
    marker = params.truncation_marker
    for i in order.tolist():
        loc = int(cand[i])
        text = index.texts[loc]
        if budget <= 0:
            dropped += 1
            continue
        if len(text) > budget:
            keep_chars = budget - len(marker)
            if keep_chars <= 0:
                dropped += 1
                continue
            text = text[:keep_chars] + marker
        budget -= len(text)
        path = _path(loc, parent_of, node_id_col)
        c = float(cos[i])
        hits.append(
            Hit(
                node_id=int(node_id_col[loc]),
                local=loc,
                score=float(final[i]),
                text=text,
                kind=int(kinds[loc]),
                explanation=Explanation(
                    channels={"lexical": lex_rank.get(loc), "vector": vec_rank.get(loc)},
                    seed=hop_of[loc] == 0,
                    path=path,
                    hops=int(hop_of[loc]),
                    parts={
                        "activation": float(act[i]),
                        "tension": float(ten[i]),
                        "context_match": float(ctx[i]),
                        "cosine": None if np.isnan(c) else c,
                        "final": float(final[i]),
                    },
                ),
            )
        )
    return ResonateResult(
        hits=tuple(hits),
        seeds=seeds,
        depth=int(params.depth),
        activated_count=int(actv.locals.size),
        elapsed_ms=(time.perf_counter() - t_start) * 1000.0,
        truncated=actv.truncated,
        dropped_for_chars=dropped,
        hops_done=actv.hops_done,
    )


def _merge_lists(a_ids, a_sc, b_ids, b_sc):
    """Interleave two ranked lists (a1, b1, a2, b2, ...), keeping each id's first place."""
    n = max(a_ids.size, b_ids.size)
    seen: set[int] = set()
    out: list[int] = []
    for r in range(n):
        for ids in (a_ids, b_ids):
            if r < ids.size and int(ids[r]) not in seen:
                seen.add(int(ids[r]))
                out.append(int(ids[r]))
    ids = np.asarray(out, dtype=np.int64)
    return ids, np.linspace(1.0, 0.5, ids.size) if ids.size else np.empty(0)


def _rr(values: np.ndarray, k: int) -> np.ndarray:
    """1/(k + rank) of each value (rank 1 = largest; NaN ranks last)."""
    v = np.where(np.isnan(values), -np.inf, values)
    order = np.lexsort((np.arange(v.size), -v))
    ranks = np.empty(v.size, dtype=np.float64)
    ranks[order] = np.arange(1, v.size + 1)
    out = 1.0 / (k + ranks)
    out[np.isinf(v)] = 0.0
    return out


def _rank_final(index, cand, score, qvec, params, lists, vis):
    """Reciprocal-rank fusion of the seed channels with diffusion score and cosine ranks."""
    lex_ids, lex_sc, vec_ids, vec_sc, win_ids, win_sc = lists
    ids, fused = fuse_seeds(lex_ids, lex_sc, vec_ids, vec_sc, params, win_ids, win_sc, raw=True)
    order = np.argsort(ids)
    ids, fused = ids[order], fused[order]
    final = np.zeros(cand.size, dtype=np.float64)
    if ids.size:
        pos = np.minimum(np.searchsorted(ids, cand), ids.size - 1)
        hit = ids[pos] == cand
        final[hit] = fused[pos[hit]]
    rk = params.rrf_k
    if params.w_rank_act > 0:
        final += params.w_rank_act * _rr(score, rk)
    cos = np.full(cand.size, np.nan)
    if qvec is not None:
        cos = index.vectors.cosine(cand, qvec)
        if params.w_rank_cos > 0:
            final += params.w_rank_cos * _rr(cos, rk)
        if params.w_rank_wcos > 0:
            wcos = window_cosine(index.windows, index.vectors, cand, qvec, vis)
            final += params.w_rank_wcos * _rr(wcos, rk)
    return final, cos


def _path(loc: int, parent_of: dict[int, int], node_id_col: np.ndarray) -> tuple[int, ...]:
    chain = [loc]
    p = parent_of[loc]
    while p >= 0:
        chain.append(p)
        p = parent_of[p]
    return tuple(int(node_id_col[x]) for x in reversed(chain))
