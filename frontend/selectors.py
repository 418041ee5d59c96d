"""Console reads. Every memory read starts from ``memory.selectors.visible_nodes`` (the SQL twin of
the engine mask), every tenancy read from ``teams.selectors``: the console never widens what the
API would show the same actor."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db.models import BooleanField, Count, Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import TruncHour
from django.utils import timezone
from django.utils.translation import gettext

from memory.models import Edge, EdgeKind, Node, Visibility
from memory.selectors import visible_nodes
from teams.auth import Actor
from teams.models import Agent, Membership, Team

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
GRAPH_MAX_NODES = 150
GRAPH_MAX_EDGES_PER_HOP = 2000
DRAWER_MAX_EDGES = 100
DRAWER_HIDDEN_COUNT_CAP = 1000  # the drawer counts hidden edges up to this, then says "more than"

# Columns a listing needs: never the 384-float embedding, never the whole row.
LIST_COLUMNS = ("id", "kind", "text", "speaker", "visibility", "team_id", "owner_user_id", "owner_agent_id",
                "occurred_at", "created_at", "session_key", "source_kind", "valid_to")

EDGE_COLORS = {
    EdgeKind.TEMPORAL_NEXT: "#64748b",
    EdgeKind.SAME_SESSION: "#94a3b8",
    EdgeKind.ENTITY: "#2563eb",
    EdgeKind.SIMILAR: "#16a34a",
    EdgeKind.DERIVED: "#9333ea",
    EdgeKind.BRIDGE: "#ea580c",
    EdgeKind.CONTRADICTS: "#dc2626",
    EdgeKind.SUPERSEDES: "#b45309",
    EdgeKind.EXPLICIT: "#0891b2",
}


# --- memory browser -------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeFilters:
    owner: str = ""  # "", "me", "user:<id>", "agent:<id>"
    team_id: int | None = None
    kind: str = ""
    visibility: str = ""
    q: str = ""
    since: datetime | None = None
    until: datetime | None = None


def filtered_nodes(*, actor: Actor, f: NodeFilters) -> QuerySet[Node]:
    qs = visible_nodes(actor=actor)
    if f.owner == "me":
        qs = qs.filter(owner_user=actor.user) if actor.user is not None else qs.filter(owner_agent=actor.agent)
    elif f.owner.startswith("user:"):
        qs = qs.filter(owner_user_id=int(f.owner[5:]))
    elif f.owner.startswith("agent:"):
        qs = qs.filter(owner_agent_id=int(f.owner[6:]))
    if f.team_id is not None:
        qs = qs.filter(team_id=f.team_id)
    if f.kind:
        qs = qs.filter(kind=f.kind)
    if f.visibility:
        qs = qs.filter(visibility=f.visibility)
    if f.since is not None:
        qs = qs.filter(occurred_at__gte=f.since)
    if f.until is not None:
        qs = qs.filter(occurred_at__lt=f.until)
    if f.q:
        # The generated tsvector column (GIN-indexed, see memory migration 0003).
        qs = qs.filter(RawSQL("memory_node.search @@ websearch_to_tsquery('english', %s)", (f.q,),
                              output_field=BooleanField()))
    return qs


@dataclass
class Page:
    rows: list
    next_after: int | None


# The console pages by a plain ``after=<id>`` in its own links and forms; the API's opaque DRF
# cursor (``nylon_project.pagination.CursorPage``) is for clients, so the two stay separate.
def keyset_page(qs: QuerySet, *, after: int | None, limit: int = PAGE_SIZE) -> Page:
    """Keyset pagination on id, newest first: one indexed range scan of ``limit + 1`` rows (the
    extra row says whether there is a next page)."""
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    if after is not None:
        qs = qs.filter(id__lt=after)
    rows = list(qs.order_by("-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows=rows, next_after=rows[-1].id if more and rows else None)


def node_page(*, actor: Actor, f: NodeFilters, after: int | None, limit: int = PAGE_SIZE) -> Page:
    """The memory browser's page: by when things happened, newest first (``occurred_at``, then the
    higher id on a tie), not by when they were written: an imported history or a late-woven session
    lands at its own time. Keyset on (occurred_at, id); ``after`` stays the last row's id, whose
    time is read back (the row must be one the actor may see: another's hidden memory is no anchor
    to probe its time with). A memory deleted since its page was shown is still a valid anchor."""
    from assets.access import _visible

    limit = max(1, min(limit, MAX_PAGE_SIZE))
    qs = filtered_nodes(actor=actor, f=f).only(*LIST_COLUMNS)
    if after is not None:
        anchor = (Node.objects.filter(org=actor.org, id=after)
                  .only("id", "occurred_at", "visibility", "team_id", "owner_user_id", "owner_agent_id").first())
        if anchor is None or not _visible(actor, anchor, "node")[0]:
            from rest_framework.exceptions import ValidationError

            raise ValidationError({"after": [gettext("No such memory to continue the list from: start again "
                                                     "from the first page.")]})
        qs = qs.filter(Q(occurred_at__lt=anchor.occurred_at) | Q(occurred_at=anchor.occurred_at, id__lt=anchor.id))
    rows = list(qs.order_by("-occurred_at", "-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    attach_owner_labels(actor=actor, nodes=rows)
    return Page(rows=rows, next_after=rows[-1].id if more and rows else None)


def attach_owner_labels(*, actor: Actor, nodes) -> None:
    """Sets ``owner_label`` and ``team_label`` on each node (or asset) with a few small queries.

    A person who has left the org still owns what they wrote in it: the console (for the org's
    people) names them, marked as gone, rather than a bare ``user:<id>``. Only an owner of a row of
    this org is looked up, so no other account's name can be read through it."""
    user_ids = {n.owner_user_id for n in nodes if n.owner_user_id}
    agent_ids = {n.owner_agent_id for n in nodes if n.owner_agent_id}
    team_ids = {n.team_id for n in nodes if n.team_id}
    users: dict[int, str] = {}
    if user_ids:
        member = Exists(Membership.objects.filter(org=actor.org, user_id=OuterRef("pk")))
        for uid, username, is_member in (get_user_model().objects.filter(id__in=user_ids).annotate(m=member)
                                         .values_list("id", "username", "m")):
            users[uid] = username if is_member else gettext("%(name)s (left the org)") % {"name": username}
    agents = dict(Agent.objects.filter(org=actor.org, id__in=agent_ids).values_list("id", "name")) if agent_ids else {}
    teams = dict(Team.objects.filter(org=actor.org, id__in=team_ids).values_list("id", "name")) if team_ids else {}
    for n in nodes:
        if n.owner_agent_id:
            n.owner_label = f"agent:{agents.get(n.owner_agent_id, n.owner_agent_id)}"
        else:
            n.owner_label = f"user:{users.get(n.owner_user_id, n.owner_user_id)}"
        n.team_label = teams.get(n.team_id, "") if n.team_id else ""


def owner_choices(*, actor: Actor) -> list[tuple[str, str]]:
    users = get_user_model().objects.filter(memberships__org=actor.org).order_by("username")
    agents = Agent.objects.filter(org=actor.org).order_by("name")
    return ([(f"user:{u.id}", f"user:{u.username}") for u in users.only("id", "username")]
            + [(f"agent:{a.id}", f"agent:{a.name}") for a in agents.only("id", "name")])


def nodes_by_ids(*, actor: Actor, ids: list[int]) -> list[Node]:
    """The visible subset of ``ids`` (live feed, lineage, resonate paths), newest first."""
    rows = list(visible_nodes(actor=actor).filter(id__in=ids[:200]).only(*LIST_COLUMNS).order_by("-id"))
    attach_owner_labels(actor=actor, nodes=rows)
    return rows


# --- node drawer ----------------------------------------------------------------------------------


@dataclass
class EdgeRow:
    id: int
    kind: str
    weight: float
    direction: str  # "out" | "in"
    other_id: int
    other_text: str
    color: str


def _edges_to_visible(*, actor: Actor, ends: set[int], limit: int) -> list[dict]:
    """The ``limit`` heaviest edges between a node of ``ends`` and a node the actor may see.

    The visibility filter is part of the query, before the LIMIT: filtering after it let heavy
    edges to hidden nodes fill the slice and push visible neighbours out. One query per direction
    (each an EXISTS semi-join probing the node's primary key, from the ``src_id``/``dst_id``
    indexes; an OR of the two directions would need a subplan per row), each LIMITed and merged
    here: at most ``2 * limit`` rows reach Python however many edges a hub has."""
    visible = visible_nodes(actor=actor)
    base = Edge.objects.filter(org=actor.org)
    cols = ("id", "src_id", "dst_id", "kind", "weight")
    out = (base.filter(src_id__in=ends).filter(Exists(visible.filter(id=OuterRef("dst_id"))))
           .order_by("-weight", "id").values(*cols)[:limit])
    into = (base.filter(dst_id__in=ends).filter(Exists(visible.filter(id=OuterRef("src_id"))))
            .order_by("-weight", "id").values(*cols)[:limit])
    merged = {e["id"]: e for e in (*out, *into)}  # a self-loop comes back from both sides
    return sorted(merged.values(), key=lambda e: (-e["weight"], e["id"]))[:limit]


def node_edges(*, actor: Actor, node: Node) -> tuple[list[EdgeRow], int, bool]:
    """Edges of a node whose other end the actor may see (the heaviest ``DRAWER_MAX_EDGES``); how
    many edges lead to a node the actor may not see; and whether that count stopped at
    ``DRAWER_HIDDEN_COUNT_CAP`` (the drawer then says "more than N")."""
    edges = _edges_to_visible(actor=actor, ends={node.id}, limit=DRAWER_MAX_EDGES)
    others = {e["dst_id"] if e["src_id"] == node.id else e["src_id"] for e in edges}
    texts = dict(visible_nodes(actor=actor).filter(id__in=others).values_list("id", "text")) if others else {}
    rows = []
    for e in edges:
        out = e["src_id"] == node.id
        other = e["dst_id"] if out else e["src_id"]
        if other not in texts:  # deleted or hidden since the edge query: never shown
            continue
        rows.append(EdgeRow(id=e["id"], kind=e["kind"], weight=e["weight"], direction="out" if out else "in",
                            other_id=other, other_text=texts[other][:140], color=EDGE_COLORS.get(e["kind"], "#888")))
    hidden = _hidden_edge_count(actor=actor, node=node)
    return rows, min(hidden, DRAWER_HIDDEN_COUNT_CAP), hidden > DRAWER_HIDDEN_COUNT_CAP


def _hidden_edge_count(*, actor: Actor, node: Node) -> int:
    """Edges of ``node`` whose other end is a live memory the actor may not see, counted exactly up
    to ``DRAWER_HIDDEN_COUNT_CAP + 1``: its own count query (no longer a by-product of the listing,
    which now holds visible edges only), each direction stopping at the cap: a hub with 100,000
    hidden edges is not counted to the end. (A hub whose edges are mostly visible is still read
    once per direction through its ``src_id``/``dst_id`` index, as the listing reads it.)

    Edges to deleted memories are not counted: a soft delete keeps the edges, and the drawer called
    each one a memory the viewer "cannot see", though nobody can and it is no longer a memory.
    Superseded memories are not deleted: the viewer may see them (the listing shows them)."""
    visible = visible_nodes(actor=actor)
    live = Node.objects.filter(org=actor.org, deleted_at__isnull=True)
    base = Edge.objects.filter(org=actor.org)
    cap = DRAWER_HIDDEN_COUNT_CAP + 1
    # NOT EXISTS, not NOT IN: Postgres plans the first as an anti-join probing the node's primary
    # key; NOT IN (NULL-aware) cannot be one and becomes a subplan over the org's visible nodes.
    out = (base.filter(src_id=node.id).filter(Exists(live.filter(id=OuterRef("dst_id"))))
           .filter(~Exists(visible.filter(id=OuterRef("dst_id")))))
    into = (base.filter(dst_id=node.id).filter(Exists(live.filter(id=OuterRef("src_id"))))
            .filter(~Exists(visible.filter(id=OuterRef("src_id")))))
    # A self-loop's other end is the node itself, which the actor sees (it opened the drawer), so
    # no edge is counted twice.
    return out.values("id")[:cap].count() + into.values("id")[:cap].count()


def lineage(*, actor: Actor, node: Node, edges: list[EdgeRow]) -> dict:
    """Provenance: the nodes this one was derived from, and the nodes derived from it."""
    sources = nodes_by_ids(actor=actor, ids=list(node.source_node_ids or []))
    # A source is also linked by a derived edge: listed once, as a source (the drawer said "from #24"
    # and "derived from #24" on two lines).
    listed = set(node.source_node_ids or [])
    derived_from = [e for e in edges if e.kind == EdgeKind.DERIVED and e.direction == "in" and e.other_id not in listed]
    derived_into = [e for e in edges if e.kind == EdgeKind.DERIVED and e.direction == "out"]
    return {"sources": sources, "hidden_sources": len(node.source_node_ids or []) - len(sources),
            "derived_from": derived_from, "derived_into": derived_into}


def node_conflicts(*, actor: Actor, node: Node) -> list[dict]:
    """Conflicts this node is part of, by the queue's and the API's rule (both nodes readable)."""
    from reflection.conflicts import visible_conflicts

    rows = (visible_conflicts(actor=actor).filter(Q(node_a_id=node.id) | Q(node_b_id=node.id))
            .order_by("-id")[:DRAWER_MAX_EDGES])
    out = []
    for c in rows:
        other = c.node_b if c.node_a_id == node.id else c.node_a
        out.append({"id": c.id, "status": c.status, "reason": c.reason, "other_id": other.id,
                    "other_text": other.text[:140]})
    return out


def node_versions(*, node: Node, edges: list[EdgeRow]) -> dict:
    """The supersede chain around a node: what it replaced and what replaced it (visible ends only)."""
    return {"replaces": [e for e in edges if e.kind == EdgeKind.SUPERSEDES and e.direction == "out"],
            "replaced_by": [e for e in edges if e.kind == EdgeKind.SUPERSEDES and e.direction == "in"],
            "valid_to": node.valid_to}


# --- graph ----------------------------------------------------------------------------------------


def neighbourhood(*, actor: Actor, node: Node, depth: int = 1) -> dict:
    """Nodes within ``depth`` hops that the actor may see, and the edges between them.

    Never steps through a hidden node (mirrors the engine's diffusion rule)."""
    visible = visible_nodes(actor=actor)
    ids = {node.id}
    frontier = {node.id}
    edges: dict[int, dict] = {}
    for _ in range(max(1, min(depth, 3))):
        if not frontier or len(ids) >= GRAPH_MAX_NODES:
            break
        # Only edges with both ends visible to the actor (the frontier is; the query checks the
        # other end) count towards the per-hop LIMIT, so heavy edges to hidden nodes cannot
        # crowd the visible ones out of the hop.
        hop = _edges_to_visible(actor=actor, ends=frontier, limit=GRAPH_MAX_EDGES_PER_HOP)
        new = set()
        for e in hop:
            for x in (e["src_id"], e["dst_id"]):
                if x not in ids and len(ids) + len(new) < GRAPH_MAX_NODES:
                    new.add(x)
        ids |= new
        for e in hop:
            if e["src_id"] in ids and e["dst_id"] in ids:
                edges[e["id"]] = e
        frontier = new
    rows = list(visible.filter(id__in=ids).values("id", "kind", "text", "visibility"))
    return {
        "center": node.id,
        "nodes": [{"id": r["id"], "label": _short(r["text"], 40), "title": _short(r["text"], 300),
                   "kind": r["kind"], "visibility": r["visibility"]} for r in rows],
        "edges": [{"id": e["id"], "from": e["src_id"], "to": e["dst_id"], "kind": e["kind"],
                   "weight": round(e["weight"], 3), "color": EDGE_COLORS.get(e["kind"], "#888")}
                  for e in edges.values()],
        "legend": {k: v for k, v in EDGE_COLORS.items()},
    }


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


# --- dashboard ------------------------------------------------------------------------------------


def team_memories_out_of_reach(*, actor: Actor) -> int | None:
    """For an org admin or owner: how many live memories are shared within teams they are not in.
    ``team`` reads only the team's members and the owner, admins included (docs/permissions.md), so
    an owner in no team saw a few memories of an org holding many, with no sign of the rest. The
    count tells an admin only that they exist, never what they say, nor whose they are. None for
    anyone else: a member is not told what other teams hold."""
    if actor.agent is not None or not actor.is_org_admin:
        return None
    return (Node.objects.filter(org=actor.org, deleted_at__isnull=True, visibility=Visibility.TEAM)
            .exclude(team_id__in=list(actor.team_ids)).exclude(owner_user=actor.user).count())


def dashboard_counts(*, actor: Actor) -> dict:
    visible = visible_nodes(actor=actor)
    node_counts = dict(visible.order_by().values_list("kind").annotate(n=Count("id")).values_list("kind", "n"))
    vis_ids = visible.values("id")
    edge_counts = dict(
        Edge.objects.filter(org=actor.org, src_id__in=vis_ids, dst_id__in=vis_ids).order_by()
        .values_list("kind").annotate(n=Count("id")).values_list("kind", "n")
    )
    return {"nodes": sorted(node_counts.items()), "edges": sorted(edge_counts.items()),
            "node_total": sum(node_counts.values()), "edge_total": sum(edge_counts.values())}


def writes_per_hour(*, actor: Actor, hours: int = 24, now: datetime | None = None) -> list[tuple[datetime, int]]:
    """Nodes written per hour over the last ``hours`` hours: one aggregate query, zero-filled."""
    now = now or timezone.now()
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = end - timedelta(hours=hours)
    got = dict(
        visible_nodes(actor=actor).filter(created_at__gte=start, created_at__lt=end).order_by()
        .annotate(h=TruncHour("created_at")).values_list("h").annotate(n=Count("id")).values_list("h", "n")
    )
    return [(start + timedelta(hours=i), got.get(start + timedelta(hours=i), 0)) for i in range(hours)]


def recent_conflicts(*, actor: Actor, limit: int = 10) -> list | None:
    """Open conflicts between nodes the actor may see; None when conflicts are not installed."""
    try:
        from reflection.models import Conflict
    except ImportError:
        return None
    vis_ids = visible_nodes(actor=actor).values("id")
    return list(Conflict.objects.filter(org=actor.org, status=Conflict.Status.OPEN,
                                        node_a_id__in=vis_ids, node_b_id__in=vis_ids)
                .select_related("node_a", "node_b")
                .only("id", "reason", "status", "detector", "created_at", "node_a__id", "node_a__text",
                      "node_b__id", "node_b__text").order_by("-id")[:limit])


def conflict_page(*, actor: Actor, status: str, after: int | None, limit: int = PAGE_SIZE) -> Page:
    """The conflicts queue of one status, newest first, keyset-paginated like the other lists.
    Each row gets ``newer_id`` / ``older_id``: the newer node is the one that occurred later (the
    higher id on a tie), whichever side of the pair it is stored on."""
    from reflection import conflicts as conflict_service
    from reflection.models import Conflict

    p = keyset_page(conflict_service.visible_conflicts(actor=actor).filter(status=status), after=after, limit=limit)
    for c in p.rows:
        a, b = c.node_a, c.node_b
        newer, older = (a, b) if (a.occurred_at, a.id) > (b.occurred_at, b.id) else (b, a)
        c.newer_id, c.older_id = newer.id, older.id
    if status == Conflict.Status.OPEN:
        _attach_conflict_actions(actor=actor, conflicts=p.rows)
    return p


def _attach_conflict_actions(*, actor: Actor, conflicts: list) -> None:
    """Which resolutions to offer on each open conflict, and who may resolve the ones offered none.

    Display only, by the predicate ``reflection.conflicts.resolve`` itself calls
    (``assets.access.node_writable``): superseding needs the right to change the memory it closes;
    keeping both or rejecting, the right to change either. The POST is decided again by the service."""
    from assets.access import node_writable

    team_ids = {n.team_id for c in conflicts for n in (c.node_a, c.node_b)
                if n.visibility == Visibility.TEAM and n.team_id}
    teams = dict(Team.objects.filter(org=actor.org, id__in=team_ids).values_list("id", "name")) if team_ids else {}
    for c in conflicts:
        a, b = c.node_a, c.node_b
        writable = {n.id: node_writable(actor, n) for n in (a, b)}
        current = {n.id: n.valid_to is None for n in (a, b)}  # a side another resolution replaced is not kept
        c.may_keep_newer = writable[c.older_id] and current[c.newer_id]  # the newer kept: the older is closed
        c.may_keep_older = writable[c.newer_id] and current[c.older_id]
        c.may_close = writable[a.id] or writable[b.id]
        if not c.may_close:
            c.resolvers = _conflict_resolvers([a, b], teams)


def _conflict_resolvers(nodes: list[Node], teams: dict[int, str]) -> str:
    """Who may resolve a conflict between ``nodes``, in words: each memory's owner, and whoever else
    may change one of them (the write rule of ``assets.access``: an admin of its team, an org admin
    for an org-wide memory, a writer on its access list)."""
    who: list[str] = []
    for n in nodes:
        if n.visibility == Visibility.TEAM and n.team_id:
            w = gettext("an admin of the team %(team)s") % {"team": teams.get(n.team_id, n.team_id)}
        elif n.visibility == Visibility.ORG:
            w = gettext("an admin of the organisation")
        elif n.visibility == Visibility.RESTRICTED:
            w = gettext("someone with write access to the memory")
        else:
            continue
        if w not in who:
            who.append(w)
    who.append(gettext("the memories' owners"))
    text = " ".join([", ".join(who[:-1]), gettext("or"), who[-1]]) if len(who) > 1 else who[0]
    return gettext("You may not change either memory: %(who)s can resolve this conflict.") % {"who": text}


# --- audit ----------------------------------------------------------------------------------------


def audit_page(*, actor: Actor, action: str = "", actor_label: str = "", object_type: str = "",
               object_id: str = "", outcome: str = "", since: datetime | None = None,
               until: datetime | None = None, after: int | None = None, limit: int = PAGE_SIZE) -> Page:
    """The org's audit trail, newest first, keyset-paginated on (org, -id). Callers check that the
    actor is an org admin (``teams.access.require_org_admin``)."""
    from assets.models import AuditEvent

    qs = AuditEvent.objects.filter(org=actor.org)
    if action:
        qs = qs.filter(action__startswith=action)
    if actor_label:
        qs = qs.filter(actor_label__icontains=actor_label)
    if object_type:
        qs = qs.filter(object_type=object_type)
    if object_id:
        qs = qs.filter(object_id=object_id)
    if outcome:
        qs = qs.filter(outcome=outcome)
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    if until is not None:
        qs = qs.filter(created_at__lt=until)
    return keyset_page(qs, after=after, limit=limit)


# --- assets ---------------------------------------------------------------------------------------

# Listing columns of an asset: never the body (up to 100,000 characters) nor the node id array.
ASSET_LIST_COLUMNS = ("id", "kind", "title", "summary", "visibility", "status", "version", "team_id",
                      "owner_user_id", "owner_agent_id", "usage_count", "promotion", "updated_at",
                      "approved_version")
ASSET_VERSIONS_SHOWN = 100
ASSET_SIDE_ROWS = 200  # grants and bindings listed on one asset's pages
APPROVAL_PAGE = 100  # candidates read per query while filling the approval queue
APPROVAL_SCAN_MAX = 1000  # candidates read at most per approval queue (10 queries)


@dataclass(frozen=True)
class AssetFilters:
    kind: str = ""
    status: str = ""
    visibility: str = ""
    team_id: int | None = None
    owner: str = ""  # "" | "me"
    q: str = ""


def filtered_assets(*, actor: Actor, f: AssetFilters) -> QuerySet:
    """``assets.access.readable_assets`` narrowed by the filters: the list never shows an asset the
    API's list would not."""
    from assets.access import readable_assets

    qs = readable_assets(actor)
    if f.kind:
        qs = qs.filter(kind=f.kind)
    if f.status:
        qs = qs.filter(status=f.status)
    if f.visibility:
        qs = qs.filter(visibility=f.visibility)
    if f.team_id is not None:
        qs = qs.filter(team_id=f.team_id)
    if f.owner == "me":
        qs = qs.filter(owner_user=actor.user) if actor.user is not None else qs.filter(owner_agent=actor.agent)
    if f.q:
        # Title and one-line summary, not the body: a substring scan of large bodies across a
        # 100k-asset org would be the slowest query of the console for the least useful matches.
        qs = qs.filter(Q(title__icontains=f.q) | Q(summary__icontains=f.q))
    return qs


def asset_page(*, actor: Actor, f: AssetFilters, after: int | None, limit: int = PAGE_SIZE) -> Page:
    """Served by the ``asset_org_recent`` index."""
    p = keyset_page(filtered_assets(actor=actor, f=f).only(*ASSET_LIST_COLUMNS), after=after, limit=limit)
    attach_owner_labels(actor=actor, nodes=p.rows)
    return p


def assets_awaiting_approval(*, actor: Actor, limit: int = 20) -> list:
    """The newest ``limit`` promoted candidates this actor may approve. The SQL only narrows
    (candidates with a pending promotion into a team the actor administers, or any for an org
    admin; never an org-wide target for a team admin); the decision is
    ``assets.access.can_approve`` on each row, the same call the transition makes.

    That decision (a restricted target needs an ACL write grant) is not all SQL, so the rows are
    read in keyset pages, newest first, until ``limit`` approvable ones are found or the candidates
    run out: slicing ``limit`` rows first let unapprovable candidates fill the queue and hide the
    approvable ones behind them. At most ``APPROVAL_SCAN_MAX`` candidates are read per call, so a
    backlog of unapprovable ones costs a bounded number of queries (beyond it the queue may show
    fewer; the asset list filtered on status=candidate shows them all)."""
    from assets.access import can_approve
    from assets.selectors import approval_candidates

    if limit < 1:
        return []
    qs = approval_candidates(actor)
    qs = qs.only(*ASSET_LIST_COLUMNS).order_by("-id")
    page_size = max(limit, APPROVAL_PAGE)
    rows: list = []
    after: int | None = None
    scanned = 0
    while len(rows) < limit and scanned < APPROVAL_SCAN_MAX:
        page = list((qs if after is None else qs.filter(id__lt=after))[: min(page_size, APPROVAL_SCAN_MAX - scanned)])
        scanned += len(page)
        rows.extend(a for a in page if can_approve(actor, a)[0])
        if len(page) < page_size:
            break  # the candidates ran out
        after = page[-1].id
    rows = rows[:limit]
    attach_owner_labels(actor=actor, nodes=rows)
    return rows


def asset_versions(*, actor: Actor, asset) -> list:
    """The newest versions of an asset, without their bodies (a diff loads the two it compares)."""
    from assets.models import AssetVersion

    return list(AssetVersion.objects.filter(org=actor.org, asset=asset)
                .only("id", "version", "title", "content_hash", "author_label", "created_at", "approved_at")
                .order_by("-version")[:ASSET_VERSIONS_SHOWN])


def asset_version_pair(*, actor: Actor, asset, old: int, new: int) -> tuple | None:
    from assets.models import AssetVersion

    rows = {v.version: v for v in AssetVersion.objects.filter(org=actor.org, asset=asset, version__in=[old, new])}
    if old not in rows or new not in rows:
        return None
    return rows[old], rows[new]


@dataclass
class GrantRow:
    id: int
    grantee_kind: str
    label: str
    permission: str
    granted_by_label: str
    created_at: datetime


def asset_grants(*, actor: Actor, asset) -> list[GrantRow]:
    """The ACL of one asset with readable grantee names. Callers have passed
    ``assets.services.acl_object_for_admin`` (owner or org admin), as the API's grant list does."""
    from assets.models import AccessGrant, GranteeKind, ObjectType
    from assets.services import grantee_label

    grants = list(AccessGrant.objects.filter(org=actor.org, object_type=ObjectType.ASSET, object_id=asset.id)
                  .select_related("grantee_user", "grantee_agent", "grantee_team")
                  .order_by("id")[:ASSET_SIDE_ROWS])
    rows = []
    for g in grants:
        if g.grantee_kind == GranteeKind.USER:
            name = g.grantee_user.username
        elif g.grantee_kind == GranteeKind.AGENT:
            name = g.grantee_agent.name
        else:
            name = g.grantee_team.name
        rows.append(GrantRow(id=g.id, grantee_kind=g.grantee_kind, label=grantee_label(g.grantee_kind, name,
                                                                                       g.grantee_team_role),
                             permission=g.permission, granted_by_label=g.granted_by_label, created_at=g.created_at))
    return rows


def grantee_choices(*, actor: Actor) -> list[tuple[str, str]]:
    """Everyone an ACL can name in this org: members, agents, and each team as two roles, as
    (``grantee_key``, ``grantee_label``) pairs."""
    from assets.models import GranteeKind
    from assets.services import grantee_key, grantee_label

    users = get_user_model().objects.filter(memberships__org=actor.org).order_by("username").only("id", "username")
    agents = Agent.objects.filter(org=actor.org, is_active=True).order_by("name").only("id", "name")
    teams = Team.objects.filter(org=actor.org).order_by("name").only("id", "name")
    user, agent, team = GranteeKind.USER, GranteeKind.AGENT, GranteeKind.TEAM_ROLE
    return ([(grantee_key(user, u.id), grantee_label(user, u.username)) for u in users]
            + [(grantee_key(agent, a.id), grantee_label(agent, a.name)) for a in agents]
            + [(grantee_key(team, t.id, role), grantee_label(team, t.name, role)) for t in teams
               for role in ("member", "admin")])


def _binding_admin(actor: Actor, agent) -> bool:
    from rest_framework.exceptions import PermissionDenied

    from assets.services import require_binding_admin

    try:
        require_binding_admin(actor, agent)
    except PermissionDenied:
        return False
    return True


def asset_bindings(*, actor: Actor, asset) -> list:
    """Bindings of this asset to the agents whose bindings the actor manages (the API lists an
    agent's bindings to the same people: ``assets.services.require_binding_admin``).

    That rule (an org admin, or an admin of the agent's team; never an agent) is said in SQL before
    the LIMIT, so bindings to other teams' agents cannot fill the ``ASSET_SIDE_ROWS`` slice and hide
    the actor's own; ``_binding_admin`` still confirms each row, as ``bindable_agents`` does."""
    from assets.models import AgentBinding

    if actor.agent is not None or not (actor.is_org_admin or actor.team_admin_ids):
        return []
    qs = AgentBinding.objects.filter(org=actor.org, asset=asset).select_related("agent")
    if not actor.is_org_admin:
        qs = qs.filter(agent__team_id__in=list(actor.team_admin_ids))
    rows = qs.order_by("priority", "agent__name", "id")[:ASSET_SIDE_ROWS]
    return [b for b in rows if _binding_admin(actor, b.agent)]


def asset_binding(*, actor: Actor, asset_id: int, binding_id: int | None):
    """The binding ``binding_id`` of this asset in the actor's org. Only a lookup: who may remove it
    is ``assets.services.binding_remove`` (``require_binding_admin``), as for the API's DELETE,
    which does not require reading the asset."""
    from assets.models import AgentBinding

    if binding_id is None:
        return None
    return AgentBinding.objects.filter(org=actor.org, asset_id=asset_id, id=binding_id).first()


def bindable_agents(*, actor: Actor) -> list[Agent]:
    """Active agents whose bindings the actor manages (the offer; ``binding_set`` decides)."""
    if actor.agent is not None or not (actor.is_org_admin or actor.team_admin_ids):
        return []
    qs = Agent.objects.filter(org=actor.org, is_active=True).order_by("name")
    if not actor.is_org_admin:  # narrows only; each row is still decided by require_binding_admin
        qs = qs.filter(team_id__in=list(actor.team_admin_ids))
    return [a for a in qs if _binding_admin(actor, a)]
