"""Memory writes. Leaves are written verbatim, embedded and linked before the call returns;
LLM work (decomposition, abstraction, conflicts) is enqueued after commit."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import NamedTuple

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Q
from django.db.models.functions import MD5
from django.utils import timezone
from psycopg.errors import UniqueViolation
from psycopg.types import TypeInfo
from rest_framework.exceptions import ValidationError

from assets import audit
from nylon_project import events
from teams.auth import Actor
from teams.models import Team

from .embedding import get_embedder
from .engine.weave import EDGE_WEIGHTS, turn_text, weave_silks
from .models import (
    Edge,
    EdgeKind,
    Followup,
    IngestBatch,
    MemorySession,
    Node,
    NodeKind,
    SourceKind,
    Visibility,
)
from .nearest import nearest_sql
from .vector_adapters import register_vector_adapters

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


class _Stored(NamedTuple):
    """What a replay of a stored event id is compared with (the text as an MD5: a bulk replay may
    name 10,000 of them)."""

    id: int
    text_md5: str
    speaker: str
    session_key: str
    visibility: str
    team_id: int | None
    occurred_at: datetime


class ChangedReplay(ValidationError):
    """409 ``event_id_reused``: an event id the writer already stored, sent again with another text,
    speaker or session, or with a visibility, team or time it names and the stored memory does not have
    (a retry that says "private" of a memory stored for the team would otherwise answer success and
    leave it readable by the team). An event id is a retry's key: such a write used to answer the stored memory
    as if it were the new one (and echo the new session key), the new content lost without a word.
    Nothing is written. A ValidationError (with ``detail`` keyed by turn, as the path's 400s) so
    that callers that report those by line (``nylon_ingest``) report this one too."""

    status_code = 409
    default_code = "event_id_reused"

    def __init__(self, *, clashes: list[tuple[object, str, int, list[str]]], detail: dict):
        # clashes: (where: the turn's index, or (session, turn) in bulk; event_id; stored node id; what differs)
        self.clashes = clashes
        if len(clashes) == 1:
            _, eid, nid, what = clashes[0]
            self.message = (f"event_id {eid!r} is already stored (memory {nid}) with a different "
                            f"{_and(what)}: an event_id is the key of a retry of the same turn. Send new "
                            "content with a new event_id; nothing was written.")
        else:
            named = ", ".join(repr(eid) for _, eid, _, _ in clashes[:5]) + (", …" if len(clashes) > 5 else "")
            self.message = (f"{len(clashes)} event_ids are already stored with different content ({named}): an "
                            "event_id is the key of a retry of the same turn. Send new content with new "
                            "event_ids; nothing was written.")
        super().__init__(detail, code=self.default_code)


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def _replay_differs(stored: _Stored, *, text: str, speaker: str, session_key: str, visibility: str | None = None,
                    team: Team | None = None, occurred_at: datetime | None = None) -> list[str]:
    """What a turn sent again under a stored event id changes: [] for a true replay. Visibility, team
    and time count only when the retry names them: left out, they are the writer's defaults, which
    name nothing the stored memory must have."""
    when = None
    if occurred_at is not None:  # a naive time as the ORM stores it: in the default zone
        when = (timezone.make_aware(occurred_at, timezone.get_default_timezone()) if timezone.is_naive(occurred_at)
                else occurred_at)
    return [name for name, differs in (("text", stored.text_md5 != _md5(text)),
                                       ("speaker", stored.speaker != speaker[:200]),
                                       ("session_key", stored.session_key != session_key),
                                       ("visibility", visibility is not None and stored.visibility != visibility),
                                       ("team_id", team is not None and stored.team_id != team.id),
                                       ("occurred_at", when is not None and stored.occurred_at != when))
            if differs]


def _clash_message(nid: int, what: list[str]) -> str:
    return f"Already stored (memory {nid}) with a different {_and(what)}; an event_id is a retry's key."


# The proxy keys a model's answer by the question it answers, so a retried question that samples
# another answer keeps the first one stored (proxy.writeback.turns_for): there, a changed replay is
# expected and not refused.
_KEEP_FIRST_SOURCES = frozenset({SourceKind.PROXY})


def _owner_fields(actor: Actor) -> dict:
    if actor.agent is not None:
        return {"owner_agent": actor.agent, "owner_user": None}
    return {"owner_user": actor.user, "owner_agent": None}


def default_visibility(actor: Actor) -> str:
    """What a write that names no visibility gets: an agent's own default (teams.Agent.default_visibility),
    private for a person."""
    if actor.agent is not None:
        return actor.agent.default_visibility or Visibility.PRIVATE
    return Visibility.PRIVATE


def _check_scope(actor: Actor, visibility: str, team: Team | None) -> Team | None:
    if visibility == Visibility.TEAM and team is None:
        if actor.agent is not None and actor.agent.team_id:
            return actor.agent.team
        raise ValidationError({"team_id": ["Team visibility needs a team."]})
    # Whatever the visibility: a node's team gives that team's admins write rights over it
    # (assets.access._writable), so a writer may only name a team of its own.
    if team is not None:
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
    visibility: str | None = None,
    team: Team | None = None,
    source_kind: str = SourceKind.API,
    end_session: bool = False,
    request_id: str = "",
) -> WeaveResult:
    """``visibility`` None: the writer's default (``default_visibility``)."""
    if not turns:
        raise ValidationError({"turns": ["At least one turn is required."]})
    # what a replay must match: the scope the caller named, not the defaults it left to us
    named = {"visibility": visibility, "team": team}
    visibility = visibility or default_visibility(actor)
    team = _check_scope(actor, visibility, team)
    now = timezone.now()
    texts = [turn_text(t.text, t.caption) for t in turns]
    for i, text in enumerate(texts):
        problem = _text_problem(text)
        if problem:
            raise ValidationError({"turns": {str(i): {"text": [problem]}}})
    # Embedding happens before the transaction: no row locks are held while the model runs.
    vectors = get_embedder().passages(texts)
    write = partial(_write_session, actor=actor, turns=turns, texts=texts, vectors=vectors, session_key=session_key,
                    visibility=visibility, team=team, source_kind=source_kind, now=now, end_session=end_session,
                    request_id=request_id, named=named)
    try:
        return write()
    except IntegrityError as exc:
        # A concurrent weave (a client's retry while the first attempt still runs) committed one of
        # these event ids after our check: once more, which now finds and returns it (a 201, not a 500).
        if _constraint(exc) != "node_event_idempotent":
            raise
        log.info("weave of %s met a concurrent write of the same event id; writing again", actor.label)
        return write()


def _constraint(exc: Exception) -> str:
    """The name of the constraint a database error violated ("" when unknown)."""
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) or ""


def turn_problem(turn: TurnIn) -> str:
    """Why a turn's stored text (text and caption together) is refused, or ""."""
    return _text_problem(turn_text(turn.text, turn.caption))


@transaction.atomic
def _write_session(*, actor, turns, texts, vectors, session_key, visibility, team, source_kind, now,
                   end_session, request_id, named: dict) -> WeaveResult:
    owner = _owner_fields(actor)
    wanted = [t.event_id for t in turns if t.event_id]
    stored: dict[str, _Stored] = {}
    if wanted:
        # Live memories only (as node_event_idempotent): a deleted memory written again is new.
        stored = {eid: _Stored(*rest) for eid, *rest in
                  Node.objects.filter(org=actor.org, event_id__in=wanted, deleted_at__isnull=True, **owner)
                  .values_list("event_id", "id", MD5("text"), "speaker", "session_key", "visibility", "team_id",
                               "occurred_at")}
    if stored and source_kind not in _KEEP_FIRST_SOURCES:
        clashes = []
        for i, (t, text) in enumerate(zip(turns, texts, strict=True)):
            if t.event_id in stored:
                what = _replay_differs(stored[t.event_id], text=text, speaker=t.speaker, session_key=session_key,
                                       occurred_at=t.occurred_at, **named)
                if what:
                    clashes.append((i, t.event_id, stored[t.event_id].id, what))
        if clashes:
            raise ChangedReplay(clashes=clashes, detail={"turns": {
                str(i): {"event_id": [_clash_message(nid, what)]} for i, _, nid, what in clashes}})
    existing = {eid: s.id for eid, s in stored.items()}
    session = None
    last_seq = -1
    last_node_id = None
    if session_key:
        session, _ = MemorySession.objects.select_for_update(no_key=True).get_or_create(
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
        last_seq += 1
        vec = vectors[i] if vectors is not None else None
        node = Node(
            org=actor.org, team=team, visibility=visibility, kind=NodeKind.LEAF, text=text,
            occurred_at=occurred, session_key=session_key, seq=last_seq, valid_from=occurred,
            source_kind=source_kind, source_user=actor.user, source_agent=actor.agent, event_id=t.event_id,
            tension_updated_at=now, embedding=vec, embedded=vec is not None, **owner, **_leaf_silks(t, occurred),
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
    # end_session holds even when every turn was already stored (a retried or re-sent last turn, the
    # only way to end a session since turns may not be empty); an already ended session stays as it is.
    ends = (session is not None and end_session
            and (bool(new_nodes) or (session.ended_at is None and session.turn_count > 0)))
    if session is not None and (new_nodes or ends):
        if new_nodes:
            session.turn_count += len(new_nodes)
            session.last_turn_at = max(n.occurred_at for n in new_nodes)
        if ends:
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
        # The session's row id, not its key: a session key names someone's (maybe private) session,
        # and org admins read the whole audit log, while the live feed shows a key only to readers
        # of its nodes (frontend.consumers). The writer finds its entry by the request id its
        # answer carried (X-Request-Id).
        audit.record(actor=actor, action="memory.weave", object_type="session",
                     object_id=session.id if session is not None else "-",
                     detail={"nodes": len(new_nodes), "edges": len(edges)}, request_id=request_id)
        events.publish(actor.org.id, "memory.woven", {"node_ids": [n.id for n in new_nodes][:50],
                                                      "session_key": session_key})
        followup_create(org_id=actor.org.id, node_ids=[n.id for n in new_nodes])
    if ends:
        _after_commit(ended_session_id=session.id)
    return WeaveResult(node_ids=node_ids, event_ids=event_ids, created=len(new_nodes),
                       embedded=vectors is not None, session_key=session_key)


def _leaf_silks(t: TurnIn, occurred: datetime) -> dict:
    """The silk columns of a verbatim leaf: one definition for weave and bulk ingest."""
    silks = weave_silks(t.text, occurred_at=occurred)
    return {
        "speaker": t.speaker[:200], "fact": silks.fact, "entities": [e[:200] for e in silks.entities],
        "tags": [x[:200] for x in silks.tags], "time_refs": silks.time_refs, "valence": silks.valence,
        "intensity": silks.intensity,
        "metadata": {**(t.metadata or {}), "time_terms": silks.time_terms} if silks.time_terms else
        dict(t.metadata or {}),
    }


def _after_commit(*, ended_session_id: int) -> None:
    """Abstraction of an ended session once committed (durable without the message: the session is
    PENDING, which the reflection tick re-finds)."""
    from reflection import hooks

    transaction.on_commit(partial(hooks.after_weave, ended_session_id=ended_session_id), robust=True)


@transaction.atomic
def followup_create(*, org_id: int, node_ids: Sequence[int]) -> Followup:
    """Record, in the caller's transaction, that these new nodes still need their conflict check,
    and send the check once that transaction commits. The row is the durable part: the task deletes
    it when done, and ``enqueue_pending_followups`` re-sends it if the message never arrived."""
    from reflection import hooks

    followup = Followup.objects.create(org_id=org_id, kind=Followup.Kind.CONFLICTS, node_ids=list(node_ids))
    transaction.on_commit(partial(hooks.send_followup, followup_id=followup.id, org_id=org_id,
                                  node_ids=list(node_ids)), robust=True)
    return followup


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
    links = _neighbour_links(org_id=actor.org.id, owner=_owner_column(owner),
                             nodes=[(n.id, n.entities, n.embedding is not None) for n in nodes])
    edges.extend(_edge(actor, src, dst, kind) for src, dst, kind in links)
    return edges


def _owner_column(owner: dict) -> tuple[str, int]:
    """(column, id) of an owner: ``owner_agent_id`` or ``owner_user_id``."""
    if owner.get("owner_agent") is not None:
        return "owner_agent_id", owner["owner_agent"].id
    return "owner_user_id", owner["owner_user"].id


def _neighbour_links(*, org_id: int, owner: tuple[str, int], nodes: list[tuple[int, list[str], bool]],
                     before_id: int | None = None) -> list[tuple[int, int, str]]:
    """(src, dst, kind) links from earlier nodes of the owner to ``nodes`` ((id, entities, has
    vector), in write order): entity co-mention and, above a cosine threshold, nearest neighbours.

    Earlier means not one of ``nodes`` and, when ``before_id`` is given (deferred linking, where later
    writes may already exist), an id below it."""
    if not nodes:
        return []
    links: list[tuple[int, int, str]] = []
    new_ids = [nid for nid, _, _ in nodes]
    owner_sql, owner_id = owner
    before = [before_id] if before_id is not None else []
    with connection.cursor() as cur:
        # Entity co-mention: link to the latest earlier nodes of this owner naming the same entity.
        entities = sorted({e for _, ents, _ in nodes for e in ents})
        if entities:
            cur.execute(
                f"""SELECT e, ids FROM unnest(%s::varchar[]) AS e, LATERAL (
                        SELECT array_agg(id) AS ids FROM (
                          SELECT id FROM memory_node WHERE org_id = %s AND {owner_sql} = %s
                            AND deleted_at IS NULL AND entities @> ARRAY[e]::varchar[] AND NOT (id = ANY(%s))
                            {"AND id < %s" if before else ""}
                          ORDER BY id DESC LIMIT %s) s) x""",
                [entities, org_id, owner_id, new_ids, *before, ENTITY_LINKS_PER_ENTITY],
            )
            by_entity = {e: list(ids or []) for e, ids in cur.fetchall()}
            for nid, ents, _ in nodes:
                for e in ents:
                    earlier = by_entity.setdefault(e, [])
                    for other in earlier[:ENTITY_LINKS_PER_ENTITY]:
                        links.append((other, nid, EdgeKind.ENTITY))
                    earlier.insert(0, nid)  # later turns of this batch link to this one first
        # Similar: nearest earlier nodes of the owner by cosine, kept only above a threshold.
        # One LATERAL query for the whole batch (memory/nearest.py: exact over the owner's recent
        # nodes, the HNSW index beyond them).
        with_vec = [nid for nid, _, has_vec in nodes if has_vec]
        if with_vec:
            where = f"""m.org_id = %(org)s AND m.{owner_sql} = %(owner)s AND m.deleted_at IS NULL
                        AND m.embedding IS NOT NULL AND NOT (m.id = ANY(%(new)s))
                        {"AND m.id < %(before)s" if before else ""}"""
            cur.execute(
                f"""SELECT n.id, c.id, c.sim FROM memory_node n, LATERAL (
                        {nearest_sql(where=where, query="n.embedding", limit="%(limit)s")}) c
                    WHERE n.id = ANY(%(with_vec)s)""",
                {"org": org_id, "owner": owner_id, "new": new_ids, "before": before_id,
                 "limit": SIMILAR_PER_NODE, "with_vec": with_vec},
            )
            for nid, other, sim in cur.fetchall():
                if sim >= SIMILAR_MIN_COSINE:
                    links.append((other, nid, EdgeKind.SIMILAR))
    return links


@dataclass(frozen=True)
class Deletion:
    node_id: int
    derived_ids: list[int]  # derivations deleted with it: no live source was left to them
    reinstated_ids: list[int] = field(default_factory=list)  # memories it had superseded, current again


@transaction.atomic
def node_delete(*, actor: Actor, node: Node, request_id: str = "") -> Deletion:
    """Soft delete: the node leaves every index; its row stays for audit and lineage. The caller
    has checked the write right over ``node`` (``assets.access.access_node(for_write=True)``).

    What was drawn from it goes with it when no live source is left to it: a fact (and a bridge
    drawn from such facts, and on down) restates its sources, so "… the staging database password
    is hunter2", abstracted from the deleted turn, kept serving the deleted words. Those are deleted
    on the strength of this delete, not of a write right over each: they are Nylon's restatements of
    memories that are now all deleted (written with their sources' owner, and a scope no wider than
    theirs). A derivation with another
    live source stays: it may restate that source, which is still a memory. It may also still
    restate words of the deleted one (an LLM fact drawn from two turns); deleting the fact itself
    removes those (docs/permissions.md). Each cascaded deletion is audited and published as the
    delete is, naming the node it followed.

    A current memory that a conflict's resolution kept over others hands their place back: deleting
    "We moved to Postgres 16" after it superseded "We use Postgres 15" left no answer about the
    database at all, the old statement retired by a decision about a memory that no longer exists.
    What it superseded is current again (``_reinstate_superseded``), each audited
    (``memory.reinstate``) and published."""
    now = timezone.now()
    with connection.cursor() as cur:
        cur.execute("UPDATE memory_node SET deleted_at = %s WHERE id = %s AND deleted_at IS NULL "
                    "RETURNING valid_to IS NULL", [now, node.pk])
        row = cur.fetchone()
    was_current = bool(row and row[0])
    derived, derived_current = _orphaned_derivations(org_id=node.org_id, deleted_id=node.pk, now=now)
    # A fact deleted with its turn may have been kept over another fact too.
    current = ([node.pk] if was_current else []) + derived_current
    reinstated = _reinstate_superseded(org_id=node.org_id, deleted_ids=current) if current else []
    detail = ({"derived_deleted": derived} if derived else {}) | ({"reinstated": reinstated} if reinstated else {})
    audit.record(actor=actor, action="memory.delete", object_type="node", object_id=node.id,
                 detail=detail or None, request_id=request_id)
    events.publish(actor.org.id, "memory.deleted", {"node_id": node.id})
    for nid in derived:
        audit.record(actor=actor, action="memory.delete", object_type="node", object_id=nid,
                     reason="sources_deleted", detail={"deleted_with": node.id}, request_id=request_id)
        events.publish(actor.org.id, "memory.deleted", {"node_id": nid, "deleted_with": node.id})
    for nid in reinstated:
        audit.record(actor=actor, action="memory.reinstate", object_type="node", object_id=nid,
                     reason="superseder_deleted", detail={"superseded_by": node.id}, request_id=request_id)
        events.publish(actor.org.id, "memory.reinstated", {"node_id": nid, "superseded_by": node.id})
    return Deletion(node_id=node.id, derived_ids=derived, reinstated_ids=reinstated)


# What a deleted node superseded (``supersedes`` edges out of it), with the deleted node of each
# edge: a deleted one is walked through to what it had superseded in turn.
_SUPERSEDED_BY = """
SELECT e.dst_id, n.deleted_at IS NOT NULL FROM memory_edge e JOIN memory_node n ON n.id = e.dst_id
WHERE e.org_id = %(org)s AND e.kind = 'supersedes' AND e.src_id = ANY(%(frontier)s)
"""
# Of those, the ones to make current again: still memories, retired, superseded by no node that is
# still a memory (another conflict's decision still holds), and, for a derivation, with a current
# source (a fact superseded with its leaf comes back with the leaf, not without it).
_REINSTATE = """
UPDATE memory_node t SET valid_to = NULL
WHERE t.id = ANY(%(ids)s) AND t.deleted_at IS NULL AND t.valid_to IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM memory_edge e JOIN memory_node s ON s.id = e.src_id
                  WHERE e.dst_id = t.id AND e.kind = 'supersedes' AND s.deleted_at IS NULL)
  AND (coalesce(cardinality(t.source_node_ids), 0) = 0
       OR EXISTS (SELECT 1 FROM memory_node s WHERE s.id = ANY(t.source_node_ids)
                  AND s.deleted_at IS NULL AND s.valid_to IS NULL))
RETURNING t.id
"""


def _reinstate_superseded(*, org_id: int, deleted_ids: list[int]) -> list[int]:
    """Make current again, in the caller's transaction, what the just-deleted current nodes
    ``deleted_ids`` had superseded (through deleted nodes they had superseded, to what those had);
    returns their ids."""
    candidates: set[int] = set()
    seen = set(deleted_ids)
    frontier = list(deleted_ids)
    with connection.cursor() as cur:
        while frontier:
            cur.execute(_SUPERSEDED_BY, {"org": org_id, "frontier": frontier})
            frontier = []
            for dst, deleted in cur.fetchall():
                if dst in seen:
                    continue
                seen.add(dst)
                if deleted:
                    frontier.append(dst)
                else:
                    candidates.add(dst)
        out: list[int] = []
        if candidates:
            # Locked first, in their own statement: a resolution superseding one of them meanwhile
            # holds its row (``reflection.conflicts._resolve``), so this waits for it, and the
            # statements below (each with a new snapshot) see its supersedes edge.
            cur.execute("SELECT id FROM memory_node WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE",
                        [sorted(candidates)])
        # A derivation comes back once a source of it has: rounds until nothing changes.
        while candidates:
            cur.execute(_REINSTATE, {"ids": sorted(candidates)})
            got = {r[0] for r in cur.fetchall()}
            if not got:
                break
            out.extend(got)
            candidates -= got
    return sorted(out)


# The live derivations of the nodes in %(frontier)s, through the partial GIN index
# ``node_derived_sources`` (its condition repeated, so the planner may use it), locked in id order:
# two deletes of a fact's two sources at once each saw the other source still live and both kept
# the fact. Locked first, the second waits for the first, and its next statement sees that commit.
_DERIVED_OF = """
SELECT id FROM memory_node
WHERE org_id = %(org)s AND deleted_at IS NULL AND source_node_ids && %(frontier)s::bigint[]
  AND CASE WHEN source_node_ids IS NULL THEN NULL ELSE coalesce(array_length(source_node_ids, 1), 0) END > 0
ORDER BY id FOR NO KEY UPDATE
"""
# Of those, the ones no live source is left to (superseded sources are still memories: they count).
_ORPHANED = """
UPDATE memory_node d SET deleted_at = %(now)s
WHERE d.id = ANY(%(ids)s) AND d.deleted_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM memory_node s WHERE s.id = ANY(d.source_node_ids) AND s.deleted_at IS NULL)
RETURNING d.id, d.valid_to IS NULL
"""


def _orphaned_derivations(*, org_id: int, deleted_id: int, now: datetime) -> tuple[list[int], list[int]]:
    """Delete, in the caller's transaction, the derivations left without a live source once
    ``deleted_id`` is deleted, and theirs in turn (a bridge of those facts); returns their ids, and
    those of them that were current (not superseded). Derivations superseded by a conflict's
    resolution count too: the nodes API still serves them. Each ``UPDATE`` stamps a new ``txid``,
    so every engine cache drops them at its next catch-up."""
    out: list[int] = []
    current: list[int] = []
    frontier = [deleted_id]
    with connection.cursor() as cur:
        while frontier:
            cur.execute(_DERIVED_OF, {"org": org_id, "frontier": frontier})
            candidates = [r[0] for r in cur.fetchall()]
            if not candidates:
                break
            cur.execute(_ORPHANED, {"ids": candidates, "now": now})
            rows = sorted(cur.fetchall())
            frontier = [r[0] for r in rows]
            out.extend(frontier)
            current.extend(r[0] for r in rows if r[1])
    return out, current


def lock_live_sources(*, org_id: int, node_ids: Sequence[int]) -> set[int]:
    """Which of these nodes are live, locked FOR SHARE until the caller's transaction ends: for a
    writer of derivations (facts, bridges), drafted from them outside any lock. A delete committed
    before this is seen here, and one after it waits for the derivations to commit, whose rows its
    cascade then finds (``node_delete``); without the lock a fact written from a turn deleted
    meanwhile was never deleted. In id order, as every multi-row lock of nodes."""
    ids = sorted({int(i) for i in node_ids})
    if not ids:
        return set()
    with connection.cursor() as cur:
        cur.execute("SELECT id FROM memory_node WHERE org_id = %s AND id = ANY(%s) AND deleted_at IS NULL "
                    "ORDER BY id FOR SHARE", [org_id, ids])
        return {r[0] for r in cur.fetchall()}


def record_recall(*, node_ids: Sequence[int]) -> None:
    """Frequency silk: each recall counts, and refreshes last_recalled_at. Buffered as marks that
    ``flush_recalls`` applies (``RecallMark`` says why); a node named twice in one call counts once."""
    ids = sorted({int(i) for i in node_ids})
    if ids:
        with connection.cursor() as cur:
            cur.execute("INSERT INTO memory_recallmark (node_id, at) SELECT unnest(%s::bigint[]), now()", [ids])


RECALL_FLUSH_CHUNK = 20_000
RECALL_FLUSH_LOCK = 0x4E594C5245434C  # pg advisory lock key: one flush at a time per database

# A node that is the older side of an open conflict (``reflection.Conflict``: the other node
# happened later, as ``assets.context`` orders the two) is not reinforced: its mentions and decay
# clock stay, only ``last_recalled_at`` moves. Agents recall both sides of a correction; counted,
# the stale statement gained tension from every recall ("the ads budget is 40k", recalled 19 times,
# reached 2.0 and outranked "we cut the ads budget to 25k" at 1.4). Two probes per recalled node
# in the flush's one statement, each through the foreign-key index of node_a or node_b, so a flush
# costs the same round trips as before and nothing is asked per request.
# The other side ``o`` of an open conflict of ``m`` that is its newer side: still a memory (not deleted,
# not superseded: a deleted correction no longer disputes anything, and the conflicts queue hides such
# a conflict, so nobody could close it), and later by (occurred_at, id), the order the queue gives two
# memories of one instant.
_NEWER_LIVE_RIVAL = ("o.deleted_at IS NULL AND o.valid_to IS NULL "
                     "AND (o.occurred_at, o.id) > (m.occurred_at, m.id)")
_FLUSH_RECALLS = """
WITH gone AS (
    DELETE FROM memory_recallmark
    WHERE id IN (SELECT id FROM memory_recallmark ORDER BY id LIMIT %(chunk)s)
    RETURNING node_id, at
), per_node AS (
    SELECT node_id, count(*) AS n, max(at) AS at FROM gone GROUP BY node_id
), applied AS (
    -- Rows locked in id order, as a writer touching many nodes would, so the two cannot deadlock.
    SELECT p.node_id, p.n, p.at,
           EXISTS (SELECT 1 FROM {conflict} c JOIN memory_node o ON o.id = c.node_b_id
                   WHERE c.node_a_id = m.id AND c.status = %(open)s AND {rival})
           OR EXISTS (SELECT 1 FROM {conflict} c JOIN memory_node o ON o.id = c.node_a_id
                      WHERE c.node_b_id = m.id AND c.status = %(open)s AND {rival})
           AS disputed
    FROM per_node p JOIN memory_node m ON m.id = p.node_id
    ORDER BY p.node_id FOR NO KEY UPDATE OF m
), updated AS (
    UPDATE memory_node m
    SET mentions = m.mentions + CASE WHEN a.disputed THEN 0 ELSE a.n END,
        last_recalled_at = greatest(m.last_recalled_at, a.at),
        -- Recall restarts the decay clock: a memory in use should not fade (unless disputed).
        tension_updated_at = CASE WHEN a.disputed THEN m.tension_updated_at
                                  ELSE greatest(m.tension_updated_at, a.at) END
    FROM applied a
    WHERE m.id = a.node_id
    RETURNING a.disputed
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM updated),
       (SELECT count(*) FROM updated WHERE disputed)
"""


@dataclass(frozen=True)
class RecallFlush:
    marks: int  # recall marks consumed (marks of deleted nodes included)
    nodes: int  # node rows updated
    skipped: bool = False  # another flush held the lock
    disputed: int = 0  # of those, older sides of an open conflict: not reinforced


def flush_recalls(*, chunk: int = RECALL_FLUSH_CHUNK) -> RecallFlush:
    """Fold buffered recall marks into their nodes: per node, mentions += its marks and the clocks
    move to its latest mark, except for the older side of an open conflict (only its
    ``last_recalled_at`` moves, see ``_FLUSH_RECALLS``). Chunks of ``chunk`` marks, each its own
    transaction, so a backlog (beat down for a day) does not become one huge one. A mark is deleted in the same statement
    that applies it: a failed flush leaves it for the next, and none counts twice."""
    from reflection.models import Conflict

    sql = _FLUSH_RECALLS.format(conflict=Conflict._meta.db_table, rival=_NEWER_LIVE_RIVAL)
    marks = nodes = disputed = 0
    while True:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("SELECT pg_try_advisory_xact_lock(%s)", [RECALL_FLUSH_LOCK])
            if not cur.fetchone()[0]:
                return RecallFlush(marks=marks, nodes=nodes, skipped=True, disputed=disputed)
            cur.execute(sql, {"chunk": chunk, "open": Conflict.Status.OPEN.value})
            batch, updated, held = cur.fetchone()
            marks += batch
            nodes += updated
            disputed += held
        if batch < chunk:
            return RecallFlush(marks=marks, nodes=nodes, disputed=disputed)


RECALL_BACKLOG_COUNT_CAP = 10_000
RECALL_BACKLOG_AGE_ROWS = 1_000


def recall_backlog() -> dict:
    """Recall marks not yet applied, and the age in seconds of the oldest (for /healthz).

    Bounded reads: /healthz is public and polled hardest exactly when the beat is down and marks
    pile up, so it must not scan them all. The count stops at ``RECALL_BACKLOG_COUNT_CAP``
    (``pending_capped``), and the oldest is looked for among the first marks by id, through the
    primary key: ids follow insertion, and a mark's time is its insertion's, so the first rows
    hold the oldest but for transactions that committed out of order."""
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM (SELECT 1 FROM memory_recallmark LIMIT %s) m",
                    [RECALL_BACKLOG_COUNT_CAP + 1])
        n = cur.fetchone()[0]
        cur.execute("SELECT extract(epoch from now() - min(at))::float8 FROM "
                    "(SELECT at FROM memory_recallmark ORDER BY id LIMIT %s) m", [RECALL_BACKLOG_AGE_ROWS])
        age = cur.fetchone()[0]
    return {"pending": min(n, RECALL_BACKLOG_COUNT_CAP), "pending_capped": n > RECALL_BACKLOG_COUNT_CAP,
            "oldest_secs": round(age or 0.0, 1)}


def reembed_missing(*, org_id: int | None = None, node_ids: Sequence[int] | None = None, batch: int = 256,
                    follow_up: bool = True) -> int:
    """Fill vectors of nodes written while the embedder failed (or by a bulk ingest without
    embedding); returns how many were filled.

    ``follow_up``: queue each filled node's conflict check again (``followup_create``). The check
    that ran at write time skipped it (candidates are found by vector), so without this a node
    written during an embedder outage would never be checked. Bulk enrichment passes False: it
    queues the checks of its chunks itself, after linking them."""
    qs = Node.objects.filter(embedded=False, deleted_at__isnull=True)
    if org_id is not None:
        qs = qs.filter(org_id=org_id)
    if node_ids is not None:
        qs = qs.filter(id__in=list(node_ids))
    done = 0
    embedder = get_embedder()
    while True:
        rows = list(qs.order_by("id").values_list("id", "org_id", "text")[:batch])
        if not rows:
            return done
        vectors = embedder.passages([t for _, _, t in rows])
        if vectors is None:
            return done  # still down; the next run retries
        with transaction.atomic():
            filled: dict[int, list[int]] = {}
            for (nid, oid, _), vec in zip(rows, vectors, strict=True):
                if Node.objects.filter(id=nid, embedded=False).update(embedding=vec, embedded=True):
                    filled.setdefault(oid, []).append(nid)
            if follow_up:
                for oid, ids in filled.items():
                    followup_create(org_id=oid, node_ids=ids)
        done += len(rows)


# --- bulk ingest ---------------------------------------------------------------------------------------

BULK_MAX_TURNS = 10_000
BULK_EMBED_BATCH = 256
LINK_CHUNK = 500
DEFERRED_LINKS = ["entity_edges", "similar_edges", "conflict_checks"]


@dataclass(frozen=True)
class SessionIn:
    session_key: str
    turns: Sequence[TurnIn]
    visibility: str | None = None  # None: the writer's default
    team: Team | None = None
    end_session: bool = False


@dataclass(frozen=True)
class BulkResult:
    batch_id: int | None
    node_ids: list[int]  # one per turn, in input order (an already written event id maps to its node)
    created: int
    existing: int
    sessions: int
    edges: int
    embedded: bool
    deferred: list[str]


class _Row(NamedTuple):
    session: int  # index into the request's sessions
    turn: TurnIn
    text: str


# What COPY writes per leaf: every column a leaf written by weave_session has. ``search``
# (generated) and ``txid`` (default) are filled by Postgres itself.
_NODE_COPY = (
    "id", "org_id", "owner_user_id", "owner_agent_id", "team_id", "visibility", "kind", "text", "speaker", "fact",
    "entities", "tags", "occurred_at", "session_key", "seq", "valid_from", "time_refs", "valence", "intensity",
    "mentions", "source_kind", "source_user_id", "source_agent_id", "event_id", "source_node_ids", "metadata",
    "confidence", "t0", "lam", "tension_updated_at", "embedding", "embedded", "created_at", "updated_at",
)
_EDGE_COPY = ("org_id", "src_id", "dst_id", "kind", "weight", "created_at")


def bulk_ingest(
    *,
    actor: Actor,
    sessions: Sequence[SessionIn],
    embed: bool = True,
    source_kind: str = SourceKind.IMPORT,
    request_id: str = "",
) -> BulkResult:
    """Many sessions of verbatim leaves in one transaction, written with COPY: all or nothing.

    Each leaf gets exactly what weave_session gives it (owner, team, visibility, silks, session
    and seq, temporal-next edges, idempotency on ``event_id``). Vectors are computed before the
    transaction in batches (``embed=False`` leaves them to the batch's background task). Entity
    and similarity edges and conflict checks are not on this path: they run after commit in
    ``enrich_batch`` (an ``IngestBatch`` row keeps that work durable)."""
    fallback = default_visibility(actor)
    named = [s.visibility for s in sessions]  # what a replay must match (None: the default, anything)
    sessions = [s if s.visibility else replace(s, visibility=fallback) for s in sessions]
    teams, rows = _bulk_plan(actor, sessions)
    now = timezone.now()
    # Changed replays are refused before the embedder runs, and again under the write's locks.
    with connection.cursor() as cur:
        known = _existing_events(cur, org_id=actor.org.id, owner=_owner_column(_owner_fields(actor)),
                                 event_ids=sorted({r.turn.event_id for r in rows if r.turn.event_id}))
    _refuse_changed_replays(sessions, rows, known, source_kind, named)
    vectors = _embed_new_rows(rows, known) if embed else {}
    write = partial(_bulk_write, actor=actor, sessions=sessions, teams=teams, rows=rows, vectors=vectors,
                    source_kind=source_kind, now=now, request_id=request_id, named=named)
    try:
        return write()
    except UniqueViolation:
        # A concurrent write committed one of these event ids after our check: once more, skipping it.
        log.info("bulk ingest of %s met a concurrent write of the same event id; writing again", actor.label)
        return write()


def bulk_check(*, actor: Actor, sessions: Sequence[SessionIn], source_kind: str = SourceKind.IMPORT) -> None:
    """Refuse what bulk_ingest would refuse, writing nothing (a file is checked whole first)."""
    _, rows = _bulk_plan(actor, sessions)
    with connection.cursor() as cur:
        stored = _existing_events(cur, org_id=actor.org.id, owner=_owner_column(_owner_fields(actor)),
                                  event_ids=sorted({r.turn.event_id for r in rows if r.turn.event_id}))
    _refuse_changed_replays(sessions, rows, stored, source_kind, [s.visibility for s in sessions])


def _text_problem(text: str) -> str:
    if not text.strip():
        return "Empty text."
    if len(text) > MAX_TEXT_CHARS:
        return f"Longer than {MAX_TEXT_CHARS} characters."
    return ""


def _bulk_plan(actor: Actor, sessions: Sequence[SessionIn]) -> tuple[list[Team | None], list[_Row]]:
    """Validate the whole request before anything is written; errors keyed by session and turn index."""
    if not sessions:
        raise ValidationError({"sessions": ["At least one session is required."]})
    errors: dict[str, dict] = {}
    teams: list[Team | None] = []
    rows: list[_Row] = []
    for si, s in enumerate(sessions):
        err: dict = {}
        try:
            teams.append(_check_scope(actor, s.visibility, s.team))
        except ValidationError as exc:
            err.update(exc.detail)
            teams.append(None)
        if not s.session_key:
            err["session_key"] = ["A session key is required."]
        if not s.turns:
            err["turns"] = ["At least one turn is required."]
        bad: dict[str, dict] = {}
        for ti, t in enumerate(s.turns):
            text = turn_text(t.text, t.caption)
            problem = _text_problem(text)
            if problem:
                bad[str(ti)] = {"text": [problem]}
            rows.append(_Row(si, t, text))
        if bad:
            err["turns"] = bad
        if err:
            errors[str(si)] = err
    if errors:
        raise ValidationError({"sessions": errors})
    if len(rows) > BULK_MAX_TURNS:
        raise ValidationError({"sessions": [f"More than {BULK_MAX_TURNS} turns in one request."]})
    return teams, rows


def _existing_events(cur, *, org_id: int, owner: tuple[str, int], event_ids: list[str]) -> dict[str, _Stored]:
    """The writer's live memories with these event ids: a deleted one is no replay's target (the
    partial ``node_event_idempotent``), so its event id writes a new memory."""
    if not event_ids:
        return {}
    owner_sql, owner_id = owner
    cur.execute(f"SELECT event_id, id, md5(text), speaker, session_key, visibility, team_id, occurred_at "
                f"FROM memory_node WHERE org_id = %s "
                f"AND {owner_sql} = %s AND event_id = ANY(%s) AND deleted_at IS NULL",
                [org_id, owner_id, event_ids])
    return {eid: _Stored(*rest) for eid, *rest in cur.fetchall()}


def _refuse_changed_replays(sessions: Sequence[SessionIn], rows: list[_Row], stored: dict[str, _Stored],
                            source_kind: str, named: list[str | None]) -> None:
    """ChangedReplay, keyed by session and turn as bulk's 400s, when a row sends a stored event id
    with other content: the whole request is refused (it is all or nothing)."""
    if not stored or source_kind in _KEEP_FIRST_SOURCES:
        return
    clashes = []
    turn_at: dict[int, int] = {}
    for r in rows:
        ti = turn_at[r.session] = turn_at.get(r.session, -1) + 1
        if r.turn.event_id in stored:
            got = stored[r.turn.event_id]
            s = sessions[r.session]
            what = _replay_differs(got, text=r.text, speaker=r.turn.speaker, session_key=s.session_key,
                                   visibility=named[r.session], team=s.team, occurred_at=r.turn.occurred_at)
            if what:
                clashes.append(((r.session, ti), r.turn.event_id, got.id, what))
    if not clashes:
        return
    detail: dict[str, dict] = {}
    for (si, ti), _, nid, what in clashes:
        detail.setdefault(str(si), {"turns": {}})["turns"][str(ti)] = {"event_id": [_clash_message(nid, what)]}
    raise ChangedReplay(clashes=clashes, detail={"sessions": detail})


def _embed_new_rows(rows: list[_Row], known: dict[str, _Stored]) -> dict[int, object]:
    """Vectors (by row index) of the rows not written yet (``known``: the event ids already stored),
    in batches, before any transaction. A row missing from the answer (the embedder failed) is
    written without and embedded later."""
    todo = [i for i, r in enumerate(rows) if not (r.turn.event_id and r.turn.event_id in known)]
    embedder = get_embedder()
    out: dict[int, object] = {}
    for start in range(0, len(todo), BULK_EMBED_BATCH):
        part = todo[start:start + BULK_EMBED_BATCH]
        vectors = embedder.passages([rows[i].text for i in part])
        if vectors is None:
            break  # embedder down: the rest goes in without vectors (the batch task fills them)
        out.update(zip(part, vectors, strict=True))
    return out


@transaction.atomic
def _bulk_write(*, actor: Actor, sessions: Sequence[SessionIn], teams: list[Team | None], rows: list[_Row],
                vectors: dict[int, object], source_kind: str, now: datetime, request_id: str,
                named: list[str | None]) -> BulkResult:
    owner = _owner_fields(actor)
    owner_col = _owner_column(owner)
    org_id = actor.org.id
    keys = list(dict.fromkeys(s.session_key for s in sessions))

    # Sessions: create the missing ones, then lock them all (in key order, so writers never deadlock).
    started: dict[str, datetime] = {}
    for r in rows:
        started.setdefault(sessions[r.session].session_key, _occurred(r.turn, now))
    MemorySession.objects.bulk_create(
        [MemorySession(org=actor.org, key=k, started_at=started[k], last_turn_at=now, **owner) for k in keys],
        ignore_conflicts=True)
    locked = {m.key: m for m in MemorySession.objects.select_for_update(no_key=True)
              .filter(org=actor.org, key__in=keys, **owner).order_by("key")}

    with connection.cursor() as cur:
        stored = _existing_events(cur, org_id=org_id, owner=owner_col,
                                  event_ids=sorted({r.turn.event_id for r in rows if r.turn.event_id}))
        _refuse_changed_replays(sessions, rows, stored, source_kind, named)
        existing = {eid: s.id for eid, s in stored.items()}
        # The last leaf of each session continues its seq and temporal-next chain.
        cur.execute(f"""SELECT DISTINCT ON (session_key) session_key, id, seq FROM memory_node
                        WHERE org_id = %s AND {owner_col[0]} = %s AND kind = %s AND session_key = ANY(%s)
                        ORDER BY session_key, seq DESC""", [org_id, owner_col[1], NodeKind.LEAF, keys])
        last = {k: (nid, seq) for k, nid, seq in cur.fetchall()}

        # Which rows are new (an event id already written, or repeated in this request, is not);
        # their ids come from the table's own sequence, so edges are known before the rows are sent.
        new: list[int] = []  # row indexes, in write order
        first: dict[str, int] = {}  # event id -> the row that writes it
        for i, r in enumerate(rows):
            eid = r.turn.event_id
            if eid and (eid in existing or eid in first):
                continue
            new.append(i)
            if eid:
                first[eid] = i
        ids: list[int] = []
        if new:
            cur.execute("SELECT nextval(pg_get_serial_sequence('memory_node', 'id')) FROM generate_series(1, %s)",
                        [len(new)])
            ids = sorted(x for (x,) in cur.fetchall())
        row_id = dict(zip(new, ids, strict=True))
        node_ids = [row_id[i] if i in row_id else existing.get(r.turn.event_id) or row_id[first[r.turn.event_id]]
                    for i, r in enumerate(rows)]

        plan = []  # (row index, id, seq, occurred)
        edges: list[tuple] = []
        added: dict[str, list[datetime]] = {}
        for i in new:
            r = rows[i]
            key = sessions[r.session].session_key
            prev_id, prev_seq = last.get(key, (None, -1))
            nid, occurred = row_id[i], _occurred(r.turn, now)
            plan.append((i, nid, prev_seq + 1, occurred))
            if prev_id is not None:
                edges.append((org_id, prev_id, nid, EdgeKind.TEMPORAL_NEXT, EDGE_WEIGHTS[EdgeKind.TEMPORAL_NEXT], now))
            last[key] = (nid, prev_seq + 1)
            added.setdefault(key, []).append(occurred)

        if plan:
            _copy(cur, "memory_node", _NODE_COPY,
                  _node_rows(actor, owner, sessions, teams, rows, plan, vectors, source_kind, now))
            _copy(cur, "memory_edge", _EDGE_COPY, edges)

    ended: list[int] = []
    touched = []
    ending = {s.session_key for s in sessions if s.end_session}
    for key, times in added.items():
        session = locked[key]
        session.turn_count += len(times)
        session.last_turn_at = max(times)
        if key in ending:
            session.ended_at = now
            session.abstraction_status = MemorySession.Status.PENDING
            ended.append(session.id)
        elif session.ended_at is not None:  # new turns reopen an ended session, as in weave_session
            session.ended_at = None
            session.abstraction_status = MemorySession.Status.OPEN
            session.reflection_status = MemorySession.Status.OPEN
        touched.append(session)
    # end_session holds when every turn of the session was already stored (a retry, or a re-sent
    # last turn to end it), as in weave_session; an already ended session stays as it is.
    for key in sorted(ending - added.keys()):
        session = locked[key]
        if session.ended_at is None and session.turn_count > 0:
            session.ended_at = now
            session.abstraction_status = MemorySession.Status.PENDING
            ended.append(session.id)
            touched.append(session)
    MemorySession.objects.bulk_update(touched, ["turn_count", "last_turn_at", "ended_at", "abstraction_status",
                                                "reflection_status"])

    batch = None
    embedded = all(i in vectors for i in new)
    deferred: list[str] = []
    if new:
        batch = IngestBatch.objects.create(org=actor.org, node_ids=ids, embed_pending=not embedded,
                                           request_id=request_id[:64], **owner)
        deferred = (["embedding"] if not embedded else []) + DEFERRED_LINKS
        audit.record(actor=actor, action="memory.bulk_ingest", object_type="ingest_batch", object_id=batch.id,
                     detail={"nodes": len(new), "existing": len(rows) - len(new), "sessions": len(added),
                             "edges": len(edges), "embedded": embedded}, request_id=request_id)
        events.publish(org_id, "memory.woven", {"node_ids": ids[:50], "session_key": keys[0] if len(keys) == 1
                                                else "", "sessions": len(added)})
        from reflection import hooks

        transaction.on_commit(partial(hooks.after_bulk_ingest, batch_id=batch.id, ended_session_ids=ended),
                              robust=True)
    else:
        for session_id in ended:  # nothing new to enrich: only the abstraction of what was ended
            _after_commit(ended_session_id=session_id)
    return BulkResult(batch_id=batch.id if batch else None, node_ids=node_ids, created=len(new),
                      existing=len(rows) - len(new), sessions=len(keys), edges=len(edges), embedded=embedded,
                      deferred=deferred)


def _occurred(turn: TurnIn, now: datetime) -> datetime:
    """A turn's time; a naive one is read in the default zone, as the ORM would store it."""
    when = turn.occurred_at or now
    return timezone.make_aware(when, timezone.get_default_timezone()) if timezone.is_naive(when) else when


def _node_rows(actor, owner, sessions, teams, rows, plan, vectors, source_kind, now):
    """COPY tuples of the new leaves; silks are computed as the rows stream, so Python builds the
    next rows while Postgres indexes the previous ones."""
    org_id = actor.org.id
    owner_user_id = owner["owner_user"].id if owner["owner_user"] is not None else None
    owner_agent_id = owner["owner_agent"].id if owner["owner_agent"] is not None else None
    source_user_id = actor.user.id if actor.user is not None else None
    source_agent_id = actor.agent.id if actor.agent is not None else None
    mentions, confidence, t0, lam = (Node._meta.get_field(f).get_default()
                                     for f in ("mentions", "confidence", "t0", "lam"))
    for i, nid, seq, occurred in plan:
        r = rows[i]
        s = sessions[r.session]
        team = teams[r.session]
        leaf = _leaf_silks(r.turn, occurred)
        vec = vectors.get(i)
        yield (nid, org_id, owner_user_id, owner_agent_id, team.id if team is not None else None, s.visibility,
               NodeKind.LEAF.value, r.text, leaf["speaker"], leaf["fact"], leaf["entities"], leaf["tags"], occurred,
               s.session_key, seq, occurred, leaf["time_refs"], leaf["valence"], leaf["intensity"], mentions,
               str(source_kind), source_user_id, source_agent_id, r.turn.event_id, [], leaf["metadata"],
               confidence, t0, lam, now, vec, vec is not None, now, now)


def _copy(cur, table: str, columns: tuple[str, ...], rows) -> None:
    """Binary COPY of ``rows`` into ``table`` on the transaction's own connection; each value is
    sent as its column's type, read from the catalogue (a user id is int4, a node id int8)."""
    raw = cur.cursor  # the psycopg cursor under Django's wrapper
    raw.execute("SELECT attname, atttypid::int, atttypid = 'vector'::regtype FROM pg_attribute "
                "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped", [table])
    found = {name: (oid, is_vector) for name, oid, is_vector in raw.fetchall()}
    if any(found[c][1] for c in columns):
        # On this cursor only: the connection's other readers keep getting vectors as text. Not
        # pgvector's register_vector_info, which leaks two classes per call (memory/vector_adapters.py).
        register_vector_adapters(raw, TypeInfo.fetch(raw.connection, "vector"))
    with raw.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as cp:
        cp.set_types([found[c][0] for c in columns])
        for row in rows:
            cp.write_row(row)


def enrich_batch(*, batch_id: int) -> dict:
    """The work a bulk ingest deferred past its commit: vectors it was written without, then entity
    and similarity edges (as weave_session links, in chunks of ``LINK_CHUNK`` leaves), then conflict
    checks. Idempotent: only missing vectors are filled, edges are unique, the batch is marked done
    last; a failure leaves it for the beat (``enqueue_pending_batches``)."""
    batch = IngestBatch.objects.filter(pk=batch_id).first()
    if batch is None or batch.status == IngestBatch.Status.DONE:
        return {"batch": batch_id, "status": batch.status if batch else "missing"}
    # Claim it: a run still working on it (its lease refreshed per chunk) makes a duplicate send
    # from the beat a no-op instead of embedding and queueing conflict checks twice.
    now = timezone.now()
    lease = now - timedelta(seconds=settings.NYLON_INGEST_RETRY_SECS)
    claimed = (IngestBatch.objects.filter(pk=batch_id).exclude(status=IngestBatch.Status.DONE)
               .filter(Q(tried_at__isnull=True) | Q(tried_at__lt=lease) | Q(status=IngestBatch.Status.FAILED))
               .update(attempts=F("attempts") + 1, tried_at=now, status=IngestBatch.Status.PENDING))
    if not claimed:
        return {"batch": batch_id, "status": "running elsewhere"}
    ids = sorted(batch.node_ids)
    try:
        if batch.embed_pending:
            reembed_missing(org_id=batch.org_id, node_ids=ids, follow_up=False)
            if Node.objects.filter(id__in=ids, embedded=False, deleted_at__isnull=True).exists():
                IngestBatch.objects.filter(pk=batch_id).update(error="embedder unavailable: vectors pending")
                return {"batch": batch_id, "status": IngestBatch.Status.PENDING}
        owner = (("owner_agent_id", batch.owner_agent_id) if batch.owner_agent_id else
                 ("owner_user_id", batch.owner_user_id))
        edges = 0
        for start in range(0, len(ids), LINK_CHUNK):
            chunk = ids[start:start + LINK_CHUNK]
            nodes = [(nid, ents, has_vec) for nid, ents, has_vec in Node.objects.filter(
                id__in=chunk, deleted_at__isnull=True).order_by("id").values_list("id", "entities", "embedded")]
            links = _neighbour_links(org_id=batch.org_id, owner=owner, nodes=nodes, before_id=chunk[0])
            Edge.objects.bulk_create([Edge(org_id=batch.org_id, src_id=src, dst_id=dst, kind=kind,
                                           weight=EDGE_WEIGHTS[kind]) for src, dst, kind in links],
                                     ignore_conflicts=True)
            edges += len(links)
            if nodes:
                followup_create(org_id=batch.org_id, node_ids=[n[0] for n in nodes])
            IngestBatch.objects.filter(pk=batch_id).update(tried_at=timezone.now())  # lease
    except Exception as exc:
        IngestBatch.objects.filter(pk=batch_id).update(status=IngestBatch.Status.FAILED,
                                                       error=f"{type(exc).__name__}: {exc}"[:500])
        raise
    IngestBatch.objects.filter(pk=batch_id).update(status=IngestBatch.Status.DONE, embed_pending=False, error="",
                                                   finished_at=timezone.now())
    return {"batch": batch_id, "status": IngestBatch.Status.DONE, "edges": edges}


_UNFINISHED = (IngestBatch.Status.PENDING, IngestBatch.Status.FAILED)
BATCH_MAX_ATTEMPTS = 10  # runs after which an unfinished batch counts as failing (it is still re-sent)
BATCH_BACKOFF = 8  # ...but then only every retry_after * BATCH_BACKOFF


def _batch_due(now, retry_after_secs: float) -> Q:
    """Never tried and older than the retry period, or tried that long ago; past
    ``BATCH_MAX_ATTEMPTS`` runs (an embedder out for hours spends one per run) the wait grows
    ``BATCH_BACKOFF``-fold instead of the batch being given up: its vectors and edges are owed."""
    wait, long_wait = timedelta(seconds=retry_after_secs), timedelta(seconds=retry_after_secs * BATCH_BACKOFF)
    return (Q(tried_at__isnull=True, created_at__lt=now - wait)
            | Q(attempts__lt=BATCH_MAX_ATTEMPTS, tried_at__lt=now - wait)
            | Q(attempts__gte=BATCH_MAX_ATTEMPTS, tried_at__lt=now - long_wait))


def enqueue_pending_batches(*, retry_after_secs: float = 300) -> int:
    """Beat: re-enqueue bulk batches whose deferred work is not done (never sent, lost, failed)."""
    from reflection import hooks

    due = list(IngestBatch.objects.filter(status__in=_UNFINISHED).filter(_batch_due(timezone.now(), retry_after_secs))
               .order_by("id").values_list("id", flat=True)[:100])
    for batch_id in due:
        hooks.after_bulk_ingest(batch_id=batch_id, ended_session_ids=[])
    return len(due)


OWED_COUNT_CAP = 10_000  # as RECALL_BACKLOG_COUNT_CAP: /healthz reads at most this many rows + 1


def _bounded_counts(rows, **filters: Q) -> dict:
    """Counts over the first ``OWED_COUNT_CAP + 1`` of ``rows`` by primary key, in one bounded read
    (``LIMIT`` in a subquery), for /healthz: it is public and polled hardest exactly when workers are
    down and owed work piles up, so it must not scan all of it (as ``recall_backlog``).

    ``pending`` is how many there are, at most the cap; past it the dict carries ``pending_capped:
    True`` (left out otherwise, so an ordinary answer keeps its shape) and every count is over the
    oldest rows only, a lower bound. Ids follow insertion, so the window holds the oldest rows, the
    ones that turn overdue or failing first: a backlog with any of those still shows some."""
    window = rows.order_by("pk").values("pk")[:OWED_COUNT_CAP + 1]
    counts = rows.model.objects.filter(pk__in=window).aggregate(
        pending=Count("pk"), **{name: Count("pk", filter=q) for name, q in filters.items()})
    capped = counts["pending"] > OWED_COUNT_CAP
    out = {name: min(n, OWED_COUNT_CAP) for name, n in counts.items()}
    if capped:
        out["pending_capped"] = True
    return out


def batch_counts(*, retry_after_secs: float) -> dict:
    """Unfinished bulk batches over every org: ``pending`` all of them, ``overdue`` never run within
    twice the retry period (nothing is running them: no worker or no beat), ``failing`` run
    ``BATCH_MAX_ATTEMPTS`` times without finishing. Bounded: see ``_bounded_counts``."""
    now = timezone.now()
    return _bounded_counts(
        IngestBatch.objects.filter(status__in=_UNFINISHED),
        overdue=Q(tried_at__isnull=True, created_at__lt=now - timedelta(seconds=2 * retry_after_secs)),
        failing=Q(attempts__gte=BATCH_MAX_ATTEMPTS),
    )


# --- post-commit follow-ups ----------------------------------------------------------------------

FOLLOWUP_SWEEP_BATCH = 200
FOLLOWUP_MAX_ATTEMPTS = 10  # re-sends after which a follow-up counts as failing (it is still re-sent)
FOLLOWUP_MAX_BACKOFF = 6  # the wait before a re-send doubles per attempt, up to 2**6 grace periods


def _followup_due(now, grace_secs: float) -> Q:
    """Never re-sent and older than the grace period, or re-sent ``a`` times and not for
    ``grace * 2**a`` (capped): a check stuck behind a long backlog or a worker outage is re-sent
    ever more rarely instead of every minute, and never abandoned."""
    due = Q(sent_at__isnull=True, created_at__lt=now - timedelta(seconds=grace_secs))
    for a in range(FOLLOWUP_MAX_BACKOFF):
        due |= Q(attempts=a, sent_at__lt=now - timedelta(seconds=grace_secs * 2 ** a))
    return due | Q(attempts__gte=FOLLOWUP_MAX_BACKOFF,
                   sent_at__lt=now - timedelta(seconds=grace_secs * 2 ** FOLLOWUP_MAX_BACKOFF))


def enqueue_pending_followups(*, grace_secs: float, batch: int = FOLLOWUP_SWEEP_BATCH,
                              max_attempts: int = FOLLOWUP_MAX_ATTEMPTS) -> int:
    """Beat: re-send follow-ups still pending ``grace_secs`` after their write (the send at commit
    was lost: broker down, worker killed past its retries), backing off per re-send
    (``_followup_due``). Returns how many reached the broker; those are stamped, the others stay
    due for the next run."""
    from reflection import hooks

    now = timezone.now()
    # Never re-sent first, then the longest waiting, so rows that keep failing cannot starve the rest.
    due = list(Followup.objects.filter(_followup_due(now, grace_secs))
               .order_by(F("sent_at").asc(nulls_first=True), "id")
               .values_list("id", "org_id", "node_ids")[:batch])
    sent = [fid for fid, org_id, node_ids in due
            if hooks.send_followup(followup_id=fid, org_id=org_id, node_ids=node_ids)]
    if sent:
        Followup.objects.filter(id__in=sent).update(sent_at=now, attempts=F("attempts") + 1)
        log.warning("re-sent %d post-commit follow-ups pending for over %ss", len(sent), grace_secs)
    failing = Followup.objects.filter(attempts__gte=max_attempts).count()  # small table: unfinished work only
    if failing:
        log.error("%d post-commit follow-ups were re-sent %d times and are still not done", failing, max_attempts)
    return len(sent)


def followup_counts(*, org_id: int | None, grace_secs: float, max_attempts: int = FOLLOWUP_MAX_ATTEMPTS) -> dict:
    """Unfinished follow-ups of an org (``org_id=None``: of every org, for /healthz): all, overdue
    (past the grace period: their message was lost or their task keeps failing) and failing
    (re-sent ``max_attempts`` times; still re-sent, ever more rarely, until the work succeeds).
    Bounded: see ``_bounded_counts``."""
    cutoff = timezone.now() - timedelta(seconds=grace_secs)
    qs = Followup.objects.all() if org_id is None else Followup.objects.filter(org_id=org_id)
    return _bounded_counts(qs, overdue=Q(created_at__lt=cutoff), failing=Q(attempts__gte=max_attempts))
