"""The five questions every memory answers (seed 004): where it came from, what refined it, what
it conflicts with and which version is valid, who may change it, and what is degraded right now.
("Why it was recalled this time" is the explanation each resonate hit carries.)

Everything listed here is filtered by what the actor may read: lineage never names a hidden node.
"""

from __future__ import annotations

from django.db.models import Q

from memory.models import Edge, Node, Visibility
from memory.selectors import visible_nodes
from teams.auth import Actor

from .access import node_writable, readable_assets
from .models import AccessGrant, AssetVersion, ObjectType
from .selectors import as_read_by, served_to_q, versions_read_by


def node_governance(*, actor: Actor, node: Node) -> dict:
    visible = visible_nodes(actor=actor)
    sources = list(visible.filter(id__in=node.source_node_ids).values("id", "kind", "text")[:50])
    derived_ids = list(Edge.objects.filter(org=actor.org, kind="derived")
                       .filter(Q(src=node) | Q(dst=node)).values_list("src_id", "dst_id")[:200])
    other = {a if b == node.id else b for a, b in derived_ids}
    derived = list(visible.filter(id__in=other, source_node_ids__contains=[node.id])
                   .values("id", "kind", "text", "source_kind")[:50])
    assets = []
    # An agent is told of the assets it does not own as they are served (their approved version), as
    # everywhere else: not the title of an edit awaiting review, nor a version newer than the served one.
    found = list(readable_assets(actor).filter(served_to_q(actor)).filter(node_ids__contains=[node.id])[:20])
    for asset in as_read_by(actor, found):
        if node.id not in asset.node_ids:  # only the version awaiting review holds this memory
            continue
        rows = versions_read_by(actor, asset, AssetVersion.objects.filter(asset=asset))
        versions = list(rows.order_by("-version").values("version", "content_hash", "created_at")[:10])
        assets.append({"id": asset.id, "kind": asset.kind, "title": asset.title, "status": asset.status,
                       "version": asset.version, "versions": versions})
    superseding = list(visible.filter(id__in=Edge.objects.filter(org=actor.org, kind="supersedes", dst=node)
                                      .values("src_id")).values_list("id", flat=True))
    conflicts = []
    try:
        from reflection.models import Conflict
    except ImportError:  # the workers app is optional for this read
        Conflict = None
    if Conflict is not None:
        visible_ids = visible.values("id")
        for c in (Conflict.objects.filter(org=actor.org).filter(Q(node_a=node) | Q(node_b=node))
                  .filter(node_a_id__in=visible_ids, node_b_id__in=visible_ids)[:20]):
            conflicts.append({"id": c.id, "other_node_id": c.node_b_id if c.node_a_id == node.id else c.node_a_id,
                              "reason": c.reason, "detector": c.detector, "status": c.status})
    writers = ["owner"]
    if node.visibility == Visibility.RESTRICTED:
        writers.append("holders of a write grant")
        grants = AccessGrant.objects.filter(org=actor.org, object_type=ObjectType.NODE, object_id=node.id).count()
    else:
        grants = 0
        if node.team_id:
            writers.append("admins of its team")
        if node.visibility == Visibility.ORG:
            writers.append("org admins")
    from nylon_project.health import _embedder
    from reflection.llm import llm_state

    return {
        "node_id": node.id,
        "provenance": {"source_kind": node.source_kind, "source_user_id": node.source_user_id,
                       "source_agent_id": node.source_agent_id, "session_key": node.session_key,
                       "event_id": node.event_id, "occurred_at": node.occurred_at, "created_at": node.created_at},
        "lineage": {"sources": sources, "derived": derived, "assets": assets},
        "validity": {"valid_from": node.valid_from, "valid_to": node.valid_to, "superseded_by": superseding,
                     "is_current": node.valid_to is None},
        "conflicts": conflicts,
        "change_rights": {"you_may_change": node_writable(actor, node), "who": writers, "acl_grants": grants},
        "dependencies": {"embedded": node.embedded, "embedder": _embedder(), "llm": llm_state(actor.org)},
    }
