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

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ._arrays import sorted_unique
from .bm25 import BM25Index, BM25Query
from .ranking import COSINE_TIE_ABS, rank_order

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
        # The same windows as arrays, for vectorised reads: _nbr[local, j] is the node at
        # (session, seq + _offsets[j]) as _members resolves it (the slot's holder in _at), -1 if
        # none; _placed lists every node at a slot (facts share a seq with their leaves), so a
        # change of holder reaches each row that points at the slot.
        self._offsets = [d for d in range(-self.radius, self.radius + 1) if d != 0]
        self._nbr = np.full((16, len(self._offsets)), -1, dtype=np.int64)
        self._placed: dict[tuple[int, int], list[int]] = {}
        self._pending: set[int] | None = None  # windows to re-index when a deferred batch ends

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

    def _ensure_row(self, local_id: int) -> None:
        if local_id >= self._nbr.shape[0]:
            grown = np.full((max(local_id + 1, 2 * self._nbr.shape[0]), self._nbr.shape[1]), -1, dtype=np.int64)
            grown[: self._nbr.shape[0]] = self._nbr
            self._nbr = grown

    def reserve(self, n: int) -> None:
        """Room for ``n`` nodes' neighbour rows (see ``TenantIndex.reserve``)."""
        if n > self._nbr.shape[0]:
            grown = np.full((int(n), self._nbr.shape[1]), -1, dtype=np.int64)
            grown[: self._nbr.shape[0]] = self._nbr
            self._nbr = grown

    def _set_holder(self, slot: tuple[int, int], local_id: int | None) -> None:
        if local_id is None:
            self._at.pop(slot, None)
        else:
            self._at[slot] = local_id
        value = -1 if local_id is None else local_id
        key, seq = slot
        for j, d in enumerate(self._offsets):
            for other in self._placed.get((key, seq - d), ()):
                self._nbr[other, j] = value

    def _place(self, local_id: int, where: tuple[int, int]) -> None:
        self._ensure_row(local_id)
        key, seq = where
        if key == 0:
            self._nbr[local_id] = -1
            return
        for j, d in enumerate(self._offsets):
            self._nbr[local_id, j] = self._at.get((key, seq + d), -1)
        self._placed.setdefault(where, []).append(local_id)
        self._set_holder(where, local_id)

    def _leave(self, local_id: int, where: tuple[int, int]) -> None:
        self._ensure_row(local_id)
        self._nbr[local_id] = -1
        if where[0] == 0:
            return
        here = self._placed.get(where)
        if here is not None and local_id in here:
            here.remove(local_id)
            if not here:
                del self._placed[where]
        if self._at.get(where) == local_id:
            self._set_holder(where, None)

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
        if old is not None:
            self._leave(local_id, old)
        self._n_tokens += len(tokens) - len(self._tokens.get(local_id, ()))
        self._tokens[local_id] = list(tokens)
        where = (int(session_key), int(seq))
        self._where[local_id] = where
        self._place(local_id, where)
        affected |= set(self._members(local_id))
        if self._pending is not None:
            self._pending |= affected
            return
        for a in affected:
            if a in self._tokens:
                self._reindex(a)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Re-index each touched window once, when the batch ends, instead of after every write
        (a session loaded in order would otherwise index every window twice)."""
        if self._pending is not None:
            yield
            return
        self._pending = set()
        try:
            yield
        finally:
            pending, self._pending = self._pending, None
            for a in sorted(pending):
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
        self._leave(local_id, self._where.pop(local_id))
        self._n_tokens -= len(self._tokens.pop(local_id))
        self.bm25.remove(local_id)
        if self._pending is not None:
            self._pending.update(a for a in nbrs if a != local_id)
            return
        for a in nbrs:
            if a != local_id and a in self._tokens:
                self._reindex(a)

    def neighbours(self, local_ids: np.ndarray) -> list[list[int]]:
        return [self._members(int(x)) for x in np.asarray(local_ids, dtype=np.int64).tolist()]

    def member_matrix(self, local_ids: np.ndarray) -> np.ndarray:
        """``neighbours`` as an array: row i holds node i's window in seq order (the node itself in
        the middle column), -1 where a slot is empty."""
        ids = np.asarray(local_ids, dtype=np.int64).reshape(-1)
        r = self.radius
        out = np.full((ids.size, 2 * r + 1), -1, dtype=np.int64)
        out[:, r] = ids
        inside = ids < self._nbr.shape[0]
        rows = self._nbr[ids[inside]]
        out[inside, :r] = rows[:, :r]
        out[inside, r + 1 :] = rows[:, r:]
        return out

    def query(
        self, tokens: list[str], allowed: np.ndarray | None = None, weights: dict[str, float] | None = None
    ) -> BM25Query:
        return self.bm25.query(tokens, allowed, weights)

    def query_top(
        self,
        tokens: list[str],
        k: int,
        allowed: np.ndarray | None = None,
        mask: np.ndarray | None = None,
        weights: dict[str, float] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``query(tokens, allowed, weights).top(k, mask)``, see ``BM25Index.query_top``."""
        return self.bm25.query_top(tokens, k, allowed, mask, weights)

    def own_tokens(self, local_id: int) -> list[str]:
        return self._tokens.get(int(local_id), [])

    def nbytes(self) -> int:
        toks = 8 * self._n_tokens + 56 * len(self._tokens)
        return self.bm25.nbytes() + toks + 200 * len(self._where) + self._nbr.nbytes + 150 * len(self._placed)


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
    members = windows.member_matrix(ids)
    present = members >= 0
    flat = members[present]
    c = np.full(members.shape, np.nan)
    c[present] = vectors.cosine(flat, qvec)
    ok = ~np.isnan(c)
    ok[present] &= visible[flat]
    tot = np.where(ok, c, 0.0).sum(axis=1)
    cnt = ok.sum(axis=1).astype(np.float64)
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
    members = windows.member_matrix(top)
    cand = sorted_unique(members[members >= 0])
    cand = cand[seedable[cand]]
    wc = window_cosine(windows, vectors, cand, qvec, visible)
    wc = np.where(np.isnan(wc), -np.inf, wc)
    # Windows with the same members have the same mean, up to float32 noise: tied, by id.
    order = rank_order(wc, cand, abs_eps=COSINE_TIE_ABS)[:k]
    order = order[np.isfinite(wc[order])]
    return cand[order], wc[order]
