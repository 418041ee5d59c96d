"""Memory assets: the list, one asset (content, versions and diffs, lifecycle, visibility, agent
bindings) and its access list.

Reads by id go through ``assets.access`` and every change through ``assets.services``, with the same
calls in the same order as the REST views of ``assets/apis.py``: the console refuses exactly what
the API refuses and writes the same audit entries. The rules themselves live only there."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods
from rest_framework import exceptions as drf

from assets import access as asset_access
from assets import selectors as asset_selectors
from assets import services
from assets.models import Asset, AssetKind, AssetStatus, ObjectType
from memory.models import Visibility
from nylon_project.api import team_from_input
from nylon_project.errors import Conflict
from teams import access as team_access
from teams.selectors import team_list

from .. import diffs, selectors
from ..console import (
    add_form_errors,
    console_view,
    error_text,
    form_error_text,
    htmx_error,
    is_htmx,
    parse_id,
    request_id,
)
from ..forms import (
    AssetCreateForm,
    AssetEditForm,
    AssetFilterForm,
    AssetTransitionForm,
    AssetVisibilityForm,
    BindingForm,
    GrantForm,
)
from .base import next_page_qs, page

TRANSITION_LABELS = {
    AssetStatus.CANDIDATE: gettext_lazy("Propose as candidate"),
    AssetStatus.APPROVED: gettext_lazy("Approve"),
    AssetStatus.DRAFT: gettext_lazy("Send back to draft"),
    AssetStatus.DEPRECATED: gettext_lazy("Deprecate"),
    AssetStatus.ARCHIVED: gettext_lazy("Archive"),
}


# --- list -----------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@console_view
def assets(request):
    actor = request.actor
    teams_ = list(team_list(actor=actor).order_by("name"))
    create_form = AssetCreateForm(request.POST or None, teams=teams_)
    if request.method == "POST" and create_form.is_valid():
        d = dict(create_form.cleaned_data)
        try:
            team = team_from_input(actor, d.pop("team"))
            asset = services.asset_create(actor=actor, team=team, request_id=request_id(request), **d)
        except drf.ValidationError as exc:
            # On the open form with what was typed (the 400 below), not a flash over a closed panel.
            add_form_errors(create_form, exc.detail)
        else:
            messages.success(request, _("Asset “%(title)s” created.") % {"title": asset.title})
            return redirect("frontend:asset", asset_id=asset.id)
    form = AssetFilterForm(request.GET or None, teams=teams_)
    ctx = {"form": form, "create_form": create_form, "nav": "assets", "page": None}
    if form.is_bound and not form.is_valid():
        if is_htmx(request) and request.GET.get("partial") == "rows":  # a fragment, not a page in the list
            return htmx_error(request, form_error_text(form), status=400)
        return page(request, "frontend/assets.html", ctx, status=400)
    if not form.is_bound:
        form.is_valid()  # an unbound form has no cleaned_data; use the defaults
        form.cleaned_data = {}
    p = selectors.asset_page(actor=actor, f=form.filters(), after=form.after_id, limit=form.page_size)
    ctx.update({"page": p, "next_qs": next_page_qs(request, p)})
    if is_htmx(request) and request.GET.get("partial") == "rows":
        return render(request, "frontend/partials/asset_rows.html", ctx)
    if form.after_id is None:  # the approval queue heads the first page only
        ctx["awaiting"] = selectors.assets_awaiting_approval(actor=actor)
    return page(request, "frontend/assets.html", ctx, status=400 if create_form.is_bound else 200)


# --- one asset ------------------------------------------------------------------------------------


def _hints(actor, asset: Asset) -> dict:
    """Which controls to offer. Display only: every POST is decided again by ``assets.access`` and
    the services, so a wrong hint shows a button that is then refused, never a bypass."""
    owns = asset_access._owns(actor, asset)
    writable = asset_access._writable(actor, asset, ObjectType.ASSET)[0]
    return {
        "owns": owns,
        "can_write": writable,
        "can_edit": writable and asset.status in services.EDITABLE_STATUSES,
        # the asset_update rule: a change to an approved asset by a non-approver goes back to review
        "edit_needs_review": asset.status == AssetStatus.APPROVED and not asset_access.can_approve(actor, asset)[0],
        "transitions": [(to, TRANSITION_LABELS.get(to, to))
                        for to in services.allowed_transitions(actor=actor, asset=asset)],
        "can_manage_acl": owns or actor.is_org_admin,
        "can_bind": bool(actor.is_org_admin or actor.team_admin_ids),
    }


def _diff(request, asset: Asset):
    """The diff asked for by ``?from=&to=`` (default: the previous version against the current)."""
    try:
        new = int(request.GET.get("to", asset.version))
        old = int(request.GET.get("from", new - 1))
    except ValueError:
        return None
    if old < 1 or new < 1 or old == new:
        return None
    pair = selectors.asset_version_pair(actor=request.actor, asset=asset, old=old, new=new)
    return diffs.diff_versions(*pair, view=_diff_view(request)) if pair else None


def _diff_view(request) -> str:
    return "unified" if request.GET.get("view") == "unified" else "split"


def _detail(request, asset: Asset, *, status: int = 200, **forms):
    actor = request.actor
    teams_ = list(team_list(actor=actor).order_by("name"))
    selectors.attach_owner_labels(actor=actor, nodes=[asset])
    hints = _hints(actor, asset)
    chat = asset.kind == AssetKind.CHAT_MEMORY
    nodes = selectors.nodes_by_ids(actor=actor, ids=list(asset.node_ids)) if asset.node_ids else []
    initial = {"expected_version": asset.version, "title": asset.title, "summary": asset.summary,
               "body": asset.body, "node_ids": " ".join(str(i) for i in asset.node_ids)}
    ctx = {
        "asset": asset,
        "nav": "assets",
        "statuses": AssetStatus.choices,
        "versions": selectors.asset_versions(actor=actor, asset=asset),
        "diff": _diff(request, asset),
        "diff_view": _diff_view(request),
        "nodes": nodes,
        "hidden_nodes": len(set(asset.node_ids)) - len(nodes),
        "bindings": _with_serving(selectors.asset_bindings(actor=actor, asset=asset), asset),
        "served_version": asset_selectors.served_version(asset),
        "pending_version": asset_selectors.pending_version(asset),
        "serving_note": asset_selectors.serving_note(asset),
        "edit_form": forms.get("edit_form") or AssetEditForm(initial=initial, chat_memory=chat),
        "visibility_form": forms.get("visibility_form") or AssetVisibilityForm(
            initial={"visibility": asset.visibility, "expected_version": asset.version}, teams=teams_),
        "binding_form": forms.get("binding_form") or BindingForm(agents=selectors.bindable_agents(actor=actor)),
        "error": forms.get("error", ""),
        **hints,
    }
    return page(request, "frontend/asset.html", ctx, status=status)


@require_http_methods(["GET", "POST"])
@console_view
def asset_detail(request, asset_id: int):
    if request.method == "POST":
        return _asset_post(request, asset_id)
    asset = asset_access.access_asset_by_id(request.actor, asset_id, for_write=False, request_id=request_id(request))
    return _detail(request, asset)


def _asset_post(request, asset_id: int):
    actor, rid = request.actor, request_id(request)
    op = request.POST.get("op", "")
    back = redirect("frontend:asset", asset_id=asset_id)

    if op == "edit":  # PATCH /assets/{id}: access for write, then the service
        asset = asset_access.access_asset_by_id(actor, asset_id, for_write=True, request_id=rid)
        form = AssetEditForm(request.POST, chat_memory=asset.kind == AssetKind.CHAT_MEMORY)
        if not form.is_valid():
            return _detail(request, asset, edit_form=form, status=400)
        data = dict(form.cleaned_data)
        expected = data.pop("expected_version")
        try:
            asset, versioned = services.asset_update(actor=actor, asset=asset, data=data, expected_version=expected,
                                                     request_id=rid)
        except Conflict as exc:
            # Keep what was typed, now against the current version: saving again is a deliberate
            # overwrite by someone who has just been shown that the asset changed.
            asset.refresh_from_db()
            retry = request.POST.copy()
            retry["expected_version"] = str(asset.version)
            form = AssetEditForm(retry, chat_memory=asset.kind == AssetKind.CHAT_MEMORY)
            return _detail(request, asset, edit_form=form, error=error_text(exc.detail), status=409)
        except drf.ValidationError as exc:
            # The transaction rolled back, so the asset is as it was: show the form again with what
            # was typed and the refusal on its field.
            add_form_errors(form, exc.detail)
            # A form-wide refusal (the asset left the editable states meanwhile) goes to the page's
            # error line: the edit panel is no longer rendered for such an asset.
            asset.refresh_from_db()
            return _detail(request, asset, edit_form=form, error=" ".join(form.non_field_errors()), status=400)
        if versioned and asset_selectors.pending_version(asset) is not None and asset.status == AssetStatus.CANDIDATE:
            messages.success(request, _("Saved as version %(v)s, awaiting approval: agents are still served "
                                        "version %(served)s.") % {"v": asset.version,
                                                                   "served": asset.approved_version})
        else:
            messages.success(request, _("Saved as version %(v)s.") % {"v": asset.version} if versioned
                             else _("Nothing changed: no new version."))
        return back

    if op == "transition":  # POST /assets/{id}/transition
        form = AssetTransitionForm(request.POST)
        if not form.is_valid():
            messages.error(request, _("Unknown lifecycle state."))
            return back
        to = form.cleaned_data["to"]
        asset = services.access_asset_for_transition(actor, asset_id, to=to, request_id=rid)
        asset = services.asset_transition(actor=actor, asset=asset, to=to,
                                          expected_version=form.cleaned_data["expected_version"],
                                          note=form.cleaned_data["note"], request_id=rid)
        if not asset_access.asset_readable(actor, asset)[0]:
            # An approver outside the asset's scope reads a candidate only while it awaits review:
            # after the move its page is a 404 to them, so they land on the list, told what happened.
            messages.success(request, _moved_out_of_reach(asset))
            return redirect("frontend:assets")
        messages.success(request, _("The asset is now %(status)s.") % {"status": asset.get_status_display()})
        return back

    if op == "visibility":  # PATCH {visibility} for private/restricted, POST …/promote for team/org
        asset = asset_access.access_asset_by_id(actor, asset_id, for_write=True, request_id=rid)
        form = AssetVisibilityForm(request.POST, teams=team_list(actor=actor).order_by("name"))
        if not form.is_valid():
            return _detail(request, asset, visibility_form=form, status=400)
        d = form.cleaned_data
        try:
            if d["visibility"] in (Visibility.TEAM, Visibility.ORG):
                asset = services.asset_promote(actor=actor, asset=asset, visibility=d["visibility"],
                                               team=team_from_input(actor, d["team"]),
                                               expected_version=d["expected_version"], request_id=rid)
                messages.success(request, _("Promotion proposed: the asset is a candidate until an approver "
                                            "approves it."))
            else:
                services.asset_update(actor=actor, asset=asset, data={"visibility": d["visibility"]},
                                      expected_version=d["expected_version"], request_id=rid)
                messages.success(request, _("Visibility changed."))
        except drf.ValidationError as exc:
            add_form_errors(form, exc.detail)
            return _detail(request, asset, visibility_form=form, error=" ".join(form.non_field_errors()),
                           status=400)
        return back

    if op == "bind":  # POST /agents/{id}/bindings
        asset = asset_access.access_asset_by_id(actor, asset_id, for_write=False, request_id=rid)
        form = BindingForm(request.POST, agents=selectors.bindable_agents(actor=actor))
        if not form.is_valid():
            return _detail(request, asset, binding_form=form, status=400)
        d = form.cleaned_data
        agent = team_access.access_agent_by_id(actor, d["agent"], for_write=False)
        services.require_binding_admin(actor, agent)
        try:
            services.binding_set(actor=actor, agent=agent, asset=asset, mode=d["mode"], priority=d["priority"],
                                 request_id=rid)
        except drf.ValidationError as exc:
            # the service speaks the API's fields ("asset_id: This agent may not read this asset"): on
            # the form, in words, beside what was chosen
            add_form_errors(form, exc.detail)
            return _detail(request, asset, binding_form=form, status=400)
        messages.success(request, _("Bound to %(agent)s.") % {"agent": agent.name})
        if asset_selectors.served_version(asset) is None:
            messages.warning(request, asset_selectors.serving_note(asset))
        return back

    if op == "unbind":  # DELETE /agents/{id}/bindings/{binding}: the API's calls, no asset read check
        binding = selectors.asset_binding(actor=actor, asset_id=asset_id,
                                          binding_id=parse_id(request.POST.get("binding_id")))
        if binding is None:
            raise Http404
        agent = team_access.access_agent_by_id(actor, binding.agent_id, for_write=False)
        services.binding_remove(actor=actor, agent=agent, binding_id=binding.id, request_id=rid)
        messages.success(request, _("Binding removed."))
        return back

    messages.error(request, _("Unknown action."))
    return back


def _moved_out_of_reach(asset: Asset) -> str:
    """What a lifecycle move did, for an actor who can no longer open the asset."""
    served = asset_selectors.served_version(asset)
    audience = {Visibility.TEAM: _("the team's agents bound to it"), Visibility.ORG: _("the org's agents bound to it"),
                Visibility.RESTRICTED: _("the bound agents on its access list")}.get(asset.visibility,
                                                                                   _("its owner's bound agents"))
    args = {"title": asset.title, "v": asset.version, "served": served, "audience": audience}
    if asset.status == AssetStatus.APPROVED:
        text = _("Approved “%(title)s” (version %(v)s); it is now served to %(audience)s.") % args
    elif asset.status == AssetStatus.DRAFT:
        text = (_("Sent “%(title)s” back to its owner as a draft (version %(v)s); %(audience)s are still served "
                  "version %(served)s.") if served is not None else
                _("Sent “%(title)s” back to its owner as a draft (version %(v)s); nothing of it is served.")) % args
    elif asset.status == AssetStatus.DEPRECATED:
        text = _("Deprecated “%(title)s”; agents receive nothing from it now.") % args
    else:
        text = _("“%(title)s” is now %(status)s.") % {**args, "status": asset.get_status_display()}
    return text + " " + _("You can no longer open it: it is not shared with you.")


# --- access list ----------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@console_view
def asset_acl(request, asset_id: int):
    """The ACL of a restricted asset, for its owner or an org admin (``GET/POST /grants``,
    ``DELETE /grants/{id}``). An org admin who cannot read the asset may still manage its ACL, and
    grant itself access (audited as a self-grant); the page then names the asset by id only."""
    actor, rid = request.actor, request_id(request)
    try:
        asset, reason = services.acl_object_for_admin(actor, ObjectType.ASSET, asset_id, request_id=rid)
    except drf.ValidationError as exc:  # not restricted: no ACL; back to the asset's own page
        messages.error(request, error_text(exc.detail))
        return redirect("frontend:asset", asset_id=asset_id)
    grantees = selectors.grantee_choices(actor=actor)
    form = GrantForm(request.POST if request.POST.get("op") == "grant" else None, grantees=grantees)
    if request.method == "POST":
        op = request.POST.get("op")
        if op == "grant" and form.is_valid():
            grant = services.grant_create(actor=actor, obj=asset, object_type=ObjectType.ASSET, reason=reason,
                                          permission=form.cleaned_data["permission"], request_id=rid,
                                          **form.cleaned_data["grantee"])
            who = dict(grantees).get(request.POST.get("grantee", ""), services.grant_label(grant))
            messages.success(request, _("Access granted to %(who)s.") % {"who": who})
            return redirect("frontend:asset-acl", asset_id=asset.id)
        if op == "revoke":
            grant_id = parse_id(request.POST.get("grant_id"))
            if grant_id is None:
                raise Http404
            grant = services.grant_get_for_admin(actor, grant_id, request_id=rid)
            if grant.object_type != ObjectType.ASSET or grant.object_id != asset.id:
                raise Http404  # a grant of another object is not revoked through this page
            services.grant_revoke(actor=actor, grant=grant, request_id=rid)
            messages.success(request, _("Access revoked."))
            return redirect("frontend:asset-acl", asset_id=asset.id)
        if op != "grant":
            messages.error(request, _("Unknown action."))
            return redirect("frontend:asset-acl", asset_id=asset.id)
    ctx = {
        "asset": asset,
        "readable": asset_access.asset_readable(actor, asset)[0],
        "as_admin": reason == "org_admin",
        "grants": selectors.asset_grants(actor=actor, asset=asset),
        "form": form,
        "nav": "assets",
    }
    return page(request, "frontend/asset_acl.html", ctx, status=400 if form.is_bound else 200)


def _with_serving(bindings, asset) -> list:
    """Each binding with ``unserved_note`` when its agent receives nothing because the asset's
    visibility no longer includes it (the asset's own note covers drafts and pending edits)."""
    from assets.access import agent_eligible

    out = list(bindings)
    for b in out:
        b.asset = asset  # the page's own: no query per row
        b.unserved_note = "" if agent_eligible(b.agent, b.asset) else asset_selectors.binding_serving(b)[1]
    return out
