"""Dense, loop-heavy reference implementations used as test oracles.

They restate the algorithm straight from its definition with dense numpy
matrices so they share no code (and no clever indexing) with the engine.
"""

from __future__ import annotations

import math

import numpy as np

from memory.engine import NodeKind, ResonateParams, TenantIndex, tokenize


def dense_adjacency(index: TenantIndex) -> np.ndarray:
    n = index.n
    W = np.zeros((n, n), dtype=np.float64)
    src, dst, w, _ = index.graph.edges()
    W[src, dst] = w
    return W


def ref_diffuse(W, seeds, acts, allowed, depth, decay, combine, max_activated):
    """Returns {local: (activation, hop, parent)}."""
    n = W.shape[0]
    out = {int(s): (float(a), 0, -1) for s, a in zip(seeds, acts, strict=True)}
    visited = np.zeros(n, dtype=bool)
    visited[list(out)] = True
    frontier = np.asarray(seeds, dtype=np.int64)
    fa = np.asarray(acts, dtype=np.float64)
    for hop in range(1, depth + 1):
        if frontier.size == 0:
            break
        sub = W[frontier]  # (f, n)
        valid = (sub > 0) & allowed[None, :] & ~visited[None, :]
        contrib = fa[:, None] * sub * decay
        reached = np.flatnonzero(valid.any(axis=0))
        if reached.size == 0:
            break
        agg = {}
        parent = {}
        for j in reached.tolist():
            rows = np.flatnonzero(valid[:, j])
            c = contrib[rows, j]
            agg[j] = float(c.sum()) if combine == "sum" else float(c.max())
            best = c.max()
            parent[j] = int(min(frontier[rows[c == best]]))
        chosen = sorted(agg, key=lambda j: (-agg[j], j))[:max_activated]
        for j in chosen:
            out[j] = (agg[j], hop, parent[j])
            visited[j] = True
        frontier = np.asarray(sorted(chosen), dtype=np.int64)
        fa = np.asarray([agg[j] for j in frontier.tolist()], dtype=np.float64)
    return out


def ref_bm25(docs: list[list[str]], query: list[str], vis: np.ndarray, k1=1.2, b=0.75) -> np.ndarray:
    live = [i for i in range(len(docs)) if vis[i]]
    scores = np.zeros(len(docs))
    if not live:
        return scores
    avgdl = sum(len(docs[i]) for i in live) / len(live)
    for term in dict.fromkeys(query):
        df = sum(1 for i in live if term in docs[i])
        if df == 0:
            continue
        idf = math.log(1 + (len(live) - df + 0.5) / (df + 0.5))
        for i in live:
            tf = docs[i].count(term)
            if tf:
                scores[i] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(docs[i]) / avgdl))
    return scores


def ref_resonate(index: TenantIndex, query_text: str, qvec, allowed, params: ResonateParams, now):
    """Returns [(node_id, final_score)] best first."""
    n = index.n
    kind = index.col("kind")
    vis = allowed[:n] & ~index.col("deleted")
    t0, lam = index.col("t0"), index.col("lam")
    last, ment = index.col("last_updated"), index.col("mentions")
    ten_all = np.array(
        [t0[i] * math.exp(-lam[i] * max(0.0, now - last[i])) * (1 + 0.1 * min(ment[i], 10)) for i in range(n)]
    )
    seedable = vis & (kind != NodeKind.BRIDGE) & (ten_all >= params.tension_threshold)
    docs = [tokenize(t) for t in index.texts]
    q = tokenize(query_text)
    lex = ref_bm25(docs, q, vis)
    cand = [i for i in range(n) if seedable[i] and lex[i] > 0]
    lex_ids = sorted(cand, key=lambda i: (-lex[i], i))[: params.n_lex]
    vec_ids = []
    unit_q = None
    has = index.vectors.has_vector(np.arange(n))
    mat = index.vectors._mat[:n].astype(np.float64)
    if qvec is not None:
        unit_q = np.asarray(qvec, dtype=np.float64) / np.linalg.norm(qvec)
        sims = mat @ unit_q
        cand = [i for i in range(n) if seedable[i] and has[i]]
        vec_ids = sorted(cand, key=lambda i: (-sims[i], i))[: params.n_vec]
    fused = {}
    for ch in (lex_ids, vec_ids):
        for r, i in enumerate(ch, 1):
            fused[i] = fused.get(i, 0.0) + 1.0 / (params.rrf_k + r)
    if not fused:
        return []
    top = max(fused.values())
    seeds = sorted(fused, key=lambda i: (-fused[i], i))
    acts = [max(fused[i] / top, params.seed_floor) for i in seeds]
    W = dense_adjacency(index)
    act = ref_diffuse(
        W, seeds, acts, vis, params.depth, params.hop_decay, params.combine, params.max_activated
    )
    qset = set(q)
    scored = {}
    for i, (a, _, _) in act.items():
        if kind[i] == NodeKind.BRIDGE:
            continue
        frac = len(qset & set(docs[i])) / len(qset) if qset else 0.0
        scored[i] = a * ten_all[i] * (1 + params.w_ctx * frac)
    if params.rerank and unit_q is not None:
        mx = max(scored.values())
        for i in list(scored):
            base = scored[i] / mx
            if has[i]:
                scored[i] = (1 - params.w_rerank) * base + params.w_rerank * float(mat[i] @ unit_q)
            else:
                scored[i] = base
    best = sorted(scored, key=lambda i: (-scored[i], i))[: params.k]
    nid = index.col("node_id")
    return [(int(nid[i]), scored[i]) for i in best]
