"""Dense, loop-heavy reference implementations used as test oracles.

They restate the algorithm straight from its definition with dense numpy
matrices so they share no code (and no clever indexing) with the engine.
"""

from __future__ import annotations

import math
from datetime import date, timedelta

import numpy as np

from memory.engine import NodeKind, ResonateParams, Scope, TenantIndex, tokenize
from memory.engine.ranking import COSINE_TIE_ABS, RANK_TIE_EPS
from memory.engine.router import is_time_question
from memory.engine.text import (
    WEEKDAY_NAMES,
    asks_only,
    canonical_entity,
    extract_entities,
    has_time_expression,
    resolve_times,
)


def ref_date_words(query_text: str, named: list) -> set[str]:
    """The tokens the query writes for the days it names: each mention as written, with the
    weekday of its day written just before a one-day mention ("Friday November 20"), less the
    tokens the query also writes outside them."""
    text = " ".join(query_text.replace("\u2019", "'").replace("\u2018", "'").lower().split())
    spans: list[str] = []
    said: set[str] = set()
    for m in named:
        surf = " ".join(m.surface.lower().split())
        if not surf or surf not in text:
            said |= set(tokenize(m.surface))
            continue
        span = surf
        if m.start == m.end:
            name = WEEKDAY_NAMES[m.start.weekday()].lower()
            at = text.find(surf)
            while at >= 0 and span == surf:
                before = text[:at]
                gap = before.rstrip(" ,")
                if gap.endswith(" the") or gap == "the":
                    gap = gap[:-3].rstrip(" ,")
                for w in (name, name[:3] + ".", name[:3]):
                    if gap.endswith(w) and (len(gap) == len(w) or not gap[-len(w) - 1].isalnum()):
                        span = text[len(gap) - len(w):at] + surf
                        break
                at = text.find(surf, at + 1)
        spans.append(span)
    rest = text
    for span in spans:
        said |= set(tokenize(span))
        rest = rest.replace(span, " ")
    return said - set(tokenize(rest)) | {t for m in named for t in tokenize(m.surface)
                                         if " ".join(m.surface.lower().split()) not in text}


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


def ref_bm25(
    docs: list[list[str]], query: list[str], vis: np.ndarray, k1=1.2, b=0.75, weights=None
) -> np.ndarray:
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
                scores[i] += (weights or {}).get(term, 1.0) * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(docs[i]) / avgdl))
    return scores


def ref_windows(index: TenantIndex, radius: int = 1) -> list[list[int]]:
    """Members of each node's context window: same session and visibility, |seq diff| <= radius."""
    n = index.n
    c = {k: index.col(k) for k in ("session_key", "owner_key", "team_id", "scope", "seq", "deleted")}
    out = []
    for i in range(n):
        if c["session_key"][i] == 0 or c["scope"][i] == Scope.RESTRICTED:
            out.append([i])
            continue
        key = tuple(c[k][i] for k in ("session_key", "owner_key", "team_id", "scope"))
        out.append(
            [
                j
                for j in range(n)
                if not c["deleted"][j]
                and tuple(c[k][j] for k in ("session_key", "owner_key", "team_id", "scope")) == key
                and abs(int(c["seq"][j]) - int(c["seq"][i])) <= radius
            ]
        )
    return out


def _tie_sorted(values: dict[int, float], abs_eps: float = 0.0) -> list[int]:
    """Keys by descending value, NaN dropped; near-ties (each within RANK_TIE_EPS of the previous
    value, relative, or abs_eps absolute) form one group, by id."""
    ok = sorted((i for i, v in values.items() if not math.isnan(v)), key=lambda i: (-values[i], i))
    ranked, group = [], []
    for i in ok:
        gap = values[group[-1]] - values[i] if group else 0.0
        if group and gap > max(RANK_TIE_EPS * max(abs(values[group[-1]]), abs(values[i])), abs_eps):
            ranked += sorted(group)
            group = []
        group.append(i)
    return ranked + sorted(group)


def _rank_recip(values: dict[int, float], k: int, abs_eps: float = 0.0) -> dict[int, float]:
    """1/(k + rank) by value (ties by id); NaN values get 0 and rank last."""
    ranked = _tie_sorted(values, abs_eps)
    out = {i: 0.0 for i in values}
    for r, i in enumerate(ranked, 1):
        out[i] = 1.0 / (k + r)
    return out


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
    if params.w_date > 0 and query_text and math.isfinite(now):
        # the days the query names are the date focus's, not words of the lexical query
        named = [m for m in resolve_times(query_text, date(1970, 1, 1) + timedelta(days=math.floor(now)))
                 if (m.end - m.start).days < params.date_max_span_days]
        said = ref_date_words(query_text, named)
        q = [t for t in q if t not in said]
    lex = ref_bm25(docs, q, vis)
    cand = [i for i in range(n) if seedable[i] and lex[i] > 0]
    lex_ids = sorted(cand, key=lambda i: (-lex[i], i))[: params.n_lex]
    windows = ref_windows(index)
    win_ids = []
    if params.n_win > 0:
        wdocs = [[t for j in windows[i] for t in docs[j]] + docs[i] * 2 for i in range(n)]  # centre x3
        wlex = ref_bm25(wdocs, q, vis)
        cand = [i for i in range(n) if seedable[i] and wlex[i] > 0]
        win_ids = sorted(cand, key=lambda i: (-wlex[i], i))[: params.n_win]
    vec_ids = []
    unit_q = None
    has = index.vectors.has_vector(np.arange(n))
    mat = index.vectors._mat[:n].astype(np.float64)
    wcos = {}
    if qvec is not None:
        unit_q = np.asarray(qvec, dtype=np.float64) / np.linalg.norm(qvec)
        sims = mat @ unit_q

        def window_cos(i: int) -> float:
            ms = [j for j in windows[i] if vis[j] and has[j]]
            return float(np.mean([sims[j] for j in ms])) if ms else math.nan

        wcos = {i: window_cos(i) for i in range(n)}
        cand = [i for i in range(n) if seedable[i] and has[i]]
        vec_ids = sorted(cand, key=lambda i: (-sims[i], i))[: params.n_vec]
        if params.n_wvec > 0:
            pool = sorted((i for i in range(n) if vis[i] and has[i]), key=lambda i: (-sims[i], i))[:max(100, params.n_vec)]
            wc = _tie_sorted({j: wcos[j] for i in pool for j in windows[i] if seedable[j]},
                             COSINE_TIE_ABS)[: params.n_wvec]
            if params.w_wvec_as == "vec":
                vec_ids = wc
            else:
                merged = []
                for r in range(max(len(win_ids), len(wc))):
                    for lst in (win_ids, wc):
                        if r < len(lst) and lst[r] not in merged:
                            merged.append(lst[r])
                win_ids = merged
    def rrf(channels):
        out = {}
        for ch, w in channels:
            for r, i in enumerate(ch, 1):
                out[i] = out.get(i, 0.0) + w / (params.rrf_k + r)
        return out

    channels = [(lex_ids, params.w_lex), (vec_ids, params.w_vec), (win_ids, params.w_win)]
    first = rrf(channels)
    top_fb = sorted(first, key=lambda i: (-first[i], i))[: params.prf_docs]
    if params.n_prf > 0 and params.w_prf > 0 and q and top_fb:
        # Lexical feedback: salient terms of the top seeds' windows, second window-BM25 pass.
        tf, support = {}, {}
        for t in top_fb:
            toks = [x for j in windows[t] for x in docs[j]]
            for x in toks:
                tf[x] = tf.get(x, 0.0) + 1.0 / len(toks)
            for x in set(toks):
                support[x] = support.get(x, 0) + 1
        wsets = [set(t for j in windows[i] for t in docs[j]) for i in range(n)]
        live = [i for i in range(n) if vis[i]]
        sal = {}
        for x in tf:
            if x in set(q) or support[x] < min(2, len(top_fb)):
                continue
            df = sum(1 for i in live if x in wsets[i])
            sal[x] = tf[x] * math.log(1 + (len(live) - df + 0.5) / (df + 0.5))
        chosen = [x for x in sorted(sal, key=lambda x: (-sal[x], x))[: params.prf_terms] if sal[x] > 0]
        if chosen:
            wdocs = [[t for j in windows[i] for t in docs[j]] + docs[i] * 2 for i in range(n)]
            plex = ref_bm25(wdocs, q + chosen, vis, weights=dict.fromkeys(chosen, params.prf_beta))
            cand = [i for i in range(n) if seedable[i] and plex[i] > 0]
            channels.append((sorted(cand, key=lambda i: (-plex[i], i))[: params.n_prf], params.w_prf))
    if params.w_vprf > 0 and unit_q is not None and top_fb:
        # Vector feedback (Rocchio): query + beta x mean unit vector of the top seeds' windows.
        ms = sorted({j for t in top_fb for j in windows[t] if vis[j] and has[j]})
        if ms:
            q2 = unit_q + params.vprf_beta * mat[ms].mean(axis=0)
            sims2 = mat @ (q2 / np.linalg.norm(q2))

            def window_cos2(i: int) -> float:
                m2 = [j for j in windows[i] if vis[j] and has[j]]
                return float(np.mean([sims2[j] for j in m2])) if m2 else math.nan

            # "pool": the windows of the first vector search's pool (by the query vector), else of
            # the nearest nodes to the feedback vector
            by, size = (sims, params.n_vec) if params.vprf_pool == "pool" else (sims2, params.n_wvec)
            pool = sorted((i for i in range(n) if vis[i] and has[i]), key=lambda i: (-by[i], i))[:max(100, size)]
            wc2 = {j: window_cos2(j) for i in pool for j in windows[i] if seedable[j]}
            wc2 = {j: v for j, v in wc2.items() if not math.isnan(v)}
            channels.append((_tie_sorted(wc2, COSINE_TIE_ABS)[: params.n_wvec], params.w_vprf))
    # Date focus: the seedable nodes that happened on the day(s)/week(s) the query names, or whose
    # text refers to days within them.
    in_dates: set[int] = set()
    named = False
    if params.w_date > 0 and query_text and math.isfinite(now):
        epoch = date(1970, 1, 1)
        occ = index.col("occurred_at")
        # The days each node's text refers to, as whole date ranges: those ending by the day it was
        # written (what it says happened, not what it expects), and all of them for days named that
        # are not over yet (what was planned for them).
        refs: dict[int, list[tuple[date, date]]] = {}
        refs_all: dict[int, list[tuple[date, date]]] = {}
        for i, first, last in zip(*(a.tolist() for a in index.day_refs()), strict=True):
            span = (epoch + timedelta(days=first), epoch + timedelta(days=last))
            refs_all.setdefault(i, []).append(span)
            if not math.isnan(occ[i]) and last <= math.floor(occ[i]):
                refs.setdefault(i, []).append(span)
        today = math.floor(now)
        for m in resolve_times(query_text, epoch + timedelta(days=math.floor(now))):
            if (m.end - m.start).days >= params.date_max_span_days:
                continue
            named = True
            lo, hi = (m.start - epoch).days, (m.end - epoch).days + 1
            said_of = refs_all if lo > today else refs  # days all to come take plans too
            for i in range(n):
                if not seedable[i]:
                    continue
                if m.yearless:  # that month and day in any year
                    days = [] if math.isnan(occ[i]) else [epoch + timedelta(days=math.floor(occ[i]))]
                    days += [a for a, b in said_of.get(i, []) if a == b]  # a reference to that one day
                    if any((d.month, d.day) == (m.start.month, m.start.day) for d in days):
                        in_dates.add(i)
                    continue
                said = said_of.get(i, [])
                if (not math.isnan(occ[i]) and lo <= occ[i] < hi) or any(m.start <= a and b <= m.end for a, b in said):
                    in_dates.add(i)
    if in_dates:
        ids = sorted(in_dates)
        score = _rank_recip({i: lex[i] if lex[i] > 0 else math.nan for i in ids}, 60)
        if unit_q is not None:
            cos_r = _rank_recip({i: float(mat[i] @ unit_q) if has[i] else math.nan for i in ids}, 60, COSINE_TIE_ABS)
            score = {i: score[i] + cos_r[i] for i in ids}
        channels.append((sorted(ids, key=lambda i: (-score[i], i))[: params.n_lex], params.w_date))
    fused = rrf(channels)
    if not fused:
        return []
    top = max(fused.values())
    seeds = sorted(fused, key=lambda i: (-fused[i], i))
    acts = [max(fused[i] / top, params.seed_floor) if top > 0 else 1.0 for i in seeds]
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
    if params.final == "rank" and scored:
        final = {i: fused.get(i, 0.0) for i in scored}
        parts = [(params.w_rank_act, dict(scored), 0.0)]
        if unit_q is not None:
            parts.append((params.w_rank_cos, {i: float(mat[i] @ unit_q) if has[i] else math.nan for i in scored},
                          COSINE_TIE_ABS))
            parts.append((params.w_rank_wcos, {i: wcos[i] for i in scored}, COSINE_TIE_ABS))
        if params.w_rank_sess > 0:
            # Session score: sum of the session's sess_top best turn-level BM25 scores.
            skey = index.col("session_key")
            per = {}
            for i in range(n):
                if vis[i] and lex[i] > 0:
                    per.setdefault(int(skey[i]), []).append(lex[i])
            # A node without a session is a session of its own.
            sess = {
                i: sum(sorted(per[int(skey[i])], reverse=True)[: params.sess_top])
                if skey[i] != 0 and int(skey[i]) in per
                else (lex[i] if skey[i] == 0 and vis[i] and lex[i] > 0 else math.nan)
                for i in scored
            }
            parts.append((params.w_rank_sess, sess, 0.0))
        for w, vals, abs_eps in parts:
            if w > 0:
                for i, r in _rank_recip(vals, params.rrf_k, abs_eps).items():
                    final[i] += w * r
        bonus = 1.0 / (params.rrf_k + 1)
        if params.w_own > 0 and qset:
            for i in final:
                final[i] += params.w_own * bonus * len(qset & set(docs[i])) / len(qset)
        if params.w_spk > 0 and index.speakers:
            names = {v: k for k, v in index.speakers.items()}
            spk = index.col("speaker_id")
            visible_names = [names[int(x)] for x in sorted(set(spk[vis].tolist())) if int(x) in names]
            wanted = {canonical_entity(e.lower(), visible_names) for e in extract_entities(query_text)}
            wanted &= set(visible_names)
            for i in final:
                if names.get(int(spk[i])) in wanted:
                    final[i] += params.w_spk * bonus
        if params.w_time > 0 and is_time_question(query_text):
            for i in final:
                if has_time_expression(index.texts[i]) and qset & set(docs[i]):
                    final[i] += params.w_time * bonus
        if named:
            for i in final:
                if i in in_dates:
                    final[i] += params.w_date * bonus
        if params.w_ask > 0:
            for i in final:
                if asks_only(index.texts[i]):
                    final[i] -= params.w_ask * bonus
        scored = final
    elif params.rerank and unit_q is not None:
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
