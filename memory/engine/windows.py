"""Context windows: a second lexical channel over each node's conversational neighbourhood.

A turn rarely carries every word of the question that it answers ("Yes, the one at the lake!"
answers "Where did Melanie go camping?" only together with the turn before it). The window
document of a node is its own tokens plus the tokens of the ``radius`` nodes either side of it in
the same session (by ``seq``); its own tokens count ``center_weight`` times, so of the windows
sharing the matching words the one centred on the turn that says them ranks first. Nodes without
a session (session_key 0) are windows of one.

Maintained incrementally: writing a node re-indexes the windows it belongs to; deleting one drops
it from its neighbours' windows. Corpus statistics stay per query over the allowed set (see
``BM25Index.query``). The caller passes a key that joins only nodes of one session *and* one
visibility (``TenantIndex`` does), so a window never carries a hidden neighbour's words.
"""

from __future__ import annotations

import numpy as np

from .bm25 import BM25Index, BM25Query

__all__ = ["ContextWindows", "window_cosine", "window_vector_top"]


class ContextWindows:
    def __init__(self, radius: int = 1, *, center_weight: int = 3, k1: float = 1.2, b: float = 0.75) -> None:
        self.radius = int(radius)
        self.center_weight = max(1, int(center_weight))
        self.bm25 = BM25Index(k1=k1, b=b)
        self._tokens: dict[int, list[str]] = {}
        self._where: dict[int, tuple[int, int]] = {}  # local -> (session_key, seq)
        self._at: dict[tuple[int, int], int] = {}  # (session_key, seq) -> local
        self._n_tokens = 0  # sum of len(t) over self._tokens, kept for an O(1) nbytes

    def __contains__(self, local_id: int) -> bool:
        return int(local_id) in self._tokens

    def _members(self, local_id: int) -> list[int]:
        where = self._where.get(local_id)
        if where is None or where[0] == 0:
            return [local_id]
        key, seq = where
        out = []
        for s in range(seq - self.radius, seq + self.radius + 1):
            loc = local_id if s == seq else self._at.get((key, s))
            if loc is not None:
                out.append(loc)
        return out

    def _reindex(self, local_id: int) -> None:
        toks: list[str] = []
        for m in self._members(local_id):
            toks.extend(self._tokens.get(m, ()))
        for _ in range(self.center_weight - 1):
            toks.extend(self._tokens.get(local_id, ()))
        self.bm25.add(local_id, toks)

    def update(self, local_id: int, session_key: int, seq: int, tokens: list[str]) -> None:
        local_id = int(local_id)
        old = self._where.get(local_id)
        affected = set(self._members(local_id)) if old is not None else set()
        if old is not None and self._at.get(old) == local_id:
            del self._at[old]
        self._n_tokens += len(tokens) - len(self._tokens.get(local_id, ()))
        self._tokens[local_id] = list(tokens)
        where = (int(session_key), int(seq))
        self._where[local_id] = where
        if where[0] != 0:
            self._at[where] = local_id
        affected |= set(self._members(local_id))
        for a in affected:
            if a in self._tokens:
                self._reindex(a)

    def placed(self, local_id: int, session_key: int, seq: int) -> bool:
        """Whether the node already sits at this (session, seq)."""
        return self._where.get(int(local_id)) == (int(session_key), int(seq))

    def remove(self, local_id: int) -> None:
        local_id = int(local_id)
        if local_id not in self._tokens:
            return
        nbrs = self._members(local_id)
        where = self._where.pop(local_id)
        if self._at.get(where) == local_id:
            del self._at[where]
        self._n_tokens -= len(self._tokens.pop(local_id))
        self.bm25.remove(local_id)
        for a in nbrs:
            if a != local_id and a in self._tokens:
                self._reindex(a)

    def neighbours(self, local_ids: np.ndarray) -> list[list[int]]:
        return [self._members(int(x)) for x in np.asarray(local_ids, dtype=np.int64).tolist()]

    def query(
        self, tokens: list[str], allowed: np.ndarray | None = None, weights: dict[str, float] | None = None
    ) -> BM25Query:
        return self.bm25.query(tokens, allowed, weights)

    def own_tokens(self, local_id: int) -> list[str]:
        return self._tokens.get(int(local_id), [])

    def nbytes(self) -> int:
        toks = 8 * self._n_tokens + 56 * len(self._tokens)
        return self.bm25.nbytes() + toks + 200 * len(self._where)


def window_cosine(
    windows: ContextWindows, vectors, ids: np.ndarray, qvec: np.ndarray, visible: np.ndarray
) -> np.ndarray:
    """Mean cosine with ``qvec`` over each node's visible context window (members with a vector).

    Equals the cosine of the window's mean unit vector up to that vector's norm, so it needs no
    second embedding. NaN where no member has a vector.
    """
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        return np.empty(0, dtype=np.float64)
    members = windows.neighbours(ids)
    lens = np.fromiter((len(m) for m in members), np.int64, len(members))
    flat = np.fromiter((x for m in members for x in m), np.int64, int(lens.sum()))
    c = vectors.cosine(flat, qvec)
    ok = ~np.isnan(c) & visible[flat]
    starts = np.cumsum(lens) - lens
    tot = np.add.reduceat(np.where(ok, c, 0.0), starts)
    cnt = np.add.reduceat(ok.astype(np.float64), starts)
    out = np.full(ids.size, np.nan)
    has = cnt > 0
    out[has] = tot[has] / cnt[has]
    return out


def window_vector_top(
    windows: ContextWindows,
    vectors,
    qvec: np.ndarray,
    k: int,
    visible: np.ndarray,
    seedable: np.ndarray,
    *,
    pool: int = 100,
    top: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k seedable nodes by window cosine.

    Candidates are the ``pool`` best single nodes by cosine and their window neighbours (a window
    scores high only if some member does), so the cost is one vector search plus ~3*pool dot
    products whatever the tenant size. ``top``: that search's result, when the caller has it.
    """
    if k <= 0:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    if top is None:
        top, _ = vectors.search(qvec, max(pool, k), visible)
    if top.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    cand = np.unique(np.fromiter((x for m in windows.neighbours(top) for x in m), np.int64))
    cand = cand[seedable[cand]]
    wc = window_cosine(windows, vectors, cand, qvec, visible)
    wc = np.where(np.isnan(wc), -np.inf, wc)
    order = np.lexsort((cand, -wc))[:k]
    order = order[np.isfinite(wc[order])]
    return cand[order], wc[order]
