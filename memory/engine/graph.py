"""Symmetric weighted graph for activation diffusion.

Layout: a CSR holding every edge in both rows (diffusion walks both ways),
plus a small COO "delta" for recent writes so an insert never rewrites the
CSR. The delta is merged once it exceeds a fraction of the CSR.

Per stored entry: int32 neighbour + float16 weight + uint8 kind = 7 bytes, so
10M undirected edges (20M entries) + 1M nodes stay under ~145 MB. float16 is
plenty for weights in [0, 1] that are multiplied by decays anyway.
"""

from __future__ import annotations

import numpy as np

from ._arrays import GrowArray

__all__ = ["Graph"]

_I32_MAX = np.iinfo(np.int32).max
_F16_MAX = float(np.finfo(np.float16).max)


def _dedupe_max(
    key: np.ndarray, w: np.ndarray, k: np.ndarray, *, presorted: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Collapse equal keys keeping the max weight (and that entry's kind).

    Weight bits and kind are packed into one int64 so a single
    ``maximum.reduceat`` does it; valid because non-negative float32 bit
    patterns order like the floats themselves.
    """
    if key.size == 0:
        return key, w, k
    if not presorted:
        # Stability is irrelevant (groups are reduced with max), and introsort
        # is several times faster than timsort on random int64 keys.
        order = np.argsort(key)
        key, w, k = key[order], w[order], k[order]
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    if starts.size == key.size:
        return key, w, k
    comp = (w.astype(np.float32).view(np.uint32).astype(np.int64) << 8) | k.astype(np.int64)
    comp = np.maximum.reduceat(comp, starts)
    w = (comp >> 8).astype(np.uint32).view(np.float32)
    k = (comp & 0xFF).astype(np.uint8)
    return key[starts], w, k


class Graph:
    def __init__(self, n_nodes: int = 0, *, delta_ratio: float = 0.05, min_delta: int = 4096) -> None:
        self._n = int(n_nodes)
        self.delta_ratio = float(delta_ratio)
        self.min_delta = int(min_delta)
        self._indptr = np.zeros(self._n + 1, dtype=np.int32)
        self._indices = np.empty(0, dtype=np.int32)
        self._weights = np.empty(0, dtype=np.float16)
        self._kinds = np.empty(0, dtype=np.uint8)
        self._d_src = GrowArray(np.int32)
        self._d_dst = GrowArray(np.int32)
        self._d_w = GrowArray(np.float16)
        self._d_k = GrowArray(np.uint8)
        # Both dicts only cover the delta, which is small by construction.
        self._d_pos: dict[int, int] = {}  # (src << 32 | dst) -> delta position
        self._d_adj: dict[int, list[int]] = {}  # src -> delta positions

    # -- size ---------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return self._n

    @property
    def n_entries(self) -> int:
        """Stored directed entries (2 per undirected edge)."""
        return int(self._indices.shape[0]) + len(self._d_src)

    @property
    def n_edges(self) -> int:
        return self.n_entries // 2

    @property
    def nbytes(self) -> int:
        csr = self._indptr.nbytes + self._indices.nbytes + self._weights.nbytes
        csr += self._kinds.nbytes
        delta = self._d_src.nbytes + self._d_dst.nbytes + self._d_w.nbytes + self._d_k.nbytes
        # Rough CPython cost of the delta dicts/lists (~120 B per entry).
        return int(csr + delta + 120 * len(self._d_pos))

    def grow(self, n_nodes: int) -> None:
        n_nodes = int(n_nodes)
        if n_nodes <= self._n:
            return
        tail = np.full(n_nodes - self._n, self._indptr[-1], dtype=self._indptr.dtype)
        self._indptr = np.concatenate((self._indptr, tail))
        self._n = n_nodes

    # -- writes -------------------------------------------------------------
    def add_edges(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        weight: np.ndarray | float = 1.0,
        kind: np.ndarray | int = 0,
    ) -> None:
        """Add undirected edges; an existing pair keeps the max weight."""
        s = np.asarray(src, dtype=np.int64).reshape(-1)
        d = np.asarray(dst, dtype=np.int64).reshape(-1)
        if s.shape != d.shape:
            raise ValueError("src and dst differ in length")
        w = np.broadcast_to(np.asarray(weight, dtype=np.float32), s.shape)
        k = np.broadcast_to(np.asarray(kind, dtype=np.uint8), s.shape)
        if s.size == 0:
            return
        if s.min() < 0 or d.min() < 0 or max(s.max(), d.max()) >= self._n:
            raise ValueError("edge endpoint out of range; call grow() first")
        if not np.all(np.isfinite(w)) or w.min() < 0:
            raise ValueError("edge weights must be finite and >= 0")
        # Quantise once up front so every comparison below sees stored values. Weights past
        # float16's range saturate at its max: cast as they are they became inf, and an inf
        # activation ranked such a neighbour last (inf scores count as "no score" in rank fusion).
        w = np.minimum(w, _F16_MAX).astype(np.float16).astype(np.float32)
        loop = s == d
        if loop.any():
            s, d, w, k = s[~loop], d[~loop], w[~loop], k[~loop]
        rows = np.concatenate((s, d))
        cols = np.concatenate((d, s))
        key, ww, kk = _dedupe_max((rows << 32) | cols, np.concatenate((w, w)), np.concatenate((k, k)))
        if len(self._d_src) + key.size > self._delta_limit():
            self._merge(key, ww, kk)
            return
        rows, cols = key >> 32, key & 0xFFFFFFFF
        pos = self._csr_find(rows, cols)
        found = pos >= 0
        if found.any():
            p = pos[found]
            better = ww[found] > self._weights[p].astype(np.float32)
            self._weights[p[better]] = ww[found][better]
            self._kinds[p[better]] = kk[found][better]
        miss = ~found
        self._delta_insert(key[miss], rows[miss], cols[miss], ww[miss], kk[miss])

    def _delta_limit(self) -> int:
        return max(self.min_delta, int(self.delta_ratio * self._indices.shape[0]))

    def _delta_insert(
        self, key: np.ndarray, rows: np.ndarray, cols: np.ndarray, w: np.ndarray, k: np.ndarray
    ) -> None:
        d_pos, d_adj = self._d_pos, self._d_adj
        dw, dk = self._d_w, self._d_k
        for key_i, r, c, w_i, k_i in zip(
            key.tolist(), rows.tolist(), cols.tolist(), w.tolist(), k.tolist(), strict=True
        ):
            p = d_pos.get(key_i)
            if p is not None:
                if w_i > float(dw.view[p]):
                    dw.view[p] = w_i
                    dk.view[p] = k_i
                continue
            p = dw.append(w_i)
            dk.append(k_i)
            self._d_src.append(r)
            self._d_dst.append(c)
            d_pos[key_i] = p
            lst = d_adj.get(r)
            if lst is None:
                d_adj[r] = [p]
            else:
                lst.append(p)

    def _csr_find(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Vectorised binary search of (row, col) in the CSR; -1 if absent."""
        out = np.full(rows.shape[0], -1, dtype=np.int64)
        nnz = self._indices.shape[0]
        if nnz == 0 or rows.size == 0:
            return out
        lo = self._indptr[rows].astype(np.int64)
        end = self._indptr[rows + 1].astype(np.int64)
        hi = end.copy()
        active = lo < hi
        while active.any():
            mid = (lo + hi) >> 1
            midv = self._indices[np.minimum(mid, nnz - 1)]
            right = active & (midv < cols)
            left = active & ~right
            lo = np.where(right, mid + 1, lo)
            hi = np.where(left, mid, hi)
            active = lo < hi
        ok = lo < end
        ok[ok] = self._indices[lo[ok]] == cols[ok]
        out[ok] = lo[ok]
        return out

    def compact(self) -> None:
        """Merge the delta into the CSR."""
        if len(self._d_src):
            self._merge(np.empty(0, np.int64), np.empty(0, np.float32), np.empty(0, np.uint8))

    def _merge(self, key: np.ndarray, w: np.ndarray, k: np.ndarray) -> None:
        nnz = self._indices.shape[0]
        csr_rows = np.repeat(np.arange(self._n, dtype=np.int64), np.diff(self._indptr))
        parts_key = [(csr_rows << 32) | self._indices.astype(np.int64)]
        del csr_rows
        parts_w = [self._weights.astype(np.float32)]
        parts_k = [self._kinds]
        if len(self._d_src):
            parts_key.append((self._d_src.view.astype(np.int64) << 32) | self._d_dst.view.astype(np.int64))
            parts_w.append(self._d_w.view.astype(np.float32))
            parts_k.append(self._d_k.view)
        parts_key.append(key)
        parts_w.append(w)
        parts_k.append(k)
        all_key = np.concatenate(parts_key)
        all_w = np.concatenate(parts_w)
        all_k = np.concatenate(parts_k)
        del parts_key, parts_w, parts_k
        # The CSR part is already sorted, so timsort is close to a linear
        # merge here; a fresh bulk load arrives fully sorted and skips it.
        if all_key.size > nnz and not bool(np.all(all_key[1:] >= all_key[:-1])):
            order = np.argsort(all_key, kind="stable")
            all_key, all_w, all_k = all_key[order], all_w[order], all_k[order]
            del order
        all_key, all_w, all_k = _dedupe_max(all_key, all_w, all_k, presorted=True)
        rows = (all_key >> 32).astype(np.int64)
        counts = np.bincount(rows, minlength=self._n)
        del rows
        idx_dtype = np.int32 if all_key.size <= _I32_MAX else np.int64
        indptr = np.zeros(self._n + 1, dtype=idx_dtype)
        np.cumsum(counts, out=indptr[1:])
        self._indptr = indptr
        self._indices = (all_key & 0xFFFFFFFF).astype(np.int32)
        self._weights = all_w.astype(np.float16)
        self._kinds = all_k.astype(np.uint8)
        self._d_src = GrowArray(np.int32)
        self._d_dst = GrowArray(np.int32)
        self._d_w = GrowArray(np.float16)
        self._d_k = GrowArray(np.uint8)
        self._d_pos = {}
        self._d_adj = {}

    # -- reads --------------------------------------------------------------
    def neighbors(self, node_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """All entries leaving a frontier.

        Returns (src_pos, nbr, weight float32, kind) where src_pos indexes
        into ``node_ids``.
        """
        f = np.asarray(node_ids, dtype=np.int64).reshape(-1)
        starts = self._indptr[f].astype(np.int64)
        lens = self._indptr[f + 1].astype(np.int64) - starts
        total = int(lens.sum())
        src_pos = np.repeat(np.arange(f.shape[0], dtype=np.int64), lens)
        if total:
            first = np.cumsum(lens) - lens
            offs = np.arange(total, dtype=np.int64) + np.repeat(starts - first, lens)
            nbr = self._indices[offs].astype(np.int64)
            w = self._weights[offs].astype(np.float32)
            k = self._kinds[offs]
        else:
            nbr = np.empty(0, np.int64)
            w = np.empty(0, np.float32)
            k = np.empty(0, np.uint8)
        if self._d_adj:
            d_pos: list[int] = []
            d_src: list[int] = []
            for i, u in enumerate(f.tolist()):
                lst = self._d_adj.get(u)
                if lst:
                    d_pos.extend(lst)
                    d_src.extend([i] * len(lst))
            if d_pos:
                p = np.asarray(d_pos, dtype=np.int64)
                src_pos = np.concatenate((src_pos, np.asarray(d_src, dtype=np.int64)))
                nbr = np.concatenate((nbr, self._d_dst.view[p].astype(np.int64)))
                w = np.concatenate((w, self._d_w.view[p].astype(np.float32)))
                k = np.concatenate((k, self._d_k.view[p]))
        return src_pos, nbr, w, k

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every stored directed entry as COO (src, dst, weight, kind)."""
        rows = np.repeat(np.arange(self._n, dtype=np.int64), np.diff(self._indptr))
        src = np.concatenate((rows, self._d_src.view.astype(np.int64)))
        dst = np.concatenate((self._indices.astype(np.int64), self._d_dst.view.astype(np.int64)))
        w = np.concatenate((self._weights.astype(np.float32), self._d_w.view.astype(np.float32)))
        k = np.concatenate((self._kinds, self._d_k.view))
        return src, dst, w, k
