"""Memory writes. Leaves are written verbatim, embedded and linked before the call returns;
LLM work (decomposition, abstraction, conflicts) is enqueued after commit."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from assets import audit
from nylon_project import events
from teams.auth import Actor
from teams.models import Team

from .embedding import get_embedder
from .engine.weave import EDGE_WEIGHTS, turn_text, weave_silks
from .models import Edge, EdgeKind, MemorySession, Node, NodeKind, SourceKind, Visibility

log = logging.getLogger("nylon.memory")

MAX_TEXT_CHARS = 20_000
SIMILAR_PER_NODE = 3
SIMILAR_MIN_COSINE = 0.82
ENTITY_LINKS_PER_ENTITY = 2


@dataclass(frozen=True)
class TurnIn:
    text: str
    speaker: str = ""
    occurred_at: datetime | None = None
    event_id: str = ""
    caption: str = ""
    metadata: dict | None = None


@dataclass(frozen=True)
class WeaveResult:
    node_ids: list[int]
    event_ids: dict[str, int]
    created: int
    embedded: bool
    session_key: str


def _owner_fields(actor: Actor) -> dict:
    if actor.agent is not None:
        return {"owner_agent": actor.agent, "owner_user": None}
    return {"owner_user": actor.user, "owner_agent": None}


def _check_scope(actor: Actor, visibility: str, team: Team | None) -> Team | None:
    if visibility == Visibility.TEAM:
        if team is None:
            if actor.agent is not None and actor.agent.team_id:
                return actor.agent.team
            raise ValidationError({"team_id": ["Team visibility needs a team."]})
        if actor.agent is not None:
            if team.id != actor.agent.team_id:
                raise ValidationError({"team_id": ["An agent writes only to its own team."]})
        elif team.id not in actor.team_ids and not actor.is_org_admin:
            raise ValidationError({"team_id": ["You are not a member of this team."]})
    return team


def weave_session(
    *,
    actor: Actor,
    turns: Sequence[TurnIn],
    session_key: str = "",
    visibility: str = Visibility.PRIVATE,
    team: Team | None = None,
    source_kind: str = SourceKind.API,
    end_session: bool = False,
    request_id: str = "",
) -> WeaveResult:
    if not turns:
        raise ValidationError({"turns": ["At least one turn is required."]})
    team = _check_scope(actor, visibility, team)
    now = timezone.now()
    texts = [turn_text(t.text, t.caption) for t in turns]
    for i, text in enumerate(texts):
        if not text.strip():
            raise ValidationError({"turns": {str(i): {"text": ["Empty text."]}}})
        if len(text) > MAX_TEXT_CHARS:
            raise ValidationError({"turns": {str(i): {"text": [f"Longer than {MAX_TEXT_CHARS} characters."]}}})
    # Embedding happens before the transaction: no row locks are held while the model runs.
    vectors = get_embedder().passages(texts)
    return _write_session(actor=actor, turns=turns, texts=texts, vectors=vectors, session_key=session_key,
                          visibility=visibility, team=team, source_kind=source_kind, now=now,
                          end_session=end_session, request_id=request_id)


@transaction.atomic
def _write_session(*, actor, turns, texts, vectors, session_key, visibility, team, source_kind, now,
                   end_session, request_id) -> WeaveResult:
    owner = _owner_fields(actor)
    wanted = [t.event_id for t in turns if t.event_id]
    existing: dict[str, int] = {}
    if wanted:
        existing = dict(
            Node.objects.filter(org=actor.org, event_id__in=wanted, **owner).values_list("event_id", "id")
        )
    session = None
    last_seq = -1
    last_node_id = None
    if session_key:
        session, _ = MemorySession.objects.select_for_update().get_or_create(
            org=actor.org, key=session_key, **owner,
            defaults={"started_at": turns[0].occurred_at or now, "last_turn_at": now},
        )
        prev = (Node.objects.filter(org=actor.org, session_key=session_key, kind=NodeKind.LEAF, **owner)
                .order_by("-seq").values_list("id", "seq").first())
        if prev:
            last_node_id, last_seq = prev

    new_nodes: list[Node] = []
    order: list[tuple[str, int | None]] = []  # (event_id, index into new_nodes or None)
    seen_events: dict[str, int] = {}
    for i, (t, text) in enumerate(zip(turns, texts, strict=True)):
        if t.event_id and t.event_id in existing:
            order.append((t.event_id, None))
            continue
        if t.event_id and t.event_id in seen_events:  # duplicate inside one request
            order.append((t.event_id, seen_events[t.event_id]))
            continue
        occurred = t.occurred_at or now
        silks = weave_silks(t.text, occurred_at=occurred)
        last_seq += 1
        vec = vectors[i] if vectors is not None else None
        node = Node(
            org=actor.org, team=team, visibility=visibility, kind=NodeKind.LEAF, text=text,
            speaker=t.speaker[:200], fact=silks.fact, entities=[e[:200] for e in silks.entities],
            tags=[x[:200] for x in silks.tags], occurred_at=occurred, session_key=session_key, seq=last_seq,
            valid_from=occurred, time_refs=silks.time_refs, valence=silks.valence, intensity=silks.intensity,
            source_kind=source_kind, source_user=actor.user, source_agent=actor.agent, event_id=t.event_id,
            metadata={**(t.metadata or {}), "time_terms": silks.time_terms} if silks.time_terms else
            dict(t.metadata or {}),
            tension_updated_at=now, embedding=vec, embedded=vec is not None, **owner,
        )
        if t.event_id:
            seen_events[t.event_id] = len(new_nodes)
        order.append((t.event_id, len(new_nodes)))
        new_nodes.append(node)

    Node.objects.bulk_create(new_nodes)
    edges = _link(actor, owner, new_nodes, last_node_id)
    Edge.objects.bulk_create(edges, ignore_conflicts=True)

    node_ids = [existing[e] if idx is None else new_nodes[idx].id for e, idx in order]
    event_ids = {e: nid for (e, _), nid in zip(order, node_ids, strict=True) if e}
    if session is not None and new_nodes:
        session.turn_count += len(new_nodes)
        session.last_turn_at = max(n.occurred_at for n in new_nodes)
        if end_session:
            session.ended_at = now
            session.abstraction_status = MemorySession.Status.PENDING
        elif session.ended_at is not None:
            # New turns reopen an ended session: the idle tick ends it again, and abstraction then
            # covers only the leaves past what was already abstracted.
            session.ended_at = None
            session.abstraction_status = MemorySession.Status.OPEN
            session.reflection_status = MemorySession.Status.OPEN
        session.save()
    if new_nodes:
        audit.record(actor=actor, action="memory.weave", object_type="session", object_id=session_key or "-",
                     detail={"nodes": len(new_nodes), "edges": len(edges)}, request_id=request_id)
        events.publish(actor.org.id, "memory.woven", {"node_ids": [n.id for n in new_nodes][:50],
                                                      "session_key": session_key})
        _after_commit(org_id=actor.org.id, node_ids=[n.id for n in new_nodes],
                      ended_session_id=session.id if session is not None and end_session else None)
    return WeaveResult(node_ids=node_ids, event_ids=event_ids, created=len(new_nodes),
                       embedded=vectors is not None, session_key=session_key)


def _after_commit(**kwargs) -> None:
    """Background work (conflict detection, abstraction of an ended session) once committed."""
    from functools import partial

    from reflection import hooks

    transaction.on_commit(partial(hooks.after_weave, **kwargs), robust=True)


def _edge(actor, src_id: int, dst_id: int, kind: str) -> Edge:
    return Edge(org=actor.org, src_id=src_id, dst_id=dst_id, kind=kind, weight=EDGE_WEIGHTS[kind])


def _link(actor: Actor, owner: dict, nodes: list[Node], prev_id: int | None) -> list[Edge]:
    """temporal-next inside the session, entity co-mention and nearest neighbours of the owner."""
    if not nodes:
        return []
    edges: list[Edge] = []
    chain = ([prev_id] if prev_id else []) + [n.id for n in nodes]
    for a, b in zip(chain, chain[1:], strict=False):
        edges.append(_edge(actor, a, b, EdgeKind.TEMPORAL_NEXT))
    new_ids = {n.id for n in nodes}
    owner_sql, owner_id = ("owner_agent_id", owner["owner_agent"].id) if owner["owner_agent"] else (
        "owner_user_id", owner["owner_user"].id)
    with connection.cursor() as cur:
        # Entity co-mention: link to the latest earlier nodes of this owner naming the same entity.
        entities = sorted({e for n in nodes for e in n.entities})
        if entities:
            cur.execute(
                f"""SELECT e, ids FROM unnest(%s::varchar[]) AS e, LATERAL (
                        SELECT array_agg(id) AS ids FROM (
                          SELECT id FROM memory_node WHERE org_id = %s AND {owner_sql} = %s
                            AND deleted_at IS NULL AND entities @> ARRAY[e]::varchar[] AND NOT (id = ANY(%s))
                          ORDER BY id DESC LIMIT %s) s) x""",
                [entities, actor.org.id, owner_id, list(new_ids), ENTITY_LINKS_PER_ENTITY],
            )
            by_entity = {e: list(ids or []) for e, ids in cur.fetchall()}
            for n in nodes:
                for e in n.entities:
                    earlier = by_entity.setdefault(e, [])
                    for other in earlier[:ENTITY_LINKS_PER_ENTITY]:
                        edges.append(_edge(actor, other, n.id, EdgeKind.ENTITY))
                    earlier.insert(0, n.id)  # later turns of this batch link to this one first
        # Similar: nearest earlier nodes of the owner by cosine, kept only above a threshold.
        # One LATERAL query for the whole batch (each probe uses the HNSW index).
        with_vec = [n.id for n in nodes if n.embedding is not None]
        if with_vec:
            cur.execute(
                f"""SELECT n.id, c.id, c.sim FROM memory_node n, LATERAL (
                        SELECT m.id, 1 - (m.embedding <=> n.embedding) AS sim FROM memory_node m
                        WHERE m.org_id = %s AND m.{owner_sql} = %s AND m.deleted_at IS NULL
                          AND m.embedding IS NOT NULL AND NOT (m.id = ANY(%s))
                        ORDER BY m.embedding <=> n.embedding LIMIT %s) c
                    WHERE n.id = ANY(%s)""",
                [actor.org.id, owner_id, list(new_ids), SIMILAR_PER_NODE, with_vec],
            )
            for nid, other, sim in cur.fetchall():
                if sim >= SIMILAR_MIN_COSINE:
                    edges.append(_edge(actor, other, nid, EdgeKind.SIMILAR))
    return edges


@transaction.atomic
def node_delete(*, actor: Actor, node: Node, request_id: str = "") -> None:
    """Soft delete: the node leaves every index; its row stays for audit and lineage."""
    Node.objects.filter(pk=node.pk).update(deleted_at=timezone.now())
    audit.record(actor=actor, action="memory.delete", object_type="node", object_id=node.id, request_id=request_id)
    events.publish(actor.org.id, "memory.deleted", {"node_id": node.id})


def record_recall(*, node_ids: list[int]) -> None:
    """Frequency silk: each recall counts, and refreshes last_recalled_at."""
    if node_ids:
        now = timezone.now()
        # Recall also restarts the decay clock: a memory in use should not fade.
        Node.objects.filter(id__in=node_ids).update(mentions=F("mentions") + 1, last_recalled_at=now,
                                                    tension_updated_at=now)


def reembed_missing(*, org_id: int | None = None, batch: int = 256) -> int:
    """Fill vectors of nodes written while the embedder failed; returns how many were filled."""
    qs = Node.objects.filter(embedded=False, deleted_at__isnull=True)
    if org_id is not None:
        qs = qs.filter(org_id=org_id)
    done = 0
    embedder = get_embedder()
    while True:
        rows = list(qs.order_by("id").values_list("id", "text")[:batch])
        if not rows:
            return done
        vectors = embedder.passages([t for _, t in rows])
        if vectors is None:
            return done  # still down; the next run retries
        with transaction.atomic():
            for (nid, _), vec in zip(rows, vectors, strict=True):
                Node.objects.filter(id=nid, embedded=False).update(embedding=vec, embedded=True)
        done += len(rows)
