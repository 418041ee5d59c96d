"""Teams, members and roles, agents and API keys, and the audit log.

Every read goes through ``teams.selectors`` / ``teams.access`` and every change through
``teams.services``, exactly as the REST API does; this module never decides who may do what."""

from __future__ import annotations

import base64
import secrets
import time
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from rest_framework import exceptions as drf

from teams import access, services
from teams import selectors as team_selectors
from teams.models import Role

from .. import selectors
from ..console import add_form_errors, console_view, request_id
from ..forms import (
    AgentForm,
    AgentSharingForm,
    AuditFilterForm,
    KeyForm,
    MemberAddForm,
    MemberRoleForm,
    TeamDeleteForm,
    TeamForm,
    TeamMemberForm,
    day_end,
    day_start,
)
from .base import next_page_qs, page

# --- teams ----------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@console_view
def teams(request):
    actor = request.actor
    form = TeamForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            team = services.team_create(actor=actor, request_id=request_id(request), **form.cleaned_data)
        except drf.ValidationError as exc:  # a name taken up to case: on the form, with the 400 below
            add_form_errors(form, exc.detail)
        else:
            messages.success(request, _("Team “%(name)s” created.") % {"name": team.name})
            return redirect("frontend:team", team_id=team.id)
    rows = team_selectors.team_list(actor=actor).order_by("name")
    return page(request, "frontend/teams.html", {"teams": rows, "form": form, "nav": "teams"},
                status=400 if form.is_bound else 200)


def _memories_and_assets(nodes: int, assets: int) -> str:
    return _("%(memories)s and %(assets)s") % {
        "memories": ngettext("%(n)s memory", "%(n)s memories", nodes) % {"n": nodes},
        "assets": ngettext("%(n)s asset", "%(n)s assets", assets) % {"n": assets}}


def _holdings_text(held) -> str:
    return _memories_and_assets(held.shared_nodes, held.shared_assets)


def _delete_texts(team, held) -> dict:
    """The sentences of the deletion's confirmation: what each choice does, with the counts (the
    move's ``%(team)s`` is the chosen team, filled in by console.js), and what happens anyway."""
    what = _holdings_text(held)
    agents = ", ".join(a.name for a in held.agents)
    tail = [_("Delete team %(name)s?") % {"name": team.name}]
    if held.agents:
        tail.append(ngettext("Its agent %(agents)s leaves it and will share what it writes with nobody by default.",
                             "Its agents %(agents)s leave it and will share what they write with nobody by default.",
                             len(held.agents)) % {"agents": agents}
                    if any(a.default_visibility == "team" for a in held.agents) else
                    ngettext("Its agent %(agents)s leaves it.", "Its agents %(agents)s leave it.",
                             len(held.agents)) % {"agents": agents})
    if held.grants:
        tail.append(ngettext("%(n)s access grant to the team is removed.",
                             "%(n)s access grants to the team are removed.", held.grants) % {"n": held.grants})
    tail.append(_("This cannot be undone."))
    return {
        # %(team)s stays for console.js: the team chosen in the form.
        "move": _("%(what)s shared with it move to team %(team)s, whose members will read them.")
        % {"what": what, "team": "%(team)s"},
        "private": _("%(what)s shared with it become private to their writers: nobody else reads them.")
        % {"what": what},
        "confirm": " ".join(tail),
    }


def _deleted_message(d) -> str:
    parts = [_("Team “%(name)s” deleted.") % {"name": d.team["name"]}]
    what = _memories_and_assets(d.nodes["shared"], d.assets["shared"])
    if d.memories == "move":
        parts.append(_("%(what)s moved to team %(team)s.") % {"what": what, "team": d.to_team["name"]})
    elif d.memories == "private" and (d.nodes["shared"] or d.assets["shared"]):
        parts.append(_("%(what)s made private to their writers.") % {"what": what})
    if d.agents:
        parts.append(_("Now in no team: %(agents)s.") % {"agents": ", ".join(
            a["name"] + (_(" (its writes that name no visibility are now private)")
                         if a["previous_default_visibility"] != a["default_visibility"] else "")
            for a in d.agents)})
    return " ".join(parts)


@require_http_methods(["GET", "POST"])
@console_view
def team_detail(request, team_id: int):
    actor = request.actor
    team = access.access_team_by_id(actor, team_id, for_write=request.method == "POST")
    org_members = team_selectors.member_list(actor=actor).order_by("user__username")
    op = request.POST.get("op")
    add_form = TeamMemberForm(request.POST if op == "add" else None, members=org_members)
    edit_form = TeamForm(request.POST if op == "edit" else None,
                         initial={"name": team.name, "description": team.description})
    other_teams = team_selectors.team_list(actor=actor).exclude(pk=team.pk).order_by("name")
    delete_form = TeamDeleteForm(request.POST if op == "delete" else None, teams=other_teams)
    status = 400 if request.method == "POST" else 200
    if request.method == "POST":
        rid = request_id(request)
        if op == "add" and add_form.is_valid():
            services.team_member_set(actor=actor, team=team, request_id=rid, **add_form.cleaned_data)
            messages.success(request, _("Team membership saved."))
            return redirect("frontend:team", team_id=team.id)
        if op == "remove":
            try:
                user_id = int(request.POST.get("user_id", ""))
            except ValueError:
                raise Http404 from None
            if not services.team_member_remove(actor=actor, team=team, user_id=user_id, request_id=rid):
                raise Http404
            messages.success(request, _("Removed from the team."))
            return redirect("frontend:team", team_id=team.id)
        if op == "edit" and edit_form.is_valid():
            try:
                services.team_update(actor=actor, team=team, data=edit_form.cleaned_data, request_id=rid)
            except drf.ValidationError as exc:
                add_form_errors(edit_form, exc.detail)  # shown with the 400 below, the input kept
            else:
                messages.success(request, _("Team saved."))
                return redirect("frontend:team", team_id=team.id)
        if op == "delete" and delete_form.is_valid():
            d = delete_form.cleaned_data
            to_team = other_teams.filter(pk=d["to_team"]).first() if d["to_team"] else None
            if d["to_team"] and to_team is None:
                delete_form.add_error("to_team", _("Choose another team of this organisation."))
            else:
                try:
                    done = services.team_delete(actor=actor, team=team, memories=d["memories"] or None,
                                                to_team=to_team if d["memories"] == "move" else None,
                                                request_id=rid)
                except services.TeamNotEmpty as exc:
                    # The page's words, not the API's parameters (memories=move, to_team_id).
                    counts = exc.counts
                    delete_form.add_error("memories", _(
                        "%(memories)s and %(assets)s are still shared with this team: choose below whether "
                        "they move to another team or become private to their writers.")
                        % {"memories": ngettext("%d memory", "%d memories", counts["memories"]) % counts["memories"],
                           "assets": ngettext("%d asset", "%d assets", counts["assets"]) % counts["assets"]})
                    status = 409
                except drf.ValidationError as exc:
                    add_form_errors(delete_form, exc.detail)
                else:
                    messages.success(request, _deleted_message(done))
                    return redirect("frontend:teams")
    held = team_selectors.team_holdings(team=team) if actor.is_org_admin else None
    ctx = {
        "team": team,
        "members": team_selectors.team_member_list(actor=actor, team=team).order_by("user__username"),
        "agents": team.agents.order_by("name"),
        "add_form": add_form,
        "edit_form": edit_form,
        "delete_form": delete_form,
        "other_teams": other_teams.exists() if held else False,
        "holdings": held,
        "holdings_text": _holdings_text(held) if held else "",
        "delete_texts": _delete_texts(team, held) if held else None,
        "can_admin": access.can_admin_team(actor, team.id),
        "nav": "teams",
    }
    return page(request, "frontend/team.html", ctx, status=status)


# --- members --------------------------------------------------------------------------------------


def _member_add_form(actor, data=None) -> MemberAddForm:
    """The invitation form with the roles the actor may grant (an admin invites admins and members)."""
    form = MemberAddForm(data)
    if not actor.is_org_owner:
        form.fields["role"].choices = [c for c in Role.choices if c[0] != Role.OWNER]
    return form


@never_cache
@require_http_methods(["GET", "POST"])
@console_view
def members(request):
    actor = request.actor
    form = _member_add_form(actor, request.POST or None)
    invited, invite_url = None, None
    status = 400 if form.is_bound else 200
    if request.method == "POST" and form.is_valid():
        # The service ends an email's open invitation when it issues a new one (a resend); the admin
        # who sent the first link must learn it is dead, or they tell the invitee to use it.
        resend = (actor.is_org_admin and team_selectors.invitation_pending_list(actor=actor)
                  .filter(email__iexact=form.cleaned_data["email"].strip()).exists())
        try:
            invited, invite_url = services.member_invite(actor=actor, base_url=request.build_absolute_uri("/"),
                                                         request_id=request_id(request), **form.cleaned_data)
        except drf.ValidationError as exc:
            # The service's refusals (already a member, too long) belong on the form's fields, shown
            # with the 400 below, like the form's own errors.
            add_form_errors(form, exc.detail)
        except drf.Throttled as exc:  # the org's hourly cap of invitations (the API's 429)
            add_form_errors(form, exc.detail)
            status = 429
        else:
            if invite_url is None and services.invitation_mail_failed(invited):
                form.add_error("email", _("The invitation email could not be sent, so no invitation was "
                                          "issued; try again later."))
                invited, status = None, 503
            else:
                # Only what the admin typed: whether an account has this email is not theirs to learn.
                if resend:
                    messages.success(request, _("%(who)s invited again: the earlier invitation link no longer "
                                                "works, only this new one does.") % {"who": invited.email})
                else:
                    messages.success(request, _("%(who)s invited.") % {"who": invited.email})
                form, status = _member_add_form(actor), 200
    rows = list(team_selectors.member_list(actor=actor).order_by("user__username"))
    # Only the controls the service would accept (teams.services._check_role_change): an admin who is
    # not an owner may not grant the owner role nor change or remove an owner. They were offered and
    # answered with a full "Not allowed" page after the confirmation.
    role_choices = [(v, label) for v, label in MemberRoleForm().fields["role"].choices
                    if actor.is_org_owner or v != Role.OWNER]
    for m in rows:
        m.manageable = actor.is_org_admin and (actor.is_org_owner or m.role != Role.OWNER)
    invitations = None
    if actor.is_org_admin:  # invitations are for org admins only (teams.access.access_invitation_by_id)
        invitations = team_selectors.invitation_pending_list(actor=actor).order_by("-id")
    # The link is rendered once, in this response only (only its hash is stored, never redirected).
    return page(request, "frontend/members.html", {
        "members": rows, "form": form, "role_choices": role_choices, "invitations": invitations,
        "invited": invited, "invite_url": invite_url, "nav": "members",
    }, status=status)


@require_POST
@console_view(back="frontend:members")
def invitation_revoke(request, invitation_id: int):
    invitation = access.access_invitation_by_id(request.actor, invitation_id)
    services.invitation_revoke(actor=request.actor, invitation=invitation, request_id=request_id(request))
    messages.success(request, _("Invitation of %(email)s revoked.") % {"email": invitation.email})
    return redirect("frontend:members")


@require_POST
@console_view(back="frontend:members")
def member_update(request, user_id: int):
    actor = request.actor
    membership = access.access_membership_by_user_id(actor, user_id, for_write=True)
    if request.POST.get("op") == "remove":
        services.member_remove(actor=actor, membership=membership, request_id=request_id(request))
        messages.success(request, _("Member removed."))
        return redirect("frontend:members")
    form = MemberRoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Unknown role."))
        return redirect("frontend:members")
    services.member_set_role(actor=actor, membership=membership, role=form.cleaned_data["role"],
                             request_id=request_id(request))
    messages.success(request, _("Role changed."))
    return redirect("frontend:members")


# --- agents and keys ------------------------------------------------------------------------------


def _team_or_none(actor, team_id):
    return access.access_team_by_id(actor, team_id, for_write=False) if team_id else None


@require_http_methods(["GET", "POST"])
@console_view
def agents(request):
    actor = request.actor
    teams_ = team_selectors.team_list(actor=actor).order_by("name")
    form = AgentForm(request.POST or None, teams=teams_)
    if request.method == "POST" and form.is_valid():
        d = dict(form.cleaned_data)
        team = _team_or_none(actor, d.pop("team"))
        agent = services.agent_create(actor=actor, team=team, request_id=request_id(request), **d)
        messages.success(request, _("Agent “%(name)s” created. Create a key for it below.") % {"name": agent.name})
        return redirect("frontend:agent", agent_id=agent.id)
    rows = team_selectors.agent_list(actor=actor).order_by("name")
    return page(request, "frontend/agents.html", {"agents": rows, "form": form, "nav": "agents"},
                status=400 if form.is_bound else 200)


# A new key's secret is shown once, on the GET the create POST redirects to (so a reload repeats
# the GET, never the POST: reloading the POST's own page used to create a second live key). Between
# the two it is split: the session (rows in the database) keeps the secret XORed with a one-time pad
# of random bytes, the redirect's URL carries the pad; neither alone tells anything about the secret.
# The GET takes the entry out of the session, so a reload, or the URL from the history, shows nothing.
SESSION_NEW_KEYS = "frontend_new_keys"
NEW_KEY_TTL_SECS = 300


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def _new_key_hold(request, agent_id: int, plain_key: str) -> str:
    """Keeps the pad-encrypted secret in the session; returns the token for the redirect's URL."""
    raw = plain_key.encode()
    pad = secrets.token_bytes(len(raw))
    entry_id = secrets.token_urlsafe(9)
    now = time.time()
    held = {k: v for k, v in request.session.get(SESSION_NEW_KEYS, {}).items() if now - v["at"] < NEW_KEY_TTL_SECS}
    held[entry_id] = {"agent": agent_id, "ct": _b64(_xor(raw, pad)), "at": now}
    request.session[SESSION_NEW_KEYS] = held
    return f"{entry_id}.{_b64(pad)}"


def _new_key_take(request, agent_id: int, token: str) -> str | None:
    """The secret behind ``token``, once: its entry leaves the session (with any stale ones)."""
    held = request.session.get(SESSION_NEW_KEYS)
    if not held:
        return None
    entry_id, _dot, pad_text = token.partition(".")
    entry = held.get(entry_id)
    if entry is None or entry["agent"] != agent_id:
        return None
    now = time.time()
    request.session[SESSION_NEW_KEYS] = {k: v for k, v in held.items()
                                         if k != entry_id and now - v["at"] < NEW_KEY_TTL_SECS}
    if now - entry["at"] >= NEW_KEY_TTL_SECS:
        return None
    try:
        return _xor(_unb64(entry["ct"]), _unb64(pad_text)).decode()
    except (ValueError, UnicodeDecodeError):  # a mangled pad: length or base64 wrong, or not the key's
        return None


@never_cache
@require_http_methods(["GET", "POST"])
@console_view
def agent_detail(request, agent_id: int):
    actor = request.actor
    op = request.POST.get("op", "")
    agent = access.access_agent_by_id(actor, agent_id, for_write=request.method == "POST")
    key_form = KeyForm(request.POST if op == "key" else None)
    rid = request_id(request)
    if op == "key" and key_form.is_valid():
        key, plain_key = services.api_key_create(actor=actor, agent=agent, request_id=rid, **key_form.cleaned_data)
        token = _new_key_hold(request, agent.id, plain_key)
        # 303: the browser follows with a GET, and a reload repeats that GET, not this POST
        response = HttpResponseRedirect(f"{reverse('frontend:agent', args=[agent.id])}?{urlencode({'new_key': token})}")
        response.status_code = 303
        return response
    elif op == "deactivate":
        services.agent_deactivate(actor=actor, agent=agent, request_id=rid)
        messages.success(request, _("Agent deactivated; its keys are revoked."))
        return redirect("frontend:agent", agent_id=agent.id)
    elif op == "sharing":
        sharing = AgentSharingForm(request.POST)
        if not sharing.is_valid():
            messages.error(request, _("Unknown choice."))
            return redirect("frontend:agent", agent_id=agent.id)
        services.agent_update(actor=actor, agent=agent, data=sharing.cleaned_data, request_id=rid)
        messages.success(request, _("Saved: its writes that name no visibility get “%(v)s”.")
                         % {"v": agent.get_default_visibility_display()})
        return redirect("frontend:agent", agent_id=agent.id)
    keys = None
    if actor.is_org_admin:  # keys are for org admins only (teams.access.access_key_by_id)
        keys = team_selectors.key_list(actor=actor, agent=agent).order_by("-id")
    token = request.GET.get("new_key", "") if request.method == "GET" else ""
    plain_key = _new_key_take(request, agent.id, token) if token else None
    sharing_form = AgentSharingForm(initial={"default_visibility": agent.default_visibility})
    return page(request, "frontend/agent.html", {"agent": agent, "keys": keys, "key_form": key_form,
                                                 "sharing_form": sharing_form, "plain_key": plain_key,
                                                 "key_gone": bool(token) and plain_key is None, "nav": "agents"},
                status=400 if op == "key" else 200)


@require_POST
@console_view(back="frontend:agents")
def key_revoke(request, key_id: int):
    key = access.access_key_by_id(request.actor, key_id, for_write=True)
    services.api_key_revoke(actor=request.actor, key=key, request_id=request_id(request))
    messages.success(request, _("Key %(prefix)s revoked.") % {"prefix": key.prefix})
    return redirect("frontend:agent", agent_id=key.agent_id)


# --- audit ----------------------------------------------------------------------------------------


@require_GET
@console_view
def audit(request):
    actor = request.actor
    access.require_org_admin(actor, action="read the audit log")
    form = AuditFilterForm(request.GET or None)
    if form.is_bound and not form.is_valid():
        # As Memories and Assets: no table rather than the whole log under filters the admin believes
        # are applied (one bad date used to drop every other filter).
        return page(request, "frontend/audit.html", {"form": form, "page": None, "nav": "audit"}, status=400)
    d = form.cleaned_data if form.is_bound else {}
    p = selectors.audit_page(
        actor=actor, action=d.get("action", ""), actor_label=d.get("actor", ""),
        object_type=d.get("object_type", ""), object_id=d.get("object_id", ""), outcome=d.get("outcome", ""),
        since=day_start(d.get("since")), until=day_end(d.get("until")), after=d.get("after"),
    )
    return page(request, "frontend/audit.html", {"form": form, "page": p, "nav": "audit",
                                                 "next_qs": next_page_qs(request, p)})
