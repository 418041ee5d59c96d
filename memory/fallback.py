"""Resonate straight from Postgres, for when the org's engine cache is cold or over budget.

Same contract as the engine (fused lexical + vector seeds among visible nodes, diffusion along
edges that never enters a hidden node, activation × tension × context match, cosine rerank,
explanations), built from the GIN full-text index, the pgvector HNSW index and the edge table.
Slower, and diffusion is capped at one hop: enough to answer while the cache builds.
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np
from django.db import connection
from django.db.models import BooleanField, F, FloatField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Left
from pgvector.django import CosineDistance

from . import nearest
from .engine.tension import tension as tension_fn
from .engine.tokenize import is_cjk_token, tokenize
from .engine.types import Explanation, Hit, ResonateParams, ResonateResult, Seed
from .models import Edge, Node, NodeKind

KIND_CODE = {"leaf": 0, "fact": 1, "bridge": 2, "persona": 3, "scene": 4}


def _vector_seeds(rows, query_vec: np.ndarray, n: int) -> list[tuple[int, float]]:
    """The ``n`` visible rows nearest the query: the HNSW scan (filters applied after it, iterative
    so the org's rows are reached past other tenants'), merged with an exact ranking of the most
    recent ``nearest.RECENT_WINDOW`` visible rows, which no crowding or unreachable graph element can hide
    (see memory/nearest.py)."""
    best: dict[int, float] = {}
    for i, d in (rows.annotate(d=CosineDistance("embedding", query_vec.tolist())).order_by("d")
                 .values_list("id", "d")[:n]):
        best[i] = float(d)
    recent_sql, recent_params = rows.order_by("-id").values("id", "embedding")[: nearest.RECENT_WINDOW].query.sql_with_params()
    vec = nearest.vector_literal(np.asarray(query_vec).ravel())
    with connection.cursor() as cur:
        cur.execute(f"SELECT r.id, r.embedding <=> %s::vector AS d FROM ({recent_sql}) r ORDER BY d, r.id LIMIT %s",
                    [vec, *recent_params, n])
        for i, d in cur.fetchall():
            best[i] = min(float(d), best.get(i, float(d)))
    return [(i, 1.0 - d) for i, d in sorted(best.items(), key=lambda kv: (kv[1], kv[0]))[:n]]


# Both CJK channels cost rows x terms (the prefix terms in the tsquery as much as the substring
# scan: a 4,000-character query's ~4,000 prefix terms took a Postgres backend 40 s over 5,000 rows),
# so a long CJK query keeps its first distinct bigrams, enough to find its rows.
_MAX_CJK_TERMS = 64
# ... and the scan x characters per row: only the head of each recent row is searched (the whole of
# a chat turn; a long document's head), else 2,000 rows of 20,000 characters cost seconds per query.
_SCAN_CHARS = 1_000


def _tsquery_terms(tokens: list[str]) -> str:
    """OR of the query's terms for ``to_tsquery('english', …)``; websearch syntax would AND them
    and starve recall. The stored ``search`` column comes from Postgres's 'english' parser, which
    keeps a CJK clause without spaces as one lexeme ("我昨天在北京见了李雷"), so a CJK bigram is
    matched as a lexeme prefix (a clause or Korean word starting with it); the recent-window
    substring scan below finds it anywhere else."""
    return " | ".join(f"{t}:*" if is_cjk_token(t) else t for t in sorted(set(tokens)))


def _cjk_substring_seeds(rows, terms: list[str], n: int) -> list[tuple[int, float]]:
    """The ``n`` rows among the most recent ``nearest.RECENT_WINDOW`` visible ones whose text holds
    the most of the query's CJK bigrams (ties: newest first). Bounded like the vector channel's
    exact window, and to the first ``_SCAN_CHARS`` of each text; beyond them only the prefix match
    above (and the vector channel) reach CJK text."""
    # The head is cut once per row in the subquery, not once per (row, term) pair.
    recent = rows.order_by("-id").annotate(head=Left("text", _SCAN_CHARS)).values("id", "head")
    recent_sql, recent_params = recent[: nearest.RECENT_WINDOW].query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute(f"SELECT r.id, count(*) AS c FROM ({recent_sql}) r "
                    "JOIN unnest(%s::text[]) AS q(w) ON strpos(r.head, q.w) > 0 "
                    "GROUP BY r.id ORDER BY c DESC, r.id DESC LIMIT %s",
                    [*recent_params, terms, n])
        return [(i, float(c)) for i, c in cur.fetchall()]


def _rrf(rankings: list[list[tuple[int, float]]], k: int) -> dict[int, float]:
    """Reciprocal-rank fusion of ``(id, score)`` rankings (each best first): id -> sum of 1/(k + rank)."""
    score: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for r, (nid, _) in enumerate(ranking, 1):
            score[nid] += 1.0 / (k + r)
    return score


def _fuse_lexical(lists: list[list[tuple[int, float]]], k: int, n: int) -> list[tuple[int, float]]:
    """One lexical ranking from several (reciprocal rank), so the explanation keeps one lexical rank."""
    return sorted(_rrf(lists, k).items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def resonate_sql(visible, *, query: str, query_vec: np.ndarray | None, params: ResonateParams,
                 now_days: float) -> ResonateResult:
    t0 = time.perf_counter()
    seedable = visible.exclude(kind=NodeKind.BRIDGE)
    tokens = tokenize(query)
    cjk = [t for t in dict.fromkeys(tokens) if is_cjk_token(t)][:_MAX_CJK_TERMS]
    words = _tsquery_terms([t for t in tokens if not is_cjk_token(t)] + cjk)
    lex: list[tuple[int, float]] = []
    if words:
        tsq = "to_tsquery('english', %s)"
        lex = list(
            seedable.annotate(
                m=RawSQL(f"search @@ {tsq}", (words,), output_field=BooleanField()),
                rank=RawSQL(f"ts_rank_cd(search, {tsq})", (words,), output_field=FloatField()),
            ).filter(m=True).order_by("-rank", "id").values_list("id", "rank")[: params.n_lex]
        )
    if cjk and params.n_lex > 0:
        lex = _fuse_lexical([lex, _cjk_substring_seeds(seedable, cjk, params.n_lex)], params.rrf_k, params.n_lex)
    vec: list[tuple[int, float]] = []
    if query_vec is not None and params.n_vec > 0:
        vec = _vector_seeds(seedable.filter(embedding__isnull=False), query_vec, params.n_vec)

    fused = _rrf([lex, vec], params.rrf_k)
    lex_rank = {nid: r for r, (nid, _) in enumerate(lex, 1)}
    vec_rank = {nid: r for r, (nid, _) in enumerate(vec, 1)}
    top = max(fused.values(), default=1.0)
    activation = {nid: s / top for nid, s in fused.items()}
    path = {nid: (nid,) for nid in activation}
    seeds = tuple(Seed(nid, -1, a, lex_rank.get(nid), vec_rank.get(nid)) for nid, a in
                  sorted(activation.items(), key=lambda kv: -kv[1]))

    hops = 0
    if params.depth > 0 and activation:
        hops = 1
        seed_ids = list(activation)
        visible_ids = visible.values("id")
        out_e = Edge.objects.filter(src_id__in=seed_ids, dst_id__in=visible_ids).values_list("src_id", "dst_id",
                                                                                          "weight")
        in_e = Edge.objects.filter(dst_id__in=seed_ids, src_id__in=visible_ids).values_list("dst_id", "src_id",
                                                                                         "weight")
        spread: dict[int, tuple[float, int]] = {}
        for s, d, w in list(out_e[:5000]) + list(in_e[:5000]):
            if d in activation:
                continue
            a = activation[s] * w * params.hop_decay
            if d not in spread or a > spread[d][0]:
                spread[d] = (a, s) if params.combine == "max" or d not in spread else (spread[d][0] + a, s)
        for d, (a, s) in sorted(spread.items(), key=lambda kv: -kv[1][0])[: params.max_activated]:
            activation[d] = a
            path[d] = (s, d)

    cand = list(activation)
    rows = {r["id"]: r for r in Node.objects.filter(id__in=cand).annotate(
        cos=CosineDistance("embedding", query_vec.tolist()) if query_vec is not None else F("confidence"),
    ).values("id", "text", "kind", "t0", "lam", "tension_updated_at", "mentions", "cos")}
    qtok = set(tokens)
    scored = []
    for nid in cand:
        r = rows.get(nid)
        if r is None or r["kind"] == NodeKind.BRIDGE:
            continue
        ten = float(tension_fn(np.array([r["t0"]]), np.array([r["lam"]]),
                               np.array([r["tension_updated_at"].timestamp() / 86400.0]),
                               np.array([r["mentions"]]), now_days)[0])
        match = len(qtok & set(tokenize(r["text"]))) / len(qtok) if qtok else 0.0
        ctx = 1.0 + params.w_ctx * match
        score = activation[nid] * ten * ctx
        cos = (1.0 - float(r["cos"])) if query_vec is not None and r["cos"] is not None else None
        scored.append((nid, r, score, ten, ctx, cos))
    best = max((s for _, _, s, _, _, _ in scored), default=1.0) or 1.0
    hits = []
    for nid, r, score, ten, ctx, cos in scored:
        final = score / best
        if params.rerank and cos is not None:
            final = (1 - params.w_rerank) * final + params.w_rerank * cos
        hits.append((final, nid, r, score, ten, ctx, cos))
    hits.sort(key=lambda h: (-h[0], h[1]))
    out, chars, dropped = [], 0, 0
    for final, nid, r, _score, ten, ctx, cos in hits[: min(params.k, 100)]:
        text = r["text"]
        if chars + len(text) > params.max_chars:
            room = params.max_chars - chars
            if room <= 0:
                dropped += 1
                continue
            text = text[:room] + params.truncation_marker
        chars += len(text)
        ex = Explanation(channels={"lexical": lex_rank.get(nid), "vector": vec_rank.get(nid), "date": None},
                         seed=nid in fused, path=path[nid], hops=len(path[nid]) - 1,
                         parts={"activation": activation[nid], "tension": ten, "context_match": ctx,
                                "cosine": cos, "final": final})
        out.append(Hit(nid, -1, final, text, KIND_CODE[r["kind"]], ex))
    return ResonateResult(hits=tuple(out), seeds=seeds, depth=params.depth, activated_count=len(activation),
                          elapsed_ms=(time.perf_counter() - t0) * 1000, truncated=False,
                          dropped_for_chars=dropped, hops_done=hops, notes=("served by postgres",))
