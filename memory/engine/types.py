"""Shared enums, records and result types of the retrieval engine.

Everything here is plain data: no numpy state, so results can be handed to the
Django layer (or serialised) without dragging engine internals along.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Literal

import numpy as np

__all__ = [
    "EdgeKind",
    "NodeKind",
    "Scope",
    "NodeRecord",
    "ResonateParams",
    "Explanation",
    "Hit",
    "Seed",
    "ResonateResult",
    "TENSION_THRESHOLD",
    "MAX_K",
]

# Below this tension a node no longer seeds retrieval (it can still be reached
# by diffusion); decay never deletes anything.
TENSION_THRESHOLD = 0.05

# Hard cap on hits per query: keeps response size and explanation cost bounded
# whatever a caller asks for.
MAX_K = 100


class EdgeKind(IntEnum):
    """Why two nodes are linked; stored as one uint8 per stored edge entry."""

    TEMPORAL_NEXT = 0
    SAME_SESSION = 1
    ENTITY = 2
    SIMILAR = 3
    DERIVED = 4
    BRIDGE = 5
    CONTRADICTS = 6
    SUPERSEDES = 7
    EXPLICIT = 8


class NodeKind(IntEnum):
    LEAF = 0
    FACT = 1
    BRIDGE = 2  # walkable connector, never seeds and never returned
    PERSONA = 3
    SCENE = 4


class Scope(IntEnum):
    PRIVATE = 0
    TEAM = 1
    ORG = 2
    RESTRICTED = 3


@dataclass(slots=True)
class NodeRecord:
    """One node as the Django side hands it to the engine.

    ``vector``: ``None`` means "not supplied" (missing on insert, unchanged on
    update); an empty array marks the vector as missing explicitly (embedder
    failed), so the node is never returned by the vector channel.
    ``tokens``: pre-tokenised text; ``None`` means tokenise ``text`` here.
    ``day_refs``: the days the text itself refers to ("yesterday I fixed it" written on the 20th:
    the 19th), as ``(first, last)`` UTC day counts since the epoch, both inclusive; the date focus
    reads those not after the day of ``occurred_at`` beside it. Always the node's whole set (an
    update replaces it).
    """

    node_id: int
    text: str
    kind: int = NodeKind.LEAF
    owner_key: int = 0
    team_id: int = 0
    scope: int = Scope.PRIVATE
    t0: float = 1.0
    lam: float = 0.0
    last_updated: float = 0.0
    mentions: int = 0
    session_key: int = 0
    seq: int = 0
    occurred_at: float = math.nan
    vector: np.ndarray | None = None
    tokens: list[str] | None = None
    speaker: str = ""
    day_refs: Sequence[tuple[int, int]] = ()


@dataclass(frozen=True, slots=True)
class ResonateParams:
    """Every tunable of ``resonate``; defaults follow the NylonME write-ups."""

    k: int = 10
    n_lex: int = 20
    n_vec: int = 20
    fusion: Literal["rrf", "weighted"] = "rrf"
    rrf_k: int = 60
    # The turn-level lexical list is off by default: the window list subsumes it (a node without
    # a session is a window of one) and fusing both double-counts lexical evidence.
    w_lex: float = 0.0
    w_vec: float = 0.5
    # Weighted fusion min-max normalises, which maps the weakest seed to 0;
    # the floor keeps every seed alive so it can still spread activation.
    seed_floor: float = 0.1
    depth: int = 2
    hop_decay: float = 0.5
    combine: Literal["sum", "max"] = "sum"
    max_activated: int = 64
    w_ctx: float = 0.5
    rerank: bool = True
    w_rerank: float = 0.5
    # Context-window lexical channel (BM25 over each node +- its session neighbours); 0 = off.
    n_win: int = 20
    w_win: float = 1.0
    # Final ordering: "blend" = (1-w_rerank)*score/max + w_rerank*cosine; "rank" = weighted
    # reciprocal-rank fusion of the seed channels with the ranks of diffusion score, cosine and
    # window cosine (mean cosine over the node's context window) among all candidates.
    final: Literal["blend", "rank"] = "rank"
    w_rank_act: float = 0.25
    w_rank_cos: float = 0.0
    w_rank_wcos: float = 0.5
    # Window-vector channel (mean cosine over the context window); 0 = off. "vec" replaces the
    # turn-level vector list with it, "win" interleaves it into the window list.
    n_wvec: int = 20
    w_wvec_as: Literal["vec", "win"] = "vec"
    # Entity focus: bonus (in units of a rank-1 reciprocal rank) for candidates whose own text names
    # a person/thing the query names (the lexical document starts with the speaker); 0 = off.
    w_ent: float = 0.0
    # Own-text focus: the same bonus x the fraction of query terms in the candidate's own document,
    # so a turn that says the words beats neighbours that only share its window; 0 = off.
    w_own: float = 0.25
    # Speaker focus: the same bonus for candidates *spoken by* a person the query names (nicknames
    # resolved against the tenant's speakers by ``text.canonical_entity``); 0 = off.
    w_spk: float = 0.5
    # Vector feedback (Rocchio): query vector + ``vprf_beta`` x mean vector of the ``prf_docs`` best
    # fused seeds' windows gives a second window-vector list with weight ``w_vprf``; 0 = off.
    w_vprf: float = 0.5
    vprf_beta: float = 1.0
    # Where the feedback vector's window candidates come from: "pool" = the windows of the first
    # vector search's pool (by the query vector), rescored with it; "search" = a second index search
    # with it. "pool" saves one of the two HNSW searches of a query at 100k nodes (~0.7-1.4 ms) and
    # gave the same LoCoMo recall@10 (85.9%, every category; 12 of 200 top-10 lists differ).
    vprf_pool: Literal["search", "pool"] = "pool"
    # Time focus: for "when ..." questions, the same bonus for candidates whose own text carries
    # a resolvable time expression ("yesterday", "last May"); 0 = off.
    w_time: float = 1.0
    # Date focus: a query naming a day or a week ("on November 24", "last Tuesday", "yesterday",
    # resolved against now) gets a seed channel of the visible nodes that happened then (ranked by
    # turn BM25, then cosine), weight ``w_date``, and its candidates from then the same bonus as
    # ``w_time``; spans of ``date_max_span_days`` or more (months, years) are not a focus; 0 = off.
    w_date: float = 1.0
    # Question penalty: candidates whose text only asks ("What version does production run?", often
    # the query's own earlier wording, written back by the proxy) lose this many rank-1 reciprocal
    # ranks: they match a question's words best and answer nothing; 0 = off.
    w_ask: float = 1.0
    date_max_span_days: int = 14
    # Pseudo-relevance feedback: the ``prf_docs`` best fused seeds' windows give ``prf_terms``
    # expansion terms (tf x idf), weighted ``prf_beta`` in a second window-BM25 pass whose ranked
    # list joins the seed channels with weight ``w_prf``; n_prf = 0 = off. Expansion terms must
    # occur in at least two of the feedback windows.
    n_prf: int = 20
    w_prf: float = 0.5
    prf_docs: int = 3
    prf_terms: int = 10
    prf_beta: float = 0.3
    # Feedback text: "window" = each feedback seed's whole window, "own" = the seed turn only.
    prf_source: Literal["window", "own"] = "window"
    # Which index the feedback passes search: context windows or single turns.
    prf_target: Literal["window", "turn"] = "window"
    # Diversification of the final top k (greedy): a candidate's score is multiplied by ``div_adj``
    # while a window neighbour of it is already taken, and by ``div_session`` per already taken
    # candidate of its session. 1.0 = off.
    # Session focus: rank term (weight) of the candidate's session score = sum of its ``sess_top``
    # best turn BM25 scores (a session that talks about the query's subject at length); 0 = off.
    w_rank_sess: float = 0.5
    sess_top: int = 3
    div_adj: float = 1.0
    div_session: float = 1.0
    tension_threshold: float = TENSION_THRESHOLD
    max_chars: int = 8000
    truncation_marker: str = " …[truncated]"
    time_budget_ms: float = 200.0


@dataclass(frozen=True, slots=True)
class Explanation:
    channels: dict[str, int | None]
    seed: bool
    path: tuple[int, ...]
    hops: int
    parts: dict[str, float | None]


@dataclass(frozen=True, slots=True)
class Hit:
    node_id: int
    local: int
    score: float
    text: str
    kind: int
    explanation: Explanation


@dataclass(frozen=True, slots=True)
class Seed:
    node_id: int
    local: int
    activation: float
    lexical_rank: int | None
    vector_rank: int | None


@dataclass(frozen=True, slots=True)
class ResonateResult:
    hits: tuple[Hit, ...]
    seeds: tuple[Seed, ...]
    depth: int
    activated_count: int
    elapsed_ms: float
    truncated: bool
    dropped_for_chars: int
    hops_done: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def seed_ids(self) -> tuple[int, ...]:
        return tuple(s.node_id for s in self.seeds)

    @property
    def node_ids(self) -> tuple[int, ...]:
        return tuple(h.node_id for h in self.hits)
