"""Incremental Okapi BM25 over integer local ids.

Design notes:
* Postings live in per-term ``array.array`` buffers: append is O(1) and the
  search side reads them through ``np.frombuffer`` without copying.
* Documents are stored in *slots*; a local id points at its current slot.
  Updating a document tombstones the old slot and appends a new one, so
  postings never need in-place surgery and never hold duplicates.
* Corpus statistics (N, df, avgdl) are computed per query over the allowed
  set only. That costs one masked pass over the touched postings, and buys a
  hard guarantee: hidden documents cannot shift a visible document's score
  (no statistical side channel across tenants/scopes).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ._arrays import GrowArray, sorted_unique
from .ranking import kth_largest

__all__ = ["BM25Index", "BM25Query"]

_EMPTY_I = np.empty(0, dtype=np.int64)
_EMPTY_F = np.empty(0, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class BM25Query:
    """Scores of every allowed document touched by one query.

    ``locals`` is sorted ascending so other stages can look nodes up with
    ``searchsorted`` instead of building dicts.
    """

    locals: np.ndarray  # int64, sorted
    scores: np.ndarray  # float64
    matches: np.ndarray  # int32: distinct query terms present in the doc
    n_terms: int  # distinct query terms (denominator for match fraction)

    def top(self, k: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (local ids, scores); ties broken by ascending local id."""
        loc, sc = self.locals, self.scores
        if mask is not None and loc.size:
            keep = _mask_at(mask, loc)
            loc, sc = loc[keep], sc[keep]
        return _topk(loc, sc, k)

    def match_fraction(self, local_ids: np.ndarray) -> np.ndarray:
        """Fraction of distinct query terms each given document contains."""
        local_ids = np.asarray(local_ids, dtype=np.int64)
        out = np.zeros(local_ids.shape[0], dtype=np.float64)
        if self.n_terms == 0 or self.locals.size == 0 or local_ids.size == 0:
            return out
        pos = np.searchsorted(self.locals, local_ids)
        pos_c = np.minimum(pos, self.locals.size - 1)
        hit = self.locals[pos_c] == local_ids
        out[hit] = self.matches[pos_c[hit]] / self.n_terms
        return out


@dataclass(slots=True)
class _MaskStats:
    """Corpus statistics of one index version under one mask (see ``BM25Index._stats``)."""

    version: int
    mask: np.ndarray | None  # a copy of the caller's mask
    vis: np.ndarray  # per slot: live and allowed
    n_docs: int
    norm: np.ndarray  # per slot BM25 length normalisation
    df: dict[int, int]  # term id -> document frequency under the mask
    norm_base: float  # norm = norm_base + norm_per_token * document length
    norm_per_token: float
    last: tuple | None = None  # the previous query's ((tid, weight)...), scores, counts, any_hit
    ok: tuple[np.ndarray | None, np.ndarray] | None = None  # (a top-k mask, vis & that mask per slot)

    def nbytes(self) -> int:
        arrays = [self.vis, self.norm] + ([self.mask] if self.mask is not None else [])
        if self.last is not None:
            arrays += [self.last[1], self.last[2]]
        if self.ok is not None:
            arrays += [a for a in self.ok if a is not None]
        return sum(a.nbytes for a in arrays) + 100 * len(self.df)


def _same_mask(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.shape == b.shape and bool(np.array_equal(a, b))


def _mask_at(mask: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """mask[ids] where ids beyond the mask length read as False."""
    if ids.size and int(ids.max()) >= mask.shape[0]:
        out = np.zeros(ids.shape[0], dtype=bool)
        inside = ids < mask.shape[0]
        out[inside] = mask[ids[inside]]
        return out
    return mask[ids]


def _topk(ids: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    if k <= 0 or ids.size == 0:
        return _EMPTY_I, _EMPTY_F
    if ids.size > k:
        # The k-th largest first so the exact sort below only sees ~k rows; the
        # boundary value is re-included in full so tie-breaks stay by id.
        cut = kth_largest(scores, k)
        cand = np.flatnonzero(scores >= cut)
        ids, scores = ids[cand], scores[cand]
    order = np.lexsort((ids, -scores))[:k]
    return ids[order], scores[order]


def _append(lists: list[array], tid: int, value: int) -> None:
    try:
        lists[tid].append(value)
    except BufferError:
        # A numpy view from a query is still alive (e.g. pinned by a stored
        # traceback); swap in a copy instead of failing the write.
        lists[tid] = array(lists[tid].typecode, lists[tid])
        lists[tid].append(value)


class BM25Index:
    """Okapi BM25 with IDF = log(1 + (N - df + 0.5) / (df + 0.5))."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = float(k1)
        self.b = float(b)
        self._vocab: dict[str, int] = {}
        self._post_slots: list[array] = []  # 'i' int32 slot ids, ascending
        self._post_tf: list[array] = []  # 'H' uint16 term frequencies
        self._slot_len = GrowArray(np.int32)
        self._slot_local = GrowArray(np.int64)
        self._slot_live = GrowArray(np.bool_, fill=False)
        self._local_slot: dict[int, int] = {}
        self._n_postings = 0
        self._version = 0  # bumped by every write: cached per-mask statistics are only for one version
        self._cached: _MaskStats | None = None
        # term id -> (postings seen, their largest tf, their shortest document): the bound of a
        # term's contribution that lets a top-k query skip most postings of frequent terms. Postings
        # only grow between compactions, so a bound is brought up to date from its list's new tail.
        self._bounds: dict[int, tuple[int, int, int]] = {}
        self.terms_pruned = 0  # terms top-k queries left unsummed over their postings, in all (a diagnostic)

    # -- writes -------------------------------------------------------------
    def add(self, local_id: int, tokens: list[str]) -> None:
        """Index ``tokens`` for ``local_id``, replacing any previous text."""
        local_id = int(local_id)
        self.remove(local_id)
        self._version += 1
        slot = len(self._slot_len)
        counts = Counter(tokens)  # insertion-ordered, like the dict it replaces, and counted in C
        vocab, post_slots, post_tf = self._vocab, self._post_slots, self._post_tf
        for term, tf in counts.items():
            tid = vocab.get(term)
            if tid is None:
                tid = len(post_slots)
                vocab[term] = tid
                post_slots.append(array("i"))
                post_tf.append(array("H"))
            try:  # the common case inline; _append handles a list pinned by a live numpy view
                post_slots[tid].append(slot)
            except BufferError:
                _append(post_slots, tid, slot)
            try:
                post_tf[tid].append(tf if tf < 65535 else 65535)
            except BufferError:
                _append(post_tf, tid, min(tf, 65535))
        self._n_postings += len(counts)
        self._slot_len.append(len(tokens))
        self._slot_local.append(local_id)
        self._slot_live.append(True)
        self._local_slot[local_id] = slot

    def remove(self, local_id: int) -> None:
        slot = self._local_slot.pop(int(local_id), None)
        if slot is not None:
            self._slot_live.view[slot] = False
            self._version += 1

    def __contains__(self, local_id: int) -> bool:
        return int(local_id) in self._local_slot

    def dead_fraction(self) -> float:
        n = len(self._slot_len)
        return 1.0 - len(self._local_slot) / n if n else 0.0

    def compact(self) -> None:
        """Rewrite the postings without dead slots (replaced or removed documents); live slots
        are renumbered in order, so scores and tie-breaks are unchanged."""
        live = self._slot_live.view.copy()
        if live.all():
            return
        self._version += 1
        self._cached = None
        self._bounds = {}
        new_slot = (np.cumsum(live) - 1).astype(np.int32)
        n_post = 0
        for tid in range(len(self._post_slots)):
            slots = np.frombuffer(self._post_slots[tid], dtype=np.int32)
            keep = live[slots]
            tf = np.frombuffer(self._post_tf[tid], dtype=np.uint16)[keep]
            slots = new_slot[slots[keep]]
            self._post_slots[tid] = array("i", slots.tobytes())
            self._post_tf[tid] = array("H", tf.tobytes())
            n_post += int(slots.size)
        self._n_postings = n_post
        lens, locs = self._slot_len.view[live], self._slot_local.view[live]
        self._slot_len = GrowArray(np.int32, capacity=max(lens.size, 16))
        self._slot_len.extend(lens)
        self._slot_local = GrowArray(np.int64, capacity=max(locs.size, 16))
        self._slot_local.extend(locs)
        self._slot_live = GrowArray(np.bool_, capacity=max(locs.size, 16), fill=False)
        self._slot_live.extend(np.ones(locs.size, dtype=bool))
        self._local_slot = dict(zip(locs.tolist(), range(locs.size), strict=True))

    @property
    def n_docs(self) -> int:
        return len(self._local_slot)

    def nbytes(self) -> int:
        # Every posting ever appended stays in its lists (an int32 slot + a uint16 tf), so the
        # posting bytes are a running count, and this is O(1) (the cache sizes indexes per sync).
        post = 6 * self._n_postings
        # ~64 B per array object and ~100 B per vocab/dict entry (CPython).
        overhead = 2 * 64 * len(self._post_slots) + 100 * len(self._vocab)
        overhead += 100 * len(self._local_slot) + 100 * len(self._bounds)
        cols = self._slot_len.nbytes + self._slot_local.nbytes + self._slot_live.nbytes
        return post + overhead + cols + (self._cached.nbytes() if self._cached is not None else 0)

    # -- reads --------------------------------------------------------------
    def _stats(self, allowed: np.ndarray | None) -> _MaskStats:
        """Per-mask corpus statistics, kept while the mask and the index stay the same.

        One resonate reads the lexical indexes several times under one mask (the window pass, the
        feedback pass, document frequencies), and a caller's next query usually brings the same
        mask again; the statistics are still computed over that mask only.
        """
        mask = None if allowed is None else np.asarray(allowed, dtype=bool)
        cached = self._cached
        if cached is not None and cached.version == self._version and _same_mask(cached.mask, mask):
            return cached
        vis = self._slot_live.view
        if mask is not None:
            vis = vis & _mask_at(mask, self._slot_local.view)
        n_docs = int(np.count_nonzero(vis))
        dl_all = self._slot_len.view
        avgdl = float(dl_all[vis].sum(dtype=np.int64)) / n_docs if n_docs else 0.0
        # Per-slot length normalisation: each posting then needs a single gather.
        base, per_token = self.k1 * (1.0 - self.b), self.k1 * self.b / max(avgdl, 1e-9)
        norm = base + per_token * dl_all
        stats = _MaskStats(self._version, None if mask is None else mask.copy(), vis, n_docs, norm, {}, base, per_token)
        self._cached = stats
        return stats

    def _df(self, stats: _MaskStats, tid: int) -> int:
        df = stats.df.get(tid)
        if df is None:
            df = stats.df[tid] = int(np.count_nonzero(stats.vis[np.frombuffer(self._post_slots[tid], dtype=np.int32)]))
        return df

    def query(
        self, tokens: list[str], allowed: np.ndarray | None = None, weights: dict[str, float] | None = None
    ) -> BM25Query:
        """Score every allowed live document that contains a query term.

        ``weights``: optional per-term multiplier of the term's contribution (default 1).
        """
        n_terms, acc = self._accumulate(tokens, allowed, weights)
        if acc is None:
            return BM25Query(_EMPTY_I, _EMPTY_F, np.empty(0, np.int32), n_terms)
        slots_u, stats, scores, counts = acc
        scores = scores[slots_u]
        matches = counts[slots_u].astype(np.int32)
        locs = self._slot_local.view[slots_u]
        order = np.argsort(locs, kind="stable")
        return BM25Query(locs[order], scores[order], matches[order], n_terms)

    def query_top(
        self,
        tokens: list[str],
        k: int,
        allowed: np.ndarray | None = None,
        mask: np.ndarray | None = None,
        weights: dict[str, float] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``query(tokens, allowed, weights).top(k, mask)``, the same ids and the same scores bit for
        bit, without scoring every document a frequent term touches (MaxScore pruning).

        Terms are summed strongest bound first until the documents touched so far hold k whose
        partial scores already exceed what all the remaining terms together could give any other
        document; only documents that could still reach the k-th partial score are then scored in
        full, term by term in query order (the order, and so the float sums, of ``query``). The
        window and feedback passes ask for the top 20 of queries whose expansion terms are frequent
        words: those terms' postings were most of the passes' work, and they rarely decide the top.
        """
        if k <= 0:
            return _EMPTY_I, _EMPTY_F
        terms = [(self._vocab[t], 1.0 if weights is None else float(weights.get(t, 1.0)))
                 for t in dict.fromkeys(tokens) if t in self._vocab]
        if not terms or len(self._slot_len) == 0:
            return _EMPTY_I, _EMPTY_F
        if not (0.0 <= self.b <= 1.0) or self.k1 < 0.0 or not all(wt > 0.0 and math.isfinite(wt) for _t, wt in terms):
            # The bounds assume every contribution is positive and grows with tf and shrinks with
            # length (b above 1 makes a short document's normalisation negative); otherwise score
            # everything.
            return self._query_top_dense(tokens, k, allowed, mask, weights)
        stats = self._stats(allowed)
        if stats.n_docs == 0:
            return _EMPTY_I, _EMPTY_F
        k1, n_docs, norm = self.k1, stats.n_docs, stats.norm
        scored: list[tuple[int, float, float]] = []  # (tid, factor, bound) of each term with a visible document
        for tid, wt in terms:
            df = self._df(stats, tid)
            if df == 0:
                continue
            c = wt * math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)) * (k1 + 1.0)
            if c < 1e-300:
                # a contribution could round to 0.0, and "touched" is read as a positive sum here
                return self._query_top_dense(tokens, k, allowed, mask, weights)
            max_tf, min_len = self._bound(tid)
            floor = stats.norm_base + stats.norm_per_token * min_len
            # Inflated by far more than float rounding can add: a bound must never fall short.
            scored.append((tid, c, c * max_tf / (max_tf + floor) * (1.0 + 1e-9)))
        if not scored:
            return _EMPTY_I, _EMPTY_F
        ok = self._ok_slots(stats, mask)
        by_bound = sorted(scored, key=lambda t: -t[2])  # stable: query order among equal bounds
        rest = [0.0] * (len(by_bound) + 1)  # rest[i]: the most terms i.. can add to any document
        for i in range(len(by_bound) - 1, -1, -1):
            rest[i] = rest[i + 1] + by_bound[i][2]
        n_slots = len(self._slot_len)
        part = np.zeros(n_slots, dtype=np.float64)
        # The k-th best partial score cannot exceed this: what the terms summed so far could give a
        # document, or the k-th best partial when last taken plus what the terms since could add.
        ceiling = 0.0
        summed: list[np.ndarray] = []
        n_summed = 0
        done = len(by_bound)
        for i, (tid, c, bound) in enumerate(by_bound):
            slots = np.frombuffer(self._post_slots[tid], dtype=np.int32)
            tf = np.frombuffer(self._post_tf[tid], dtype=np.uint16).astype(np.float64)
            contrib = c * tf
            contrib /= tf + norm.take(slots)
            np.add.at(part, slots, contrib)
            summed.append(slots)
            n_summed += slots.size
            ceiling += bound
            if i + 1 == len(by_bound) or rest[i + 1] >= ceiling:
                continue  # the remaining terms could still lift an untouched document into the top k
            if 16 * n_summed < n_slots:  # few postings so far: their union is cheaper than a scan
                touched = sorted_unique(np.concatenate(summed) if len(summed) > 1 else slots)
                touched = touched[ok[touched]]
            else:
                touched = np.flatnonzero((part > 0.0) & ok)  # a bool scan: far faster than a float one
            if touched.size < k:
                continue
            ceiling = kth_largest(part[touched], k)
            if rest[i + 1] < ceiling * (1.0 - 1e-9):
                done = i + 1
                self.terms_pruned += len(by_bound) - done
                break
        # int32 like the postings, so the searches below do not convert a postings list per call.
        if done == len(by_bound):
            touched = np.flatnonzero((part > 0.0) & ok)
        touched = touched.astype(np.int32)
        if touched.size > k:
            # A document whose partial score plus everything the remaining terms could add stays
            # below the k-th partial score cannot be in the top k (nor can one that no summed term
            # touched). The remaining terms are then added to the documents left, strongest first,
            # each narrowing them again, until k are left or every term is in.
            partial = part[touched]
            theta = kth_largest(partial, k)
            keep = partial + rest[done] >= theta * (1.0 - 1e-9)
            touched, partial = touched[keep], partial[keep]
            at_norm = norm.take(touched)
            for j in range(done, len(by_bound)):
                if touched.size <= k:
                    break
                tid, c, _bound = by_bound[j]
                hit, contrib = self._contrib_at(tid, c, touched, at_norm)
                if contrib is not None:
                    partial[hit] += contrib
                theta = max(theta, kth_largest(partial, k))
                keep = partial + rest[j + 1] >= theta * (1.0 - 1e-9)
                touched, partial, at_norm = touched[keep], partial[keep], at_norm[keep]
        final = np.zeros(touched.size, dtype=np.float64)
        at_norm = norm.take(touched)
        for tid, c, _bound in scored:  # query order
            hit, contrib = self._contrib_at(tid, c, touched, at_norm)
            if contrib is not None:
                final[hit] += contrib
        return _topk(self._slot_local.view[touched], final, k)

    def _contrib_at(
        self, tid: int, c: float, slots: np.ndarray, at_norm: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Which of the sorted ``slots`` (int32) hold the term, and its contribution to each of those
        (``at_norm``: their length normalisation), computed as the full query computes it; None
        when none does."""
        posting = np.frombuffer(self._post_slots[tid], dtype=np.int32)
        pos = np.searchsorted(posting, slots)
        pos[pos == posting.size] = 0
        hit = posting[pos] == slots
        if not hit.any():
            return hit, None
        tf = np.frombuffer(self._post_tf[tid], dtype=np.uint16)[pos[hit]].astype(np.float64)
        contrib = c * tf
        contrib /= tf + at_norm[hit]
        return hit, contrib

    def _bound(self, tid: int) -> tuple[int, int]:
        """(largest tf, shortest document) over the term's postings, dead slots included."""
        slots = self._post_slots[tid]
        seen, max_tf, min_len = self._bounds.get(tid, (0, 0, 1 << 62))
        if len(slots) > seen:
            new_slots = np.frombuffer(slots, dtype=np.int32)[seen:]
            max_tf = max(max_tf, int(np.frombuffer(self._post_tf[tid], dtype=np.uint16)[seen:].max()))
            min_len = min(min_len, int(self._slot_len.view[new_slots].min()))
            self._bounds[tid] = (len(slots), max_tf, min_len)
        return max_tf, min_len

    def _ok_slots(self, stats: _MaskStats, mask: np.ndarray | None) -> np.ndarray:
        """Per slot: live, allowed and inside ``mask``; kept with the statistics for the next query."""
        mask = None if mask is None else np.asarray(mask, dtype=bool)
        cached = stats.ok  # read once: a concurrent reader with another mask may replace it
        if cached is not None and _same_mask(cached[0], mask):
            return cached[1]
        ok = stats.vis if mask is None else stats.vis & _mask_at(mask, self._slot_local.view)
        stats.ok = (None if mask is None else mask.copy(), ok)
        return ok

    def _query_top_dense(
        self,
        tokens: list[str],
        k: int,
        allowed: np.ndarray | None,
        mask: np.ndarray | None,
        weights: dict[str, float] | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``query_top`` by scoring every touched document."""
        _n_terms, acc = self._accumulate(tokens, allowed, weights)
        if acc is None:
            return _EMPTY_I, _EMPTY_F
        slots_u, _stats, scores, _counts = acc
        locs = self._slot_local.view[slots_u]
        if mask is not None and locs.size:
            keep = _mask_at(mask, locs)
            slots_u, locs = slots_u[keep], locs[keep]
        return _topk(locs, scores[slots_u], k)

    def _accumulate(
        self, tokens: list[str], allowed: np.ndarray | None, weights: dict[str, float] | None
    ) -> tuple[int, tuple[np.ndarray, _MaskStats, np.ndarray, np.ndarray] | None]:
        """(distinct query terms, None when nothing matches, else (the allowed live slots touched,
        ascending; the statistics; dense per-slot scores and matched-term counts))."""
        uniq = list(dict.fromkeys(tokens))
        n_terms = len(uniq)
        terms = [(self._vocab[t], 1.0 if weights is None else float(weights.get(t, 1.0)))
                 for t in uniq if t in self._vocab]
        n_slots = len(self._slot_len)
        if not terms or n_slots == 0:
            return n_terms, None
        stats = self._stats(allowed)
        if stats.n_docs == 0:
            return n_terms, None
        k1, n_docs, norm = self.k1, stats.n_docs, stats.norm

        # Dense accumulators, a term at a time in query order with ``np.add.at`` (numpy's fast
        # path for a float add with an index array: a fraction of the cost of the read-add-write
        # of ``scores[slots] += c``, and the same sums bit for bit: a term's postings hold each slot
        # once, so each slot still adds its terms one after another in query order). Hidden slots
        # are scored too (cheaper than compressing every postings list) and masked out once at the
        # end. A query that extends the previous one under the same statistics (the feedback pass:
        # the query's terms, then expansion terms) starts from a copy of its sums.
        prev = stats.last
        done = 0
        if prev is not None and len(prev[0]) <= len(terms) and terms[: len(prev[0])] == prev[0]:
            done = len(prev[0])
            any_hit = prev[3]
        else:
            prev = None
            any_hit = False
        slot_parts: list[np.ndarray] = []
        contrib_parts: list[np.ndarray] = []
        for tid, wt in terms[done:]:
            df = self._df(stats, tid)
            if df == 0:
                continue
            any_hit = True
            slots = np.frombuffer(self._post_slots[tid], dtype=np.int32)
            tf = np.frombuffer(self._post_tf[tid], dtype=np.uint16).astype(np.float64)
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            contrib = (wt * idf * (k1 + 1.0)) * tf
            contrib /= tf + norm.take(slots)  # take: a faster gather than norm[slots]
            slot_parts.append(slots)
            contrib_parts.append(contrib)
        if not slot_parts:
            if prev is not None:
                scores, counts = prev[1], prev[2]
            else:
                scores = np.zeros(n_slots, dtype=np.float64)
                counts = np.zeros(n_slots, dtype=np.int64)
        else:
            new_slots = slot_parts[0] if len(slot_parts) == 1 else np.concatenate(slot_parts)
            counts = np.bincount(new_slots, minlength=n_slots)
            if prev is None:
                scores = np.zeros(n_slots, dtype=np.float64)
            else:
                counts += prev[2]
                scores = prev[1].copy()
            for slots, contrib in zip(slot_parts, contrib_parts, strict=True):
                np.add.at(scores, slots, contrib)
        # Not written in place later: a continuation reads them as they are.
        stats.last = (terms, scores, counts, any_hit)
        if not any_hit:
            return n_terms, None
        return n_terms, (np.flatnonzero(counts.astype(bool) & stats.vis), stats, scores, counts)

    def doc_freqs(self, terms: list[str], allowed: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        """Document frequency of each term among allowed live documents, and that document count."""
        stats = self._stats(allowed)
        out = np.zeros(len(terms), dtype=np.int64)
        for i, t in enumerate(terms):
            tid = self._vocab.get(t)
            if tid is not None:
                out[i] = self._df(stats, tid)
        return out, stats.n_docs

    def search(
        self, query_tokens: list[str], k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (local ids, scores) among allowed docs; stats over allowed docs."""
        return self.query(query_tokens, allowed).top(k)
