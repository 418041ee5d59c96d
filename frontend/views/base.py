"""Sign-out, org switcher, dashboard, health panel and the live feed (sign-in: account.py)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from nylon_project import health
from reflection.llm import llm_state

from .. import charts, selectors
from ..console import console_view, parse_id, user_orgs


def querystring(request, **changes) -> str:
    """The current query string with ``changes`` applied (None removes a key): list pagination links."""
    q = request.GET.copy()
    for k, v in changes.items():
        if v is None:
            q.pop(k, None)
        else:
            q[k] = str(v)
    return q.urlencode()


def next_page_qs(request, p) -> str:
    """The query string of a keyset list's next page (``after`` = the page's last id), or "" on
    the last page."""
    return querystring(request, after=p.next_after) if p.next_after else ""


def js_strings() -> dict[str, str]:
    """The console scripts' few strings, translated here and embedded in each page as JSON
    (``json_script``): no separate catalog request, and the scripts stay static files."""
    return {
        "live": _("live"),
        "disconnected": _("disconnected"),
        "graph_stats": _("%(nodes)s nodes, %(edges)s edges"),
    }


def page(request, template: str, context: dict | None = None, *, status: int = 200):
    """Renders a console page with the shell context (actor, org switcher, script strings)."""
    ctx = {"actor": request.actor, "org": request.org, "orgs": list(user_orgs(request.user)),
           "is_admin": request.actor.is_org_admin, "js_strings": js_strings()}
    ctx.update(context or {})
    return render(request, template, ctx, status=status)


class LogoutView(auth_views.LogoutView):
    next_page = "frontend:login"


def home(request):
    return redirect("frontend:dashboard")


@require_POST
@console_view(back="frontend:dashboard", any_org=True)  # sent from a tab of any org: never refused
def org_switch(request):
    slug = request.POST.get("org", "")
    # Only an org the user belongs to can be chosen; any other slug does not exist for them.
    if not user_orgs(request.user).filter(slug=slug).exists():
        raise Http404
    request.session["org_slug"] = slug
    messages.success(request, _("Switched organisation."))
    back = request.POST.get("next") or ""
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = ""
    path = urlsplit(back).path
    # The query string is dropped: its filters name rows of the org just left (?team=1 is no
    # choice in the new org, a 400 there), so the new org's page opens unfiltered. The bare path
    # is checked again: "http://host//evil.example/" has the path "//evil.example/", another site.
    if not url_has_allowed_host_and_scheme(path, allowed_hosts={request.get_host()}):
        path = ""
    back = path
    try:
        match = resolve(path) if back else None
    except Resolver404:
        match = None
    if match is not None and match.namespace == "frontend" and match.kwargs and path.startswith("/console/"):
        # An object page (an asset, a memory, a team…) names a row of the org just left: in the new
        # org it is a 404. Its section's list page is the same place there (else the dashboard).
        section = "/console/" + path.split("/")[2] + "/"
        try:
            listed = resolve(section)
        except Resolver404:
            listed = None
        back = section if listed is not None and listed.namespace == "frontend" and not listed.kwargs else ""
    return redirect(back or "frontend:dashboard")


@require_GET
@console_view
def dashboard(request):
    actor = request.actor
    counts = selectors.dashboard_counts(actor=actor)
    series = selectors.writes_per_hour(actor=actor)
    return page(request, "frontend/dashboard.html", {
        "counts": counts,
        "chart": charts.hourly_bars(series),
        "conflicts": selectors.recent_conflicts(actor=actor),
        # Approvers learn of what waits for them where they land, not only on the assets page.
        "awaiting": len(selectors.assets_awaiting_approval(actor=actor, limit=20)),
        "nav": "dashboard",
    })


def _queue_depth() -> dict:
    import redis

    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    conn = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=1)
    return {"queue": queue, "depth": int(conn.llen(queue))}


@require_GET
@console_view
def health_panel(request):
    """Loaded by the dashboard after it renders (the worker ping may take a second)."""
    checks = {
        "database": health._timed(health._database),
        "redis": health._timed(health._redis),
        "worker": health._timed(health._worker),
        "queue": health._timed(_queue_depth),
        "embedder": health._timed(health._embedder),
        # The org's own LLM when it has one (Organization.settings["llm"]), not the instance's.
        "llm": health._timed(lambda: llm_state(request.org)),
    }
    return render(request, "frontend/partials/health.html", {"checks": checks})


@require_GET
@console_view
def feed_nodes(request):
    """Live feed rows for the node ids of a ``memory.woven`` event: only those the actor may see."""
    ids = [i for i in (parse_id(part) for part in request.GET.get("ids", "").split(",")) if i is not None]
    nodes = selectors.nodes_by_ids(actor=request.actor, ids=ids[:50]) if ids else []
    if request.GET.get("as") == "rows":  # for the memory browser's table
        if not nodes:
            return HttpResponse("")
        return render(request, "frontend/partials/node_rows.html", {"page": selectors.Page(nodes, None)})
    return render(request, "frontend/partials/feed_nodes.html", {"nodes": nodes})
