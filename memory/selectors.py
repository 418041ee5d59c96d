"""Memory reads, org first. Resonate runs on the per-org engine cache; the engine only ever sees
nodes the actor may read (the visibility mask is applied inside seeding and diffusion)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
from django.db.models import Q, QuerySet

from assets.access import granted_node_ids, granted_node_sql, restricted_node_q
from teams.auth import Actor

from .cache import get_cache, now_days
from .embedding import get_embedder
from .engine import ResonateParams, ResonateResult, Scope, TenantIndex, resonate
from .engine.router import RoutePlan, route
from .engine.tokenize import tokenize
from .fallback import resonate_sql
from .models import EMBEDDING_DIM, IngestBatch, Node, Visibility


def visible_nodes(*, actor: Actor) -> QuerySet[Node]:
    """The SQL twin of the engine mask: what the actor may read."""
    own = Q(owner_agent=actor.agent) if actor.agent is not None else Q(owner_user=actor.user)
    q = (Q(visibility=Visibility.PRIVATE) & own) | Q(visibility=Visibility.ORG)
    q |= Q(visibility=Visibility.TEAM) & (own | Q(team_id__in=list(actor.team_ids)))
    q |= restricted_node_q(actor)  # restricted: owner + ACL grantees only (assets.access)
    return Node.objects.filter(org=actor.org, deleted_at__isnull=True).filter(q)


def node_get(*, actor: Actor, node_id: int) -> Node | None:
    return visible_nodes(actor=actor).filter(id=node_id).first()


def ingest_batch_get(*, actor: Actor, batch_id: int) -> IngestBatch | None:
    """A bulk write's batch, for the owner who wrote it only (anyone else: None, a 404)."""
    own = {"owner_agent": actor.agent} if actor.agent is not None else {"owner_user": actor.user}
    return IngestBatch.objects.filter(org=actor.org, id=batch_id, **own).first()


@dataclass(frozen=True)
class ResonateOutcome:
    result: ResonateResult
    plan: RoutePlan
    params: ResonateParams
    embed_ms: float
    total_ms: float
    vector_used: bool
    served_by: str = "engine"
    # The engine's index and the caller's mask over it, when the engine served (None: Postgres did),
    # for callers that weigh the query in what the caller may read (assets.context.query_terms).
    index: TenantIndex | None = None
    allowed: np.ndarray | None = None


def _usable_vector(vec, dim: int) -> bool:
    """What the engine searches with: ``dim`` finite values, not all zero."""
    v = np.asarray(vec, dtype=np.float32).reshape(-1)
    return v.size == dim and bool(np.all(np.isfinite(v))) and bool(v.any())


def visible_mask(actor: Actor, index, granted: list[int] | None = None) -> np.ndarray:
    """The index rows ``actor`` may read. Call it under the org's read lock (``EngineCache.reading``):
    ``has_scope`` and the masks read an index a catch-up may be growing. ``granted``: the actor's
    node grants when already read (``granted_node_ids``), from a snapshot no older than the index's."""
    # Restricted nodes: granted ones from the ACL table (queried only when the org has any), own
    # ones from the index (selecting them with assets.access.restricted_node_q scans the org's
    # nodes: ~0.3 s at 100k).
    if not index.has_scope(Scope.RESTRICTED):
        granted = []
    elif granted is None:
        granted = granted_node_ids(actor)
    restricted = np.concatenate((np.asarray(granted, dtype=np.int64), index.restricted_owned_by([actor.owner_key])))
    return index.visibility_mask(owner_keys=[actor.owner_key], team_ids=list(actor.team_ids),
                                 restricted_allowed_node_ids=restricted)


def resonate_for(
    *,
    actor: Actor,
    query: str,
    k: int = 10,
    depth: int | None = None,
    overrides: dict | None = None,
    query_vec: np.ndarray | None = None,
    force_sql: bool = False,
) -> ResonateOutcome:
    t0 = time.perf_counter()
    # The freshness probe also reads the actor's grants (same statement, same snapshot): one round
    # trip fewer on every warm read. Not used when a catch-up ran (``visible_mask`` asks them then).
    index, probed = (None, None) if force_sql else get_cache().get_or_none_with(actor.org.id, granted_node_sql(actor))
    plan = route(query)
    params = ResonateParams(k=k, depth=plan.depth if depth is None else depth)
    if overrides:
        params = replace(params, **overrides)
    t_embed = time.perf_counter()
    if query_vec is None:
        query_vec = get_embedder().query(query)
    embed_ms = (time.perf_counter() - t_embed) * 1000
    if query_vec is not None and not _usable_vector(query_vec, EMBEDDING_DIM if index is None else index.vectors.dim):
        query_vec = None  # wrong dimension, non-finite or zero: lexical only, reported as degraded
    allowed = None
    if index is None:
        current = visible_nodes(actor=actor).filter(valid_to__isnull=True)  # as the index: not superseded
        result = resonate_sql(current, query=query, query_vec=query_vec, params=params,
                              now_days=now_days())
    else:
        with get_cache().reading(actor.org.id):  # no concurrent catch-up appends to it meanwhile
            # grants older than the index (a catch-up between the probe and this lock) are asked again
            granted = probed.rows if probed is not None and probed.current(index) else None
            allowed = visible_mask(actor, index, granted)
            result = resonate(index, query_text=query, query_tokens=tokenize(query), query_vec=query_vec,
                              allowed=allowed, params=params, now_days=now_days())
    return ResonateOutcome(result=result, plan=plan, params=params, embed_ms=embed_ms,
                           total_ms=(time.perf_counter() - t0) * 1000, vector_used=query_vec is not None,
                           served_by="engine" if index is not None else "postgres", index=index, allowed=allowed)
