"""Memory browser, node drawer, neighbourhood graph and the resonate playground."""

from __future__ import annotations

import time

from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from rest_framework import exceptions as drf

from assets import access as node_access
from assets.context import matched_ids, recall_for
from memory import services as memory_services
from memory.engine.types import NodeKind as EngineNodeKind
from memory.selectors import visible_nodes
from teams.selectors import team_list

from .. import charts, selectors
from ..console import add_form_errors, console_view, form_error_text, htmx_error, is_htmx, request_id
from ..forms import NodeFilterForm, ResonateForm
from .base import next_page_qs, page


def _filter_form(request) -> NodeFilterForm:
    actor = request.actor
    return NodeFilterForm(request.GET or None, owners=selectors.owner_choices(actor=actor),
                          teams=team_list(actor=actor).order_by("name"))


@require_GET
@console_view
def memory_browser(request):
    form = _filter_form(request)
    if form.is_bound and not form.is_valid():
        if is_htmx(request) and request.GET.get("partial") == "rows":  # a fragment, not a page in the list
            return htmx_error(request, form_error_text(form), status=400)
        return page(request, "frontend/memories.html", {"form": form, "page": None, "nav": "memories"}, status=400)
    if not form.is_bound:
        form.is_valid()  # an unbound form has no cleaned_data; use the defaults
        form.cleaned_data = {}
    try:
        p = selectors.node_page(actor=request.actor, f=form.filters(), after=form.after_id, limit=form.page_size)
    except drf.ValidationError as exc:  # an ``after`` that names no row of the list: the bad-filter answer
        add_form_errors(form, exc.detail)
        if is_htmx(request) and request.GET.get("partial") == "rows":
            return htmx_error(request, form_error_text(form), status=400)
        return page(request, "frontend/memories.html", {"form": form, "page": None, "nav": "memories"}, status=400)
    ctx = {"form": form, "page": p, "nav": "memories",
           "next_qs": next_page_qs(request, p)}
    if is_htmx(request) and request.GET.get("partial") == "rows":
        return render(request, "frontend/partials/node_rows.html", ctx)
    return page(request, "frontend/memories.html", ctx)


def _can_write(actor, node) -> bool:
    """Whether to offer the delete button; the POST is decided again by ``access_node``."""
    writable = getattr(node_access, "node_writable", None)
    if writable is not None:
        return bool(writable(actor, node))
    try:
        return bool(node_access._writable(actor, node, "node")[0])
    except Exception:  # the button is only a hint; the server decides on POST
        return True


@require_GET
@console_view
def node_drawer(request, node_id: int):
    actor = request.actor
    node = node_access.access_node(actor, node_id, for_write=False, request_id=request_id(request))
    selectors.attach_owner_labels(actor=actor, nodes=[node])
    edges, hidden_edges, hidden_edges_more = selectors.node_edges(actor=actor, node=node)
    age_days = max(0.0, (timezone.now() - node.tension_updated_at).total_seconds() / 86400.0)
    ctx = {
        "node": node,
        "edges": edges,
        "hidden_edges": hidden_edges,
        "hidden_edges_more": hidden_edges_more,
        "lineage": selectors.lineage(actor=actor, node=node, edges=edges),
        "conflicts": selectors.node_conflicts(actor=actor, node=node),
        "versions": selectors.node_versions(node=node, edges=edges),
        "curve": charts.tension_curve(t0=node.t0, lam=node.lam, mentions=node.mentions, age_days=age_days),
        "age_days": round(age_days, 1),
        "can_delete": _can_write(actor, node),
        "nav": "memories",
    }
    if is_htmx(request):
        return render(request, "frontend/partials/node_drawer.html", ctx)
    return page(request, "frontend/node.html", ctx)


@require_POST
@console_view(back="frontend:node")
def node_delete(request, node_id: int):
    actor = request.actor
    node = node_access.access_node(actor, node_id, for_write=True, request_id=request_id(request))
    deleted = memory_services.node_delete(actor=actor, node=node, request_id=request_id(request))
    if deleted.derived_ids:
        messages.success(request, ngettext(
            "Memory #%(id)s deleted, with %(n)s memory drawn only from it.",
            "Memory #%(id)s deleted, with %(n)s memories drawn only from it.",
            len(deleted.derived_ids)) % {"id": node_id, "n": len(deleted.derived_ids)})
    else:
        messages.success(request, _("Memory #%(id)s deleted.") % {"id": node_id})
    # Named only where this user may read them (a memory the resolver could change may be private
    # to someone else); the others are counted.
    readable = set(visible_nodes(actor=actor).filter(id__in=deleted.reinstated_ids).values_list("id", flat=True))
    back = [b for b in deleted.reinstated_ids if b in readable]
    hidden = len(deleted.reinstated_ids) - len(back)
    if len(back) == 1:
        messages.info(request, _("Memory #%(back)s, which it had superseded, is current again.") % {"back": back[0]})
    elif back:
        messages.info(request, _("Memories %(back)s, which it had superseded, are current again.")
                      % {"back": ", ".join(f"#{b}" for b in back)})
    if hidden:
        messages.info(request, ngettext(
            "%(n)s memory it had superseded, which you cannot read, is current again.",
            "%(n)s memories it had superseded, which you cannot read, are current again.", hidden) % {"n": hidden})
    return redirect("frontend:memories")


@require_GET
@console_view
def node_graph(request, node_id: int):
    node = node_access.access_node(request.actor, node_id, for_write=False, request_id=request_id(request))
    return page(request, "frontend/graph.html", {"node": node, "nav": "memories",
                                                 "legend": selectors.EDGE_COLORS.items()})


@require_GET
@console_view
def node_graph_json(request, node_id: int):
    node = node_access.access_node(request.actor, node_id, for_write=False, request_id=request_id(request))
    try:
        depth = int(request.GET.get("depth", "1"))
    except ValueError:
        depth = 1
    return JsonResponse(selectors.neighbourhood(actor=request.actor, node=node, depth=depth))


_KINDS = {int(k): k.name.lower() for k in EngineNodeKind}


@require_http_methods(["GET", "POST"])
@console_view
def resonate(request):
    form = ResonateForm(request.POST or None)
    ctx: dict = {"form": form, "nav": "resonate"}
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        t = time.perf_counter()
        # What an agent is shown for the query (the context's recall, MCP memory_resonate): a fact
        # restating a turn also listed, and the same statement twice, are one hit naming the others.
        found = recall_for(actor=request.actor, query=d["query"], k=d["k"], depth=d["depth"])
        shown = found.hits[:d["k"]]
        if d["reinforce"] and (recalled := matched_ids(shown)):
            memory_services.record_recall(node_ids=recalled)
        path_ids = sorted({i for h in shown for i in h.hit.explanation.path})
        snippets = {n.id: n.text for n in selectors.nodes_by_ids(actor=request.actor, ids=path_ids)}
        ctx.update({
            "ran": True,
            "out": found.outcome,
            "embed_ms": found.embed_ms + found.outcome.embed_ms,
            "total_ms": found.embed_ms + found.outcome.total_ms,
            "hits": [{"hit": h.hit, "kind": _KINDS.get(h.hit.kind, str(h.hit.kind)), "recalled": h,
                      "path": [(i, snippets.get(i, "")) for i in h.hit.explanation.path]} for h in shown],
            # as the context says it (assets.context.NO_MATCH): the nearest hits are listed all the
            # same, and read as answers unless something says none of them matches
            "no_match": found.no_match(shown),
            "elapsed_ms": round((time.perf_counter() - t) * 1000, 1),
        })
    if is_htmx(request):
        return render(request, "frontend/partials/resonate_results.html", ctx,
                      status=400 if form.is_bound and not form.is_valid() else 200)
    return page(request, "frontend/resonate.html", ctx)
