"""Resonance retrieval: hybrid seeds -> graph diffusion -> scoring -> rerank.

Visibility is enforced at every stage by the caller's ``allowed`` mask:
hidden nodes do not enter corpus statistics, cannot seed, cannot be entered
by diffusion (so they are not even a path), and cannot be returned.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, replace
from datetime import date, timedelta

import numpy as np

from ._arrays import sorted_unique
from .graph import Graph
from .index import TenantIndex
from .ranking import COSINE_TIE_ABS, rank_order
from .router import is_time_question
from .text import WEEKDAY_NAMES, TimeMention, canonical_entity, extract_entities, resolve_times
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

# Best single nodes whose context windows the window-vector channel scores.
_WVEC_POOL = 100

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
    extra: tuple = (),
) -> tuple[np.ndarray, np.ndarray]:
    """Merge the channels into seed (locals, activation in (0, 1]).

    Channels are the turn-level lexical list, the vector list and (optionally) the
    context-window lexical list, each weighted (w_lex, w_vec, w_win). ``raw`` returns the
    un-normalised fused score instead of the floored activation.
    """
    ids, fused = _fused(lex_ids, lex_scores, vec_ids, vec_scores, params, win_ids, win_scores, extra)
    if ids.size == 0:
        return ids, fused
    if raw:
        order = np.lexsort((ids, -fused))
        return ids[order], fused[order]
    return _seed_activation(ids, fused, params)


def _fused(lex_ids, lex_scores, vec_ids, vec_scores, params, win_ids=None, win_scores=None, extra=()):
    """``fuse_seeds``' fused score of every id of the channels, ids ascending."""
    if win_ids is None:
        win_ids = np.empty(0, np.int64)
        win_scores = np.empty(0, np.float64)
    channels = (
        (lex_ids, lex_scores, params.w_lex),
        (vec_ids, vec_scores, params.w_vec),
        (win_ids, win_scores, params.w_win),
        *extra,
    )
    # The union of the channels' ids (np.union1d's result, one sort for all of them).
    ids = sorted_unique(np.concatenate((lex_ids, vec_ids, win_ids, *(ch[0] for ch in extra)))).astype(np.int64)
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
    return ids, fused


def _seed_activation(ids: np.ndarray, fused: np.ndarray, params: ResonateParams) -> tuple[np.ndarray, np.ndarray]:
    """Seeds best first with their activation in (0, 1] from ``_fused``'s scores."""
    if ids.size == 0:
        return ids, fused
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
    mentions = _named_days(query_text, now_days, params) if params.w_date > 0 else []
    if mentions:
        # The days the query names are the date focus's (its channel and bonus, below). As words they
        # also met every node of those days (a node's document holds its session date: "20 November
        # 2026 Friday") and of any day of the same number or month: "Can I deploy to production on
        # Friday November 20?" put ten unrelated lines of the 20th above the freeze notice that
        # answers it, matched by "deploy" and "production".
        tokens = _without_words_of(tokens, mentions, query_text)
    bm = index.bm25.query(tokens, vis)
    lex_ids, lex_sc = bm.top(params.n_lex, seedable)
    qvec = None
    if query_vec is not None:
        qvec = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        # A vector of another dimension (another embedder) is treated as no vector: lexical only.
        if qvec.size != index.vectors.dim or not np.all(np.isfinite(qvec)) or not qvec.any():
            qvec = None
    pool = None
    if qvec is not None and params.n_wvec > 0:
        # One search feeds both vector channels: the window channel's candidate pool is the best
        # single nodes among the visible ones (its windows may hold non-seedable members).
        pool, pool_sc = index.vectors.search(qvec, max(_WVEC_POOL, params.n_vec), vis)
        keep_seed = seedable[pool]
        vec_ids, vec_sc = pool[keep_seed][: params.n_vec], pool_sc[keep_seed][: params.n_vec]
    elif qvec is not None and params.n_vec > 0:
        vec_ids, vec_sc = index.vectors.search(qvec, params.n_vec, seedable)
    else:
        vec_ids, vec_sc = np.empty(0, np.int64), np.empty(0, np.float32)

    if params.n_win > 0:
        win_ids, win_sc = index.windows.query_top(tokens, params.n_win, vis, seedable)
    else:
        win_ids, win_sc = np.empty(0, np.int64), np.empty(0, np.float64)
    if params.n_wvec > 0 and qvec is not None:
        wv_ids, wv_sc = window_vector_top(
            index.windows, index.vectors, qvec, params.n_wvec, vis, seedable, top=pool
        )
        if params.w_wvec_as == "vec":
            vec_ids, vec_sc = wv_ids, wv_sc
        else:
            win_ids, win_sc = _merge_lists(win_ids, win_sc, wv_ids, wv_sc)

    # Feedback channels read the first-pass fusion's best seeds (no labels: only the query's own
    # top results), then join the channels of the final fusion.
    extra: tuple = ()
    if (params.n_prf > 0 and params.w_prf > 0 and tokens) or (params.w_vprf > 0 and qvec is not None):
        first, _ = fuse_seeds(lex_ids, lex_sc, vec_ids, vec_sc, params, win_ids, win_sc, raw=True)
        first = first[: max(0, params.prf_docs)]
        if params.n_prf > 0 and params.w_prf > 0 and tokens and first.size:
            p_ids, p_sc = _prf_list(index, tokens, first, vis, seedable, params)
            if p_ids is not None:
                extra += ((p_ids, p_sc, params.w_prf),)
        if params.w_vprf > 0 and qvec is not None and first.size:
            v_ids, v_sc = _vector_feedback(index, qvec, first, vis, seedable, params, pool)
            if v_ids is not None:
                extra += ((v_ids, v_sc, params.w_vprf),)
    in_dates = _date_focus(index, mentions, seedable, now_days) if mentions else None
    date_rank: dict[int, int] = {}
    if in_dates is not None:
        d_ids, d_sc = _date_list(index, in_dates, bm, qvec, params.n_lex)
        if d_ids.size:
            extra += ((d_ids, d_sc, params.w_date),)
            date_rank = {int(x): r for r, x in enumerate(d_ids.tolist(), 1)}
    # One fusion serves the seeds and the final ranking's channel term (``_rank_final``).
    fused_all = _fused(lex_ids, lex_sc, vec_ids, vec_sc, params, win_ids, win_sc, extra)
    seed_l, seed_a = _seed_activation(*fused_all, params)
    lex_rank = {int(x): r for r, x in enumerate(lex_ids.tolist(), 1)}
    vec_rank = {int(x): r for r, x in enumerate(vec_ids.tolist(), 1)}
    node_id_col = index.col("node_id")
    # Node ids gathered at once: a numpy scalar read per seed cost more than the Seed itself.
    seeds = tuple(
        Seed(nid, s, a, lex_rank.get(s), vec_rank.get(s))
        for nid, s, a in zip(node_id_col[seed_l].tolist(), seed_l.tolist(), seed_a.tolist(), strict=True)
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
    matched = bm.match_fraction(cand)  # each candidate's share of the query's terms
    ctx = 1.0 + params.w_ctx * matched
    score = act * ten * ctx
    cos = np.full(cand.size, np.nan)
    final = score
    if params.final == "rank" and cand.size:
        final, cos = _rank_final(index, cand, score, qvec, params, fused_all, vis)
        if params.w_rank_sess > 0:
            final = final + params.w_rank_sess * _rr(_session_scores(index, cand, bm, params.sess_top), params.rrf_k, cand)
        if params.w_own > 0:
            final = final + params.w_own / (params.rrf_k + 1) * matched
        if params.w_spk > 0:
            final = final + params.w_spk / (params.rrf_k + 1) * _speaker_match(index, cand, query_text, vis)
        if params.w_time > 0 and is_time_question(query_text or ""):
            # Only memories that share a word with the question: given to every dated memory, the
            # bonus (1/61) outweighed the gaps between the top hits, and "When did the payments
            # outage happen?" got four unrelated dated lines above the incident report.
            said_when = index.col("has_time")[cand] * (matched > 0)
            final = final + params.w_time / (params.rrf_k + 1) * said_when
        if params.w_ent > 0:
            final = final + params.w_ent / (params.rrf_k + 1) * _entity_match(index, cand, query_text)
        if in_dates is not None:
            final = final + params.w_date / (params.rrf_k + 1) * in_dates[cand]
        if params.w_ask > 0:
            final = final - params.w_ask / (params.rrf_k + 1) * index.col("asks")[cand]
    elif params.rerank and qvec is not None and params.w_rerank > 0 and cand.size:
        cos = index.vectors.cosine(cand, qvec)
        # Scores are finite for sane tension inputs; guard the normalisation anyway so one
        # non-finite score cannot turn every other into NaN or 0.
        fin = np.isfinite(score)
        cap = float(score[fin].max()) if fin.any() else 1.0
        score = np.nan_to_num(score, nan=0.0, posinf=cap, neginf=0.0)
        top = score.max()
        base = score / top if top > 0 else score
        w = params.w_rerank
        final = np.where(np.isnan(cos), base, (1.0 - w) * base + w * np.nan_to_num(cos))
    order = np.lexsort((cand, -final))
    if (params.div_adj < 1.0 or params.div_session < 1.0) and k > 1:
        order = _diversify(index, cand, final, order, k, params)
    order = order[:k]

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
                    # "date": its rank among the nodes of the day the query names, when it is one
                    channels={"lexical": lex_rank.get(loc), "vector": vec_rank.get(loc), "date": date_rank.get(loc)},
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


def _rr(values: np.ndarray, k: int, tie: np.ndarray, abs_eps: float = 0.0) -> np.ndarray:
    """1/(k + rank) of each value (rank 1 = largest, near-ties by ``tie``, see ``rank_order``); NaN
    scores 0, ranks last."""
    v = np.where(np.isnan(values), -np.inf, values)
    order = rank_order(v, tie, abs_eps=abs_eps)
    ranks = np.empty(v.size, dtype=np.float64)
    ranks[order] = np.arange(1, v.size + 1)
    out = 1.0 / (k + ranks)
    out[np.isinf(v)] = 0.0
    return out


def _prf_list(index, tokens, top, vis, seedable, params):
    """Second window-BM25 pass: the query plus the ``prf_terms`` most salient terms of the top
    seeds' windows (summed length-normalised tf x idf over visible windows; a term must occur in
    two feedback windows, one alone is as likely noise as topic), weighted ``prf_beta``."""
    win = index.windows
    qset = set(tokens)
    tf: dict[str, float] = {}
    support: dict[str, int] = {}
    groups = win.neighbours(top) if params.prf_source == "window" else [[int(x)] for x in top.tolist()]
    for members in groups:
        toks = [t for m in members for t in win.own_tokens(m)]
        if not toks:
            continue
        inv = 1.0 / len(toks)
        for t in toks:
            tf[t] = tf.get(t, 0.0) + inv
        for t in set(toks):
            support[t] = support.get(t, 0) + 1
    need = min(2, int(top.size))
    terms = [t for t in tf if t not in qset and support[t] >= need]
    if not terms:
        return None, None
    df, n_docs = win.bm25.doc_freqs(terms, vis)
    idf = np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
    sc = np.fromiter((tf[t] for t in terms), np.float64, len(terms)) * idf
    order = np.lexsort((np.asarray(terms), -sc))[: params.prf_terms]
    chosen = [terms[i] for i in order.tolist() if sc[i] > 0]
    if not chosen:
        return None, None
    target = win if params.prf_target == "window" else index.bm25
    return target.query_top(list(tokens) + chosen, params.n_prf, vis, seedable, dict.fromkeys(chosen, params.prf_beta))


def _vector_feedback(index, qvec, top, vis, seedable, params, pool=None):
    """Rocchio on the query vector: q/|q| + vprf_beta x mean unit vector of the top seeds' windows,
    searched like the window-vector channel."""
    members = index.windows.member_matrix(top)
    members = sorted_unique(members[members >= 0])
    members = members[vis[members]]
    mv = index.vectors.mean_vector(members) if members.size else None
    if mv is None:
        return None, None
    q2 = qvec.astype(np.float64) / np.linalg.norm(qvec) + params.vprf_beta * mv
    q2 = q2.astype(np.float32)
    if params.prf_target == "turn":  # measured worse than windows; kept for ablations
        return index.vectors.search(q2, params.n_wvec, seedable)
    first = pool if params.vprf_pool == "pool" else None
    return window_vector_top(index.windows, index.vectors, q2, params.n_wvec, vis, seedable, top=first)


def _session_scores(index, cand, bm, top):
    """Per candidate: sum of the ``top`` best turn-level BM25 scores in its session. A node written
    without a session is a session of its own (its own score): a lone write (an MCP or SDK weave with
    no session key) must not rank below every session turn for want of one (NaN: no lexical match)."""
    skey = index.col("session_key")
    out = np.full(cand.size, np.nan)
    cs = skey[cand]
    if bm.locals.size == 0:
        return out
    lone = cs == 0
    if lone.any():
        pos = np.minimum(np.searchsorted(bm.locals, cand[lone]), bm.locals.size - 1)
        found = bm.locals[pos] == cand[lone]
        vals = np.full(pos.size, np.nan)
        vals[found] = bm.scores[pos[found]]
        out[lone] = vals
    if not cs.any():
        return out
    s = skey[bm.locals]
    # Only the candidates' sessions are scored: sort the turns of those (a few dozen sessions)
    # rather than every turn the query's terms touched (tens of thousands in a large tenant).
    # Membership by binary search in the few candidate sessions: np.isin compared every turn with
    # each of them in turn.
    want = sorted_unique(cs[cs != 0])
    mine = want[np.minimum(np.searchsorted(want, s), want.size - 1)] == s
    s, sc = s[mine], bm.scores[mine]
    if s.size == 0:
        return out
    order = np.lexsort((-sc, s))
    s_o, sc_o = s[order], sc[order]
    starts = np.flatnonzero(np.concatenate(([True], s_o[1:] != s_o[:-1])))
    rank_in = np.arange(s_o.size) - np.repeat(starts, np.diff(np.append(starts, s_o.size)))
    keep = rank_in < top
    sums = np.bincount(np.searchsorted(s_o[starts], s_o[keep]), weights=sc_o[keep], minlength=starts.size)
    keys = s_o[starts]
    pos = np.minimum(np.searchsorted(keys, cs), keys.size - 1)
    hit = (keys[pos] == cs) & (cs != 0)
    out[hit] = sums[pos[hit]]
    return out


_EPOCH = date(1970, 1, 1)
_FIRST_DAY, _PAST_LAST_DAY = (date.min - _EPOCH).days, (date.max - _EPOCH).days + 1  # years 1-9999


def _named_days(query_text: str, now_days: float, params: ResonateParams) -> list[TimeMention]:
    """The days or weeks the query names (``resolve_times`` against today, from ``now_days``, so
    "last Tuesday" is the Tuesday before now), spans of ``date_max_span_days`` or more left out.
    A day's surface takes in the weekday written just before it (``_with_its_weekday``)."""
    if not query_text or not math.isfinite(now_days):
        return []
    try:
        today = _EPOCH + timedelta(days=math.floor(now_days))
    except OverflowError:
        return []
    return [_with_its_weekday(m, query_text) for m in resolve_times(query_text, today)
            if (m.end - m.start).days < params.date_max_span_days]


def _written(surface: str) -> str:
    """A pattern of ``surface`` as a text writes it: any case (with ``re.I``), any spaces, either
    apostrophe (``resolve_times`` reads straight quotes)."""
    return r"\s+".join(re.escape(w).replace("'", "['\u2018\u2019]") for w in surface.split())


def _with_its_weekday(m: TimeMention, query_text: str) -> TimeMention:
    """``m`` with the name of its day's weekday when the query writes it just before: "Friday
    November 20" is one date as written, and the node of that day holds all three words
    (``session_date_terms``), but the resolver's mention is "November 20" (the weekday only names
    the date's day)."""
    if m.start != m.end or not m.surface.strip():
        return m
    name = WEEKDAY_NAMES[m.start.weekday()]
    found = re.search(rf"\b(?:{name}|{name[:3]}\.?)[\s,]*(?:the\s+)?{_written(m.surface)}", query_text, re.I)
    return replace(m, surface=found.group()) if found else m


def _without_words_of(tokens: list[str], mentions: list[TimeMention], query_text: str = "") -> list[str]:
    """The query's tokens less the words of the named days as it writes them ("Friday November 20",
    ``_named_days``): a node's document holds its session date ("20 November 2026 Friday"), so those
    words met every node of the day and every 20th. Only the mentions' own words: "the 2026 budget
    on Friday" or "PostgreSQL 6 on Friday" keep "2026" and "6" though that Friday is 6 November 2026
    (they were left out with every word of the day's date). Given the query text, a word it also
    writes outside the mentions stays ("the 2026 budget on 6 November 2026")."""
    said = {t for m in mentions for t in tokenize(m.surface)}
    if said and query_text:
        rest, unfound = query_text, set()
        for m in mentions:
            rest, cuts = re.subn(_written(m.surface), " ", rest, flags=re.I) if m.surface.strip() else (rest, 0)
            if not cuts:  # not written so in the query (not expected): its words go, as before
                unfound.update(tokenize(m.surface))
        said = (said - set(tokenize(rest))) | unfound
    return [t for t in tokens if t not in said]


def _date_focus(index, mentions: list[TimeMention], seedable: np.ndarray, now_days: float = math.nan) -> np.ndarray:
    """Seedable nodes that happened on a day or in a week the query names (``_named_days``).

    A node's times are its ``occurred_at`` (UTC days) and the days its text refers to
    (``TenantIndex.day_refs``) up to the day it was written, each inside the named days. A day
    named without its year ("what did we decide on March 5?") is that day in every year: resolved
    against today it is the nearest March 5, which in December is next year's, and a question
    about memory asks about the past.

    Named days all still to come (after today, from ``now_days``) also take the days a text looks
    ahead to: "What is planned for December 15?" asked on December 2 can only be answered by what
    was said of the 15th before it, "the release is scheduled for December 15" (and the day's own
    words are out of the lexical query, so nothing else found it). A span holding today ("today",
    "this week") does not: a plan for today is not what happened today."""
    occ = index.col("occurred_at")
    inside = np.zeros(index.n, dtype=bool)
    all_node, all_first, all_last = index.day_refs()
    ref_node, ref_first, ref_last = all_node, all_first, all_last
    if ref_node.size:
        # Only days the text looks back on, up to the day it was written: "Yesterday I fixed the
        # retry bug" says what happened then, "decide the offsite menu by the 24th" written on the
        # 21st only what was expected, and it outranked what was decided on the 24th.
        with np.errstate(invalid="ignore"):  # no time of writing (NaN): no reference counts
            past = ref_last <= np.floor(occ[ref_node])
        ref_node, ref_first, ref_last = ref_node[past], ref_first[past], ref_last[past]
    today = math.floor(now_days) if math.isfinite(now_days) else math.inf
    with np.errstate(invalid="ignore"):  # NaN (no time) compares False
        for m in mentions:
            lo, hi = (m.start - _EPOCH).days, (m.end - _EPOCH).days + 1
            # Days all still to come take plans too; a span holding today or before it ("today",
            # "this week") only what was said of its days once they had come.
            node, first, last = (all_node, all_first, all_last) if lo > today else (ref_node, ref_first, ref_last)
            if m.yearless:
                md = m.start.month * 100 + m.start.day
                inside |= _month_day(occ) == md
                if node.size:
                    one_day = first == last
                    inside[node[one_day & (_month_day(first.astype(np.float64)) == md)]] = True
            else:
                inside |= (occ >= lo) & (occ < hi)
                # A text that speaks of days inside the named ones ("yesterday I fixed the retry
                # bug", written the day after): what it says happened then. Containment, not
                # overlap: "last week" does not put a text on every day of that week.
                if node.size:
                    inside[node[(first >= lo) & (last < hi)]] = True
    return inside & seedable


def _month_day(occ: np.ndarray) -> np.ndarray:
    """month * 100 + day of each UTC day count (-1 where there is no time, or none numpy can date)."""
    out = np.full(occ.shape, -1, dtype=np.int64)
    ok = np.isfinite(occ) & (occ >= _FIRST_DAY) & (occ < _PAST_LAST_DAY)
    days = np.floor(occ[ok]).astype(np.int64).astype("datetime64[D]")
    months = days.astype("datetime64[M]")
    out[ok] = ((months.astype(np.int64) % 12) + 1) * 100 + (days - months).astype(np.int64) + 1
    return out


def _date_list(index, in_dates, bm, qvec, n):
    """The nodes of the named dates, best first: reciprocal ranks of their turn BM25 score and of
    their cosine to the query (what the question asks about, among what happened then)."""
    ids = np.flatnonzero(in_dates).astype(np.int64)
    if ids.size == 0:
        return ids, np.empty(0)
    lex = np.full(ids.size, np.nan)  # no query term: no lexical rank (0 in the fusion)
    if bm.locals.size:
        pos = np.minimum(np.searchsorted(bm.locals, ids), bm.locals.size - 1)
        hit = bm.locals[pos] == ids
        lex[hit] = bm.scores[pos[hit]]
    fused = _rr(lex, 60, ids)
    if qvec is not None:
        fused = fused + _rr(index.vectors.cosine(ids, qvec), 60, ids, COSINE_TIE_ABS)
    order = np.lexsort((ids, -fused))[:n]
    return ids[order], fused[order]


def _speaker_match(index, cand, query_text, vis):
    """1 where the candidate's speaker is a person the query names (nicknames resolved)."""
    out = np.zeros(cand.size, dtype=np.float64)
    ids = _query_speakers(index, query_text, vis)
    if ids:
        out[np.isin(index.col("speaker_id")[cand], ids)] = 1.0
    return out


def _query_speakers(index, query_text, vis):
    """Speaker ids of the people the query names, nicknames resolved by prefix against the speakers
    of the caller's visible nodes only (hidden speakers neither match nor make a nickname ambiguous)."""
    ents = extract_entities(query_text or "") if index.speakers else []
    if not ents:
        return []
    seen = set(np.flatnonzero(np.bincount(index.col("speaker_id")[vis])).tolist())  # speaker ids are small
    known = [name for name, sid in index.speakers.items() if sid in seen]
    ids = {index.speakers.get(canonical_entity(e.lower(), known), 0) for e in ents}
    ids &= seen
    ids.discard(0)
    return sorted(ids)


def _entity_match(index, cand, query_text):
    """Fraction of the query's named entities each candidate's own document contains."""
    ents = [tokenize(e) for e in extract_entities(query_text or "")]
    ents = [set(e) for e in ents if e]
    out = np.zeros(cand.size, dtype=np.float64)
    if not ents:
        return out
    win = index.windows
    for i, c in enumerate(cand.tolist()):
        own = set(win.own_tokens(c))
        out[i] = sum(1 for e in ents if e <= own) / len(ents)
    return out


def _diversify(index, cand, final, order, k, params):
    """Greedy top-k: penalise candidates next to (or in the same session as) ones already taken."""
    sess = index.col("session_key")[cand]
    pool = order[: max(4 * k, 40)].tolist()
    nbrs = {i: set(index.windows.neighbours(np.asarray([cand[i]]))[0]) - {int(cand[i])} for i in pool}
    taken: list[int] = []
    taken_locs: set[int] = set()
    per_sess: dict[int, int] = {}
    rest = list(pool)
    while rest and len(taken) < k:
        # Seeded with the first left (in rank order): a NaN score (non-finite tension in blend mode)
        # never beats -inf, and with None here such a candidate crashed the query.
        best, best_v = rest[0], -np.inf
        for i in rest:
            v = final[i]
            if params.div_adj < 1.0 and nbrs[i] & taken_locs:
                v *= params.div_adj
            s = int(sess[i])
            if s and params.div_session < 1.0:
                v *= params.div_session ** per_sess.get(s, 0)
            if v > best_v:
                best, best_v = i, v
        rest.remove(best)
        taken.append(best)
        taken_locs.add(int(cand[best]))
        s = int(sess[best])
        per_sess[s] = per_sess.get(s, 0) + 1
    return np.asarray(taken + rest + order[len(pool):].tolist(), dtype=np.int64)


def _rank_final(index, cand, score, qvec, params, fused_all, vis):
    """Reciprocal-rank fusion of the seed channels (``_fused``: ids ascending, fused scores) with
    diffusion score and cosine ranks."""
    ids, fused = fused_all
    final = np.zeros(cand.size, dtype=np.float64)
    if ids.size:
        pos = np.minimum(np.searchsorted(ids, cand), ids.size - 1)
        hit = ids[pos] == cand
        final[hit] = fused[pos[hit]]
    rk = params.rrf_k
    if params.w_rank_act > 0:
        final += params.w_rank_act * _rr(score, rk, cand)
    cos = np.full(cand.size, np.nan)
    if qvec is not None:
        cos = index.vectors.cosine(cand, qvec)
        if params.w_rank_cos > 0:
            final += params.w_rank_cos * _rr(cos, rk, cand, COSINE_TIE_ABS)
        if params.w_rank_wcos > 0:
            wcos = window_cosine(index.windows, index.vectors, cand, qvec, vis)
            final += params.w_rank_wcos * _rr(wcos, rk, cand, COSINE_TIE_ABS)
    return final, cos


def _path(loc: int, parent_of: dict[int, int], node_id_col: np.ndarray) -> tuple[int, ...]:
    chain = [loc]
    p = parent_of[loc]
    while p >= 0:
        chain.append(p)
        p = parent_of[p]
    return tuple(int(node_id_col[x]) for x in reversed(chain))
