"""Per-tenant in-memory index: node columns + BM25 + vectors + graph.

Nodes live at dense local positions 0..n-1 in insertion order; every
structure (BM25, vectors, graph, masks) is indexed by that position so a
query never goes through a dict. Rebuilding from the same records in the same
order yields the same positions and therefore identical results.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ._arrays import GrowArray, isin_few
from .bm25 import BM25Index
from .graph import Graph
from .tension import sanitize_tension_params, seed_until, tension
from .text import asks_only, has_time_expression
from .tokenize import tokenize
from .types import TENSION_THRESHOLD, NodeKind, NodeRecord, Scope
from .vectors import VectorIndex
from .windows import ContextWindows

__all__ = ["TenantIndex"]


_COLUMNS: dict[str, tuple[Any, Any]] = {
    # name: (dtype, fill)
    "node_id": (np.int64, -1),
    "kind": (np.uint8, 0),
    "owner_key": (np.int64, 0),
    "team_id": (np.int64, 0),
    "scope": (np.uint8, 0),
    "t0": (np.float64, 1.0),
    "lam": (np.float64, 0.0),
    "last_updated": (np.float64, 0.0),
    "last_recalled": (np.float64, np.nan),
    "mentions": (np.int32, 0),
    "session_key": (np.int64, 0),
    "seq": (np.int32, 0),
    "occurred_at": (np.float64, np.nan),
    "deleted": (np.bool_, False),
    "seed_until": (np.float64, -np.inf),
    "speaker_id": (np.int32, 0),
    "has_time": (np.bool_, False),
    "asks": (np.bool_, False),
    # Where the node's day references start in the ``_ref_*`` entries, and how many it has.
    "ref_at": (np.int32, 0),
    "ref_n": (np.uint8, 0),
}
# A text's first day references only (the write path keeps 64 time mentions, see
# text.MAX_TIME_MENTIONS; an import may carry any list): a memory naming hundreds of days is a
# list, not a statement of when something happened.
MAX_DAY_REFS = 64
_I32 = np.iinfo(np.int32)
_RECORD_COLUMNS = (
    "kind",
    "owner_key",
    "team_id",
    "scope",
    "t0",
    "lam",
    "last_updated",
    "mentions",
    "session_key",
    "seq",
    "occurred_at",
)


class TenantIndex:
    def __init__(
        self,
        dim: int,
        *,
        bm25_k1: float = 1.2,
        bm25_b: float = 0.75,
        vector_opts: Mapping[str, Any] | None = None,
        graph_opts: Mapping[str, Any] | None = None,
    ) -> None:
        self.dim = int(dim)
        self.watermark: int = 0  # opaque sync position owned by the Django side
        self.watermark_pending: tuple[int, ...] = ()  # likewise (transactions in flight at it)
        self._cols = {name: GrowArray(dt, fill=fill) for name, (dt, fill) in _COLUMNS.items()}
        self._local: dict[int, int] = {}
        self.speakers: dict[str, int] = {}  # speaker name (lower case) -> id >= 1
        self.texts: list[str] = []
        self._text_bytes = 0  # sum of sys.getsizeof(t) over self.texts, kept for an O(1) nbytes
        self.bm25 = BM25Index(k1=bm25_k1, b=bm25_b)
        self.windows = ContextWindows(k1=bm25_k1, b=bm25_b)
        self.vectors = VectorIndex(self.dim, **dict(vector_opts or {}))
        self.graph = Graph(0, **dict(graph_opts or {}))
        # The days nodes' texts refer to, one entry per (node, first day, last day): a flat list,
        # so the date focus tests them all in one vectorised pass, holding every reference of a
        # node (a column pair of days would hold one, for 8 bytes on every node; few turns name a
        # day). Each node keeps where its entries start and how many (5 bytes). An updated node's
        # old entries are overwritten in place when the new ones fit, else marked dead (node -1)
        # and dropped by ``compact``.
        self._ref_node = GrowArray(np.int32, fill=-1)
        self._ref_first = GrowArray(np.int32)
        self._ref_last = GrowArray(np.int32)
        self._ref_dead = 0

    # -- columns ------------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self.texts)

    def col(self, name: str) -> np.ndarray:
        """Filled prefix of a column (a view: do not write through it)."""
        return self._cols[name].view

    def local_of(self, node_id: int) -> int | None:
        return self._local.get(int(node_id))

    def locals_of(self, node_ids: Iterable[int]) -> np.ndarray:
        """Local positions of known ids (unknown ids are skipped)."""
        get = self._local.get
        out = [p for p in (get(int(i)) for i in node_ids) if p is not None]
        return np.asarray(out, dtype=np.int64)

    def speaker_id(self, name: str, *, create: bool = False) -> int:
        """Id of a speaker name (case-insensitive); 0 for none or unknown."""
        key = " ".join((name or "").lower().split())
        if not key:
            return 0
        sid = self.speakers.get(key, 0)
        if not sid and create:
            sid = self.speakers[key] = len(self.speakers) + 1
        return sid

    def node_ids_of(self, local_ids: np.ndarray) -> np.ndarray:
        return self.col("node_id")[np.asarray(local_ids, dtype=np.int64)]

    # -- writes -------------------------------------------------------------
    def reserve(self, n: int) -> None:
        """Make room for ``n`` nodes in all, before writing them in several batches (a build read in
        pages): each batch would otherwise grow the columns, the vector matrix and the windows'
        rows by doubling, leaving up to twice the capacity the nodes need."""
        for c in self._cols.values():
            c.reserve(n)
        self.vectors.reserve(n)
        self.windows.reserve(n)

    def upsert_nodes(self, batch: Sequence[NodeRecord] | Mapping[str, Sequence[Any]]) -> np.ndarray:
        """Insert or update nodes; returns their local positions."""
        records = _as_records(batch)
        cols = self._cols
        locals_out = np.empty(len(records), dtype=np.int64)
        vec_ids: list[int] = []
        vec_rows: list[np.ndarray] = []
        missing: list[int] = []
        # Columns grow once for the batch, then are written through views taken once.
        n_new = len({int(r.node_id) for r in records}.difference(self._local))
        for c in cols.values():
            c.resize(self.n + n_new)
        view = {name: c.view for name, c in cols.items()}
        with self.windows.deferred():
            for i, rec in enumerate(records):
                nid = int(rec.node_id)
                pos = self._local.get(nid)
                if pos is None:
                    pos = self.n
                    self._local[nid] = pos
                    self.texts.append(rec.text)
                    self._text_bytes += sys.getsizeof(rec.text)
                    view["node_id"][pos] = nid
                    toks = rec.tokens if rec.tokens is not None else tokenize(rec.text)
                    self.bm25.add(pos, toks)
                    self.windows.update(pos, _window_key(rec), rec.seq, toks)
                    if rec.vector is None:
                        missing.append(pos)
                else:
                    view["deleted"][pos] = False
                    text_changed = rec.text != self.texts[pos]
                    if text_changed:
                        self._text_bytes += sys.getsizeof(rec.text) - sys.getsizeof(self.texts[pos])
                        self.texts[pos] = rec.text
                    toks = rec.tokens
                    if toks is None and (text_changed or pos not in self.bm25):
                        toks = tokenize(rec.text)
                    # A row read again unchanged (a reinforced recall, a catch-up behind an old open
                    # transaction) is not re-indexed: re-adding would only pile up dead postings.
                    if toks is not None and (pos not in self.bm25 or toks != self.windows.own_tokens(pos)):
                        self.bm25.add(pos, toks)
                        self.windows.update(pos, _window_key(rec), rec.seq, toks)
                    elif not self.windows.placed(pos, _window_key(rec), rec.seq):
                        self.windows.update(pos, _window_key(rec), rec.seq, self.windows.own_tokens(pos))
                for name in _RECORD_COLUMNS:
                    view[name][pos] = getattr(rec, name)
                view["speaker_id"][pos] = self.speaker_id(rec.speaker, create=True)
                if len(rec.day_refs) or view["ref_n"][pos]:
                    self._set_day_refs(pos, rec.day_refs, view)
                view["has_time"][pos] = has_time_expression(self.texts[pos])
                view["asks"][pos] = asks_only(self.texts[pos])
                if rec.vector is not None:
                    v = np.asarray(rec.vector, dtype=np.float32).reshape(-1)
                    if v.size == 0:
                        missing.append(pos)
                    else:
                        vec_ids.append(pos)
                        vec_rows.append(v)
                locals_out[i] = pos
        if records:
            t0, lam = sanitize_tension_params(view["t0"][locals_out], view["lam"][locals_out])
            view["t0"][locals_out] = t0
            view["lam"][locals_out] = lam
            self._refresh_seed_until(locals_out)
        if vec_ids:
            self.vectors.add(np.asarray(vec_ids, dtype=np.int64), np.stack(vec_rows))
        if missing:
            self.vectors.mark_missing(np.asarray(missing, dtype=np.int64))
        self.graph.grow(self.n)
        return locals_out

    def _set_day_refs(self, pos: int, refs, view: dict[str, np.ndarray]) -> None:
        """Replace node ``pos``'s day references with ``refs`` (valid pairs only, first ones kept)."""
        pairs: list[tuple[int, int]] = []
        for ref in refs:
            if len(pairs) >= MAX_DAY_REFS:
                break
            try:
                first, last = int(ref[0]), int(ref[1])
            except (TypeError, ValueError, IndexError, OverflowError):
                continue
            if _I32.min <= first <= last <= _I32.max:
                pairs.append((first, last))
        at, n_old = int(view["ref_at"][pos]), int(view["ref_n"][pos])
        node, lo, hi = self._ref_node.view, self._ref_first.view, self._ref_last.view
        if n_old and len(pairs) == n_old and pairs == list(zip(lo[at:at + n_old].tolist(),
                                                               hi[at:at + n_old].tolist(), strict=True)):
            return  # the common update (a recall folded in, a catch-up re-reading the row): unchanged
        if len(pairs) <= n_old:  # fits where the old ones were
            k = len(pairs)
            if k:
                lo[at:at + k], hi[at:at + k] = zip(*pairs, strict=True)
            node[at + k:at + n_old] = -1
            self._ref_dead += n_old - k
            view["ref_n"][pos] = k
            return
        node[at:at + n_old] = -1
        self._ref_dead += n_old
        start = len(self._ref_node)
        self._ref_node.extend(np.full(len(pairs), pos, dtype=np.int32))
        self._ref_first.extend([p[0] for p in pairs])
        self._ref_last.extend([p[1] for p in pairs])
        view["ref_at"][pos] = start
        view["ref_n"][pos] = len(pairs)

    def day_refs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(local, first day, last day) of every day reference of the nodes (deleted ones included:
        callers mask by visibility), in no particular order; views, do not write through them."""
        node = self._ref_node.view
        if not self._ref_dead:
            return node, self._ref_first.view, self._ref_last.view
        live = node >= 0
        return node[live], self._ref_first.view[live], self._ref_last.view[live]

    def _compact_day_refs(self) -> None:
        if not self._ref_dead:
            return
        node = self._ref_node.view
        live = node >= 0
        new_pos = np.cumsum(live, dtype=np.int64) - 1  # each live entry's place after the drop
        owners = self._cols["ref_n"].view > 0
        at = self._cols["ref_at"].view
        at[owners] = new_pos[at[owners]]
        for name in ("_ref_node", "_ref_first", "_ref_last"):
            old: GrowArray = getattr(self, name)
            kept = old.view[live]
            new = GrowArray(old.dtype, capacity=kept.size, fill=-1 if name == "_ref_node" else 0)
            new.extend(kept)
            setattr(self, name, new)
        self._ref_dead = 0

    def _refresh_seed_until(self, locs: np.ndarray) -> None:
        c = self._cols
        c["seed_until"].view[locs] = seed_until(
            c["t0"].view[locs],
            c["lam"].view[locs],
            c["last_updated"].view[locs],
            c["mentions"].view[locs],
            TENSION_THRESHOLD,
        )

    def add_edges(
        self,
        src_node_ids: Sequence[int] | np.ndarray,
        dst_node_ids: Sequence[int] | np.ndarray,
        weight: np.ndarray | float = 1.0,
        kind: np.ndarray | int = 0,
    ) -> int:
        """Link nodes by DB id; pairs with an unknown endpoint are skipped.

        Returns the number of edges accepted.
        """
        src = np.asarray(src_node_ids, dtype=np.int64).reshape(-1)
        dst = np.asarray(dst_node_ids, dtype=np.int64).reshape(-1)
        w = np.broadcast_to(np.asarray(weight, dtype=np.float32), src.shape)
        k = np.broadcast_to(np.asarray(kind, dtype=np.uint8), src.shape)
        get = self._local.get
        s_loc = np.fromiter((get(int(x), -1) for x in src), dtype=np.int64, count=src.size)
        d_loc = np.fromiter((get(int(x), -1) for x in dst), dtype=np.int64, count=dst.size)
        ok = (s_loc >= 0) & (d_loc >= 0)
        self.graph.add_edges(s_loc[ok], d_loc[ok], w[ok], k[ok])
        return int(np.count_nonzero(ok))

    def add_edges_local(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        weight: np.ndarray | float = 1.0,
        kind: np.ndarray | int = 0,
    ) -> None:
        """Bulk path for rebuilds: endpoints already are local positions."""
        self.graph.add_edges(src, dst, weight, kind)

    def compact(self) -> None:
        """Drop the dead postings that updates leave behind (a bulk build leaves one per window
        re-indexed as its session grew): less memory, shorter posting scans. Scores unchanged."""
        self.bm25.compact()
        self.windows.bm25.compact()
        self._compact_day_refs()

    def dead_fraction(self) -> float:
        """Share of posting slots that are dead, over the lexical indexes (0 = compact)."""
        return max(self.bm25.dead_fraction(), self.windows.bm25.dead_fraction())

    def delete_nodes(self, node_ids: Iterable[int]) -> int:
        """Soft-delete: the node vanishes from search; edges stay but are never walked."""
        locs = self.locals_of(node_ids)
        if locs.size == 0:
            return 0
        self._cols["deleted"].view[locs] = True
        for p in locs.tolist():
            self.bm25.remove(p)
            self.windows.remove(p)
        self.vectors.remove(locs)
        return int(locs.size)

    def record_recall(self, local_ids: np.ndarray, now: float) -> None:
        """Reinforce recalled nodes (mentions feed F(m) in tension)."""
        locs = np.unique(np.asarray(local_ids, dtype=np.int64))
        if locs.size == 0:
            return
        m = self._cols["mentions"].view
        m[locs] = np.minimum(m[locs].astype(np.int64) + 1, np.iinfo(np.int32).max)
        self._cols["last_recalled"].view[locs] = now
        self._refresh_seed_until(locs)

    # -- reads --------------------------------------------------------------
    def tension(self, local_ids: np.ndarray, now_days: float) -> np.ndarray:
        c = self._cols
        ids = np.asarray(local_ids, dtype=np.int64)
        return tension(
            c["t0"].view[ids],
            c["lam"].view[ids],
            c["last_updated"].view[ids],
            c["mentions"].view[ids],
            now_days,
        )

    def seedable_mask(self, now_days: float, threshold: float = TENSION_THRESHOLD) -> np.ndarray:
        """Not deleted, not a bridge, tension >= threshold."""
        c = self._cols
        ok = ~c["deleted"].view & (c["kind"].view != NodeKind.BRIDGE)
        if threshold == TENSION_THRESHOLD:
            ok &= c["seed_until"].view >= now_days
        else:
            ok &= self.tension(np.arange(self.n), now_days) >= threshold
        return ok

    def visibility_mask(
        self,
        *,
        owner_keys: Iterable[int] | np.ndarray = (),
        team_ids: Iterable[int] | np.ndarray = (),
        restricted_allowed_node_ids: Iterable[int] | np.ndarray = (),
        org_wide: bool = True,
    ) -> np.ndarray:
        """Which nodes the caller may see.

        private: owner only; team: members of the node's team or its owner;
        org: everyone (when ``org_wide``); restricted: only node ids the caller
        resolved from ACLs. Deleted nodes are never visible.
        """
        c = self._cols
        scope = c["scope"].view
        owners = np.fromiter((int(x) for x in owner_keys), dtype=np.int64)
        teams = np.fromiter((int(x) for x in team_ids), dtype=np.int64)
        is_owner = isin_few(c["owner_key"].view, owners) if owners.size else np.zeros(self.n, bool)
        vis = (scope == Scope.PRIVATE) & is_owner
        if teams.size or owners.size:
            in_team = isin_few(c["team_id"].view, teams[teams != 0]) if teams.size else False
            vis |= (scope == Scope.TEAM) & (in_team | is_owner)
        if org_wide:
            vis |= scope == Scope.ORG
        restricted = self.locals_of(restricted_allowed_node_ids)
        if restricted.size:
            vis[restricted[scope[restricted] == Scope.RESTRICTED]] = True
        vis &= ~c["deleted"].view
        return vis

    def has_scope(self, scope: int) -> bool:
        return bool(np.any(self._cols["scope"].view == scope))

    def restricted_owned_by(self, owner_keys: Iterable[int]) -> np.ndarray:
        """Node ids of the live restricted nodes these owners own (an owner reads its own)."""
        c = self._cols
        owners = np.fromiter((int(x) for x in owner_keys), dtype=np.int64)
        mine = (c["scope"].view == Scope.RESTRICTED) & isin_few(c["owner_key"].view, owners) & ~c["deleted"].view
        return c["node_id"].view[mine]

    def nbytes(self) -> int:
        cols = sum(c.nbytes for c in self._cols.values())
        # O(1): the cache sizes an index after every sync that changed it. A text's own size, not
        # its length: CPython stores non-Latin-1 text at 2 or 4 bytes a character (CJK at 2), so a
        # count of characters under-counted such an org's texts by half or more. +8: the list slot.
        texts = self._text_bytes + 8 * len(self.texts)
        local = 100 * len(self._local)
        return (
            cols
            + texts
            + local
            + self.bm25.nbytes()
            + self.windows.nbytes()
            + self.vectors.nbytes()
            + self.graph.nbytes
            + self._ref_node.nbytes + self._ref_first.nbytes + self._ref_last.nbytes
        )

    @staticmethod
    def estimate_nbytes(*, nodes: int, live: int | None = None, dim: int) -> int:
        """A lower bound of ``nbytes()`` of an index built from ``nodes`` records, ``live`` of them
        not deleted (all by default), each with a vector or marked missing (as the cache hands them
        over), known before building it: the cache leaves an org that cannot fit under its byte cap
        unbuilt instead of building it to find out. It counts what every node costs whatever its
        text: the node columns, its float32 vector row, the CSR row pointer, the id maps, the texts'
        object headers and, for live nodes, the slots of both lexical indexes and the windows' maps.
        Postings, vocabulary, edges, the text itself, day references and an HNSW graph come on top
        (on conversation turns the built index is ~1.5x this)."""
        n = max(int(nodes), 0)
        live_n = n if live is None else min(max(int(live), 0), n)
        per_node = (sum(np.dtype(dt).itemsize for dt, _ in _COLUMNS.values())  # columns
                    + sys.getsizeof("") + 8  # the text's header and list slot
                    + 100  # node id -> local position
                    + 4 * int(dim) + 1  # the vector row and its flag
                    + 4)  # the CSR row pointer
        # Per live node, in each of the two BM25 indexes a slot (length, local id, live flag) and a
        # local -> slot entry; in the windows its place, its neighbour row (radius 1), its tokens.
        per_live = 2 * (13 + 100) + 200 + 16 + 56
        return per_node * n + per_live * live_n + 4

    def stats(self) -> dict[str, int]:
        return {
            "nodes": self.n,
            "deleted": int(np.count_nonzero(self.col("deleted"))),
            "vectors": self.vectors.n_vectors,
            "edges": self.graph.n_edges,
            "bytes": self.nbytes(),
        }


def _window_key(rec: NodeRecord) -> int:
    """Context windows join only nodes of one session *and* one visibility (owner, team, scope), so
    a window never carries words of a neighbour its reader may not see; restricted nodes (per-node
    ACLs) stay windows of one."""
    if not rec.session_key or rec.scope == Scope.RESTRICTED:
        return 0
    return hash((int(rec.session_key), int(rec.owner_key), int(rec.team_id), int(rec.scope))) or 1


def _as_records(
    batch: Sequence[NodeRecord] | Mapping[str, Sequence[Any]],
) -> list[NodeRecord]:
    if isinstance(batch, Mapping):
        names = list(batch.keys())
        n = len(batch["node_id"])
        return [NodeRecord(**{k: batch[k][i] for k in names}) for i in range(n)]
    return list(batch)
