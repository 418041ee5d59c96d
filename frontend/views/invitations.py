"""The invitee's side of a member invitation: ``/invite/<token>``.

Not a ``console_view``: the invitee may have no account yet, or be in no organisation. The link's
token is the credential for the page; accepting also needs an account whose email is the
invitation's (``teams.services``), so a forwarded link lets nobody else in."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from rest_framework import exceptions as drf

from teams import selectors as team_selectors
from teams import services
from teams.auth import SESSION_ORG_KEY
from teams.models import InvitationStatus, Membership

from ..console import add_form_errors, request_id
from ..forms import InviteSignupForm

TEMPLATE = "frontend/invite.html"

CLOSED = {
    InvitationStatus.EXPIRED: gettext_lazy("This invitation has expired. Ask an admin of the organisation for "
                                           "a new one."),
    InvitationStatus.REVOKED: gettext_lazy("This invitation was withdrawn or declined. Ask an admin of the "
                                           "organisation for a new one if you still want to join."),
    InvitationStatus.ACCEPTED: gettext_lazy("This invitation has already been used."),
}


def _closed(request, invitation, status: str | None = None):
    """404 for a link we never issued, 410 Gone for one that can no longer be used."""
    if invitation is None:
        return render(request, TEMPLATE, {"state": "invalid", "message": _(
            "This invitation link is not valid. Check that you opened the whole link, or ask for a new "
            "invitation.")}, status=404)
    return render(request, TEMPLATE, {"state": "closed", "invitation": invitation,
                                      "message": CLOSED[status or invitation.status]}, status=410)


def _joined(request, invitation, membership, *, created: bool):
    # Accepting is the user's own choice of this org, so it becomes their session's org (as the
    # switcher would make it); their other sessions keep theirs (teams.auth.resolve_user_org).
    request.session[SESSION_ORG_KEY] = invitation.org.slug
    if created:
        messages.success(request, _("Welcome, %(name)s: you joined %(org)s as %(role)s.") % {
            "org": invitation.org.name, "role": membership.get_role_display(),
            "name": membership.user.get_username()})
    else:
        messages.success(request, _("You are already a member of %(org)s.") % {"org": invitation.org.name})
    return redirect("frontend:dashboard")


@never_cache
@require_http_methods(["GET", "POST"])
def invite(request, token: str):
    invitation = team_selectors.invitation_by_token(token=token)
    if invitation is None or invitation.status != InvitationStatus.PENDING:
        return _closed(request, invitation)
    user = request.user
    if not (user.is_authenticated and user.is_active):
        if get_user_model().objects.filter(email__iexact=invitation.email.strip()).exists():
            return redirect_to_login(request.get_full_path())
        return _signup(request, invitation)
    if not services.is_invitee(invitation, user):
        return render(request, TEMPLATE, {"state": "forbidden", "invitation": invitation, "message": _(
            "This invitation is for another email address. Sign out and sign in with the account it was "
            "sent to.")}, status=403)
    rid = request_id(request)
    op = request.POST.get("op") if request.method == "POST" else None
    try:
        if op == "accept":
            membership, created = services.invitation_accept(invitation=invitation, user=user, request_id=rid)
            return _joined(request, invitation, membership, created=created)
        if op == "decline":
            services.invitation_decline(invitation=invitation, user=user, request_id=rid)
            return render(request, TEMPLATE, {"state": "declined", "invitation": invitation})
    except services.InvitationClosed as exc:  # used, revoked or expired since the page was shown
        return _closed(request, invitation, exc.status)
    already = Membership.objects.filter(org=invitation.org, user=user).exists()
    return render(request, TEMPLATE, {"state": "confirm", "invitation": invitation, "already_member": already},
                  status=400 if request.method == "POST" else 200)


def _signup(request, invitation):
    form = InviteSignupForm(request.POST if request.method == "POST" else None,
                            initial={"username": services.suggested_username(invitation.email.strip())})
    if form.is_bound and form.is_valid():
        try:
            user, membership = services.invitation_signup(invitation=invitation,
                                                          password=form.cleaned_data["password"],
                                                          username=form.cleaned_data["username"],
                                                          request_id=request_id(request))
        except services.InvitationClosed as exc:
            return _closed(request, invitation, exc.status)
        except drf.ValidationError as exc:
            add_form_errors(form, exc.detail)
        else:
            login(request, user)
            return _joined(request, invitation, membership, created=True)
    return render(request, TEMPLATE, {"state": "signup", "invitation": invitation, "form": form},
                  status=400 if form.is_bound else 200)
