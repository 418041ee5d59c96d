"""The conflicts queue: contradictions found on write, side by side, resolved through the same
service (and the same rules and audit) as POST /api/v1/conflicts/{id}/resolve."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from rest_framework import exceptions as drf

from reflection import conflicts as conflict_service
from reflection.models import Conflict

from .. import selectors
from ..console import console_view, parse_id, request_id
from .base import next_page_qs, page


@require_GET
@console_view(back="frontend:conflicts")  # a refused cursor goes back to the first page, not to itself
def conflicts(request):
    status = request.GET.get("status", Conflict.Status.OPEN)
    if status not in Conflict.Status.values:
        # said, then the open queue (the page ``back`` names): a silent open list read as "no such ones"
        raise drf.ValidationError({"status": [_("Unknown status: %(s)s.") % {"s": status[:40]}]})
    after_raw = request.GET.get("after", "")
    after = parse_id(after_raw)
    if after_raw and after is None:
        raise drf.ValidationError({"after": [_("A valid id is required.")]})
    p = selectors.conflict_page(actor=request.actor, status=status, after=after)
    return page(request, "frontend/conflicts.html",
                {"conflicts": p.rows, "page": p, "next_qs": next_page_qs(request, p), "status": status,
                 "statuses": Conflict.Status.choices, "nav": "conflicts"})


@require_POST
@console_view(back="frontend:conflicts")
def conflict_resolve(request, conflict_id: int):
    conflict = conflict_service.visible_conflicts(actor=request.actor).filter(id=conflict_id).first()
    if conflict is None:
        raise Http404
    action = request.POST.get("action", "")
    if action not in conflict_service.ACTIONS:
        messages.error(request, _("Unknown action."))
        return redirect("frontend:conflicts")
    # The API's ``keep`` (an IntegerField, min 1, null allowed; an empty form value is null): any
    # other value is refused (400, nothing written), never read as "no node named".
    keep = (request.POST.get("keep") or "").strip()
    keep_id = parse_id(keep)
    if keep and keep_id is None:
        raise drf.ValidationError({"keep": [_("A valid integer is required.")]})
    # (a keep left in the form by a supersede button clicked before belongs to no other action)
    conflict_service.resolve(actor=request.actor, conflict=conflict, action=action,
                             keep_id=keep_id if action == "supersede" else None, request_id=request_id(request))
    messages.success(request, _("Conflict %(id)s resolved: %(action)s.") % {"id": conflict.id, "action": action})
    return redirect("frontend:conflicts")
